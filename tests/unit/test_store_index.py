"""Index fast path: ``put_props`` writes exactly the entries ``put_message(index_keys(...))`` writes."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.broker.store.allocate import AllocateService
from rocketpy.broker.store.index import IndexService
from rocketpy.broker.store.mapped_file import MappedFile
from rocketpy.broker.store.props import index_keys
from rocketpy.message import properties_to_string

_HEX = st.text(alphabet="0123456789ABCDEF", min_size=1, max_size=70)
_ANY = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02 "), min_size=0, max_size=40)
_PROPS = st.fixed_dictionaries(
    {},
    optional={
        "UNIQ_KEY": st.one_of(_HEX, _ANY),
        "KEYS": st.lists(_ANY, max_size=3).map(" ".join),
        "TAGS": _ANY,
        "XUNIQ_KEY": _HEX,
    },
).map(properties_to_string)


def _service() -> IndexService:
    return IndexService(tempfile.mkdtemp(prefix="idx_"), 16, 12, lambda: 1_700_000_000.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_PROPS, st.sampled_from(["T", "Tö", "Order#Topic"])), min_size=1, max_size=30))
def test_put_props_matches_put_message(stream: list[tuple[str, str]]) -> None:
    fast, slow = _service(), _service()
    for i, (props, topic) in enumerate(stream):
        ts = 1_700_000_000_000 + i * 700
        fast.put_props(topic, props, i * 100, ts)
        slow.put_message(topic, index_keys(props), i * 100, ts)
    fast.sync_header()
    slow.sync_header()
    assert len(fast.files) == len(slow.files)  # 12 entries a file: rolls are exercised too
    for f, s in zip(fast.files, slow.files, strict=True):
        assert (f.index_count, f.end_phys, f.end_ts) == (s.index_count, s.end_phys, s.end_ts)
        assert bytes(f.mm) == bytes(s.mm)


def test_put_props_finds_the_uniq_key() -> None:
    idx = _service()
    props = properties_to_string({"TAGS": "A", "UNIQ_KEY": "0A0B0C0D1234567812345678ABCDEF01"})
    for i in range(3):
        idx.put_props("T", props, 4096 * i, 1_700_000_000_000)
    assert idx.lookup("T", "0A0B0C0D1234567812345678ABCDEF01", 10, 0, 2**62) == [8192, 4096, 0]
    assert idx.lookup("T", "0A0B0C0D1234567812345678ABCDEF02", 10, 0, 2**62) == []


class _HeldAllocator:
    """Keeps file requests until ``deliver``: an allocator thread busy with a commitlog file."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, int, Callable[[MappedFile | None, BaseException | None], None]]] = []

    def request(
        self, path: str, base: int, size: int, cb: Callable[[MappedFile | None, BaseException | None], None]
    ) -> None:
        self.requests.append((path, size, cb))

    def deliver(self) -> None:
        requests, self.requests = self.requests, []
        for path, size, cb in requests:
            cb(MappedFile.open(path, 0, size), None)


def test_a_message_is_found_while_its_index_file_is_still_being_created() -> None:
    idx, held = _service(), _HeldAllocator()
    idx.attach_allocator(cast(AllocateService, held))
    key = "C0A80001375200000000000000000001"
    props = properties_to_string({"UNIQ_KEY": key, "KEYS": "order-7"})
    for i in range(3):
        idx.put_props("T", props, 4096 * i, 1_700_000_000_000 + i)
    assert idx.files == [] and len(held.requests) == 1  # entries wait for the first file
    assert idx.lookup("T", key, 10, 0, 2**62) == [8192, 4096, 0]
    assert idx.lookup("T", "order-7", 2, 0, 2**62) == [8192, 4096]  # newest first, at most max_num
    assert idx.lookup("T", key, 10, 1_700_000_000_001, 1_700_000_000_001) == [4096]  # the time range
    assert idx.lookup("U", key, 10, 0, 2**62) == []  # another topic's key
    held.deliver()  # the file arrives: the same answers, now from the file
    assert len(idx.files) == 1 and idx.lookup("T", key, 10, 0, 2**62) == [8192, 4096, 0]
    idx.put_props("T", props, 12288, 1_700_000_000_003)
    assert idx.lookup("T", key, 10, 0, 2**62) == [12288, 8192, 4096, 0]
