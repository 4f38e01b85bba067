"""The one properties-string scanner and the send screens (``rocketpy.message_props``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.broker.processors import send as broker_send
from rocketpy.message import properties_to_string, string_to_properties
from rocketpy.message_props import (
    DELAY_SEP,
    TAGS_SEP,
    UNIQ_SEP,
    get_property,
    is_half_message,
    may_be_timed,
    may_be_timed_or_half,
)

NAME = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1)
VALUE = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)))


def test_get_property_reads_one_value() -> None:
    props = properties_to_string({"TAGS": "a", "UNIQ_KEY": "U1", "KEYS": "k1 k2"})
    assert get_property(props, UNIQ_SEP) == "U1"
    assert get_property(props, TAGS_SEP) == "a"
    assert get_property(props, DELAY_SEP) is None
    assert get_property("", TAGS_SEP) is None
    assert get_property("TAGS\x01last", TAGS_SEP) == "last"  # no trailing separator
    assert get_property("TAGS\x01\x02", TAGS_SEP) == ""


def test_get_property_matches_whole_names_only() -> None:
    props = "NOT_UNIQ_KEY\x01x\x02UNIQ_KEY\x01real\x02"
    assert get_property(props, UNIQ_SEP) == "real"
    assert get_property("XTAGS\x01a\x02", TAGS_SEP) is None
    assert get_property("TAGS\x01first\x02TAGS\x01second\x02", TAGS_SEP) == "first"


@given(st.dictionaries(NAME, VALUE, max_size=6), NAME)
def test_get_property_agrees_with_the_decoder(props: dict[str, str], name: str) -> None:
    text = properties_to_string(props)
    assert get_property(text, name + "\x01") == string_to_properties(text).get(name)


@pytest.mark.parametrize(
    ("props", "timed", "half"),
    [
        ({}, False, False),
        ({"TAGS": "a", "UNIQ_KEY": "U"}, False, False),
        ({"DELAY": "3"}, True, False),
        ({"TIMER_DELIVER_MS": "1700000000000"}, True, False),
        ({"TIMER_DELAY_SEC": "5"}, True, False),
        ({"TRAN_MSG": "true", "PGROUP": "pg"}, False, True),
        ({"TRAN_MSG": "false"}, False, False),
        ({"DELAY": "1", "TRAN_MSG": "true"}, True, True),
    ],
)
def test_screens(props: dict[str, str], timed: bool, half: bool) -> None:
    text = properties_to_string(props)
    assert may_be_timed(text) is timed
    assert is_half_message(text) is half
    assert may_be_timed_or_half(text) is (timed or half)


def test_a_screen_may_say_yes_for_a_plain_message() -> None:
    assert may_be_timed(properties_to_string({"MY_DELAY_NOTE": "none"}))  # cheap: never a false no


def test_batch_unique_key_keeps_the_compiled_rule() -> None:
    assert broker_send._batch_unique_key("UNIQ_KEY\x01U\x02") == "U"
    assert broker_send._batch_unique_key("TAGS\x01t\x02UNIQ_KEY\x01U\x02") == "U"
    assert broker_send._batch_unique_key("XUNIQ_KEY\x01a\x02UNIQ_KEY\x01U\x02") == ""  # first match only
    assert broker_send._batch_unique_key("TAGS\x01t\x02") == ""
