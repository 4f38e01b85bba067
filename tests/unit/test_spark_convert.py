"""Pull bodies -> Arrow: the buffers of ``decode_columns`` read back as what ``decode_records`` reads.

Runs with the active core (compiled by default; ``scripts/test`` runs it again on the pure twin).
"""

from __future__ import annotations

import datetime as dt
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from rocketpy import record
from rocketpy.message import properties_to_string
from rocketpy.spark.convert import to_record_batch
from rocketpy.spark.schema import ARROW_SCHEMA

UTC = dt.UTC
TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8)
PROPS = st.dictionaries(TEXT.filter(bool), TEXT, max_size=4)


def expected_row(m: Any, broker: str) -> dict[str, Any]:
    """One row as the data source documents it, from the SDK's own decoding."""

    def ts(ms: int) -> dt.datetime:
        return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)

    return {
        "topic": m.topic, "broker_name": broker, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
        "msg_id": m.msg_id, "keys": m.keys, "tags": m.tags, "body": m.body,
        "properties": list(m.properties.items()), "born_timestamp": ts(m.born_timestamp),
        "store_timestamp": ts(m.store_timestamp), "reconsume_times": m.reconsume_times,
    }  # fmt: skip


@st.composite
def records(draw: Any) -> bytes:
    props = draw(PROPS)
    if draw(st.booleans()):
        props["TAGS"] = draw(TEXT)
    if draw(st.booleans()):
        props["KEYS"] = " ".join(draw(st.lists(TEXT.filter(lambda k: " " not in k), max_size=3)))
    body = draw(st.binary(max_size=64))
    compressed = draw(st.booleans())
    return record.encode_record(
        topic=draw(st.sampled_from(["T", "Topic-é"])), body=zlib.compress(body) if compressed else body,
        queue_id=draw(st.integers(0, 1 << 20)), queue_offset=draw(st.integers(0, 1 << 40)),
        physical_offset=draw(st.integers(0, 1 << 40)), sys_flag=record.COMPRESSED_FLAG if compressed else 0,
        born_timestamp=draw(st.integers(0, 4_000_000_000_000)), born_host=("10.1.2.3", 5),
        store_timestamp=draw(st.integers(0, 4_000_000_000_000)), store_host=("10.0.0.1", 10911),
        reconsume_times=draw(st.integers(0, 16)), properties=properties_to_string(props),
    )  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(records(), max_size=6))
def test_batch_rows_are_the_decoded_messages(recs: list[bytes]) -> None:
    body = b"".join(recs)
    batch = to_record_batch(body, "broker-a")
    assert batch.schema.equals(ARROW_SCHEMA)
    batch.validate(full=True)
    assert batch.to_pylist() == [expected_row(m, "broker-a") for m in record.decode_records(body)]
    # a chunk as the reader hands it on: the bodies of several pulls, not joined
    parts = [b"".join(recs[:2]), b"", *recs[2:]]
    assert to_record_batch(parts, "broker-a").equals(batch)


def test_a_stored_time_out_of_range_fails_the_read() -> None:
    body = record.encode_record(topic="T", body=b"x", born_timestamp=(1 << 63) - 1)
    with pytest.raises(Exception, match=r"overflow|out of bounds"):
        to_record_batch(body, "b")
