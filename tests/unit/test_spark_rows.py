"""The Spark connector's write columns: layout checks and row -> Message conversion."""

from __future__ import annotations

import pytest

from rocketpy.spark.options import SparkOptionError
from rocketpy.spark.rows import check_layout, to_message


def test_layout_and_conversion() -> None:
    layout = check_layout(
        [("BODY", "string"), ("tags", "string"), ("keys", "array<string>"),
         ("properties", "map<string,string>"), ("orderkey", "string")],
        "T",
    )  # fmt: skip
    assert (
        layout.columns == ("body", "tags", "keys", "properties", "orderKey") and layout.routing == "orderKey"
    )
    msg, route = to_message(layout, ("hé", "a", ["k1", "k2"], {"p": "1"}, "o-7"), 0)
    assert (msg.topic, msg.body, msg.tags, msg.keys, msg.properties) == (
        "T",
        "hé".encode(),
        "a",
        ["k1", "k2"],
        {"p": "1"},
    )
    assert route == "o-7"
    layout = check_layout([("body", "binary"), ("topic", "string"), ("keys", "string")], None)
    msg, route = to_message(layout, (b"\x00", "U", "one"), 3)
    assert (msg.topic, msg.body, msg.keys, route) == ("U", b"\x00", ["one"], None)
    with pytest.raises(SparkOptionError, match="row 3 of this partition has no topic"):
        to_message(layout, (b"x", None, None), 3)
    with pytest.raises(SparkOptionError, match="null body"):
        to_message(layout, (None, "U", None), 0)


@pytest.mark.parametrize(
    ("fields", "topic", "match"),
    [
        ([("tags", "string")], "T", "needs a body column"),
        ([("body", "int")], "T", "body is int; it must be binary or string"),
        ([("body", "binary"), ("tag", "string")], "T", "did you mean 'tags'"),
        ([("body", "binary"), ("queue_id", "int"), ("orderKey", "string")], "T", "not both"),
        ([("body", "binary")], None, "no topic"),
    ],
)
def test_bad_layouts(fields: list[tuple[str, str]], topic: str | None, match: str) -> None:
    with pytest.raises(SparkOptionError, match=match):
        check_layout(fields, topic)
