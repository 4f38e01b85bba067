"""A whole topic table in one REGISTER_BROKER, decoded and merged in bounded steps.

Owns ``register_parts`` and ``register_parts_of_doc``: a broker that does not split its
registration (``enableSplitRegistration=false``, or another implementation: RocketMQ's Java broker
sends JSON) may send 100,000 topics in one body; decoding and validating it at once would stop the
NameServer for seconds. A msgpack body is read with a streaming ``msgpack.Unpacker``: the
DataVersion first (the table is skipped over in C), then the table ``step`` topics at a time; a JSON
body is decoded in slices first (``rocketpy.remoting.slices``) and its table cut in steps. Each step
is validated and merged as one part of a split registration (route_info's ``split``), with the
event loop free between steps.

Hostile bodies cost no more than honest ones: the body's maps and the wrapper hold a handful of
keys (``MAX_WRAPPER_KEYS``), and every value but the table is unpacked with limits checked before
allocating (``MAX_VALUE_ITEMS`` entries per map or array).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgpack
from pydantic import ValidationError

from rocketpy.errors import HeaderError
from rocketpy.route import DataVersion, TopicConfigSerializeWrapper

_WRAPPER, _TABLE, _VERSION = "topicConfigSerializeWrapper", "topicConfigTable", "dataVersion"
Body = bytes | bytearray | memoryview
#: Keys RegisterBrokerBody and its wrapper may have (they have 2 and 2-3).
MAX_WRAPPER_KEYS = 16
#: Entries of any map or array inside a DataVersion or one topic's config (they have under 10).
MAX_VALUE_ITEMS = 64


def _unpacker(body: Body) -> msgpack.Unpacker:
    return msgpack.Unpacker(
        raw=False,
        max_buffer_size=len(body) + 1,
        strict_map_key=False,
        max_map_len=MAX_VALUE_ITEMS,
        max_array_len=MAX_VALUE_ITEMS,
    )


def _map_header(unpacker: msgpack.Unpacker, what: str) -> int:
    count = unpacker.read_map_header()
    if count > MAX_WRAPPER_KEYS:
        raise ValueError(f"{what} has {count} keys; the limit is {MAX_WRAPPER_KEYS}")
    return int(count)


def _bad(e: Exception) -> HeaderError:
    first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    return HeaderError(f"request body is not a valid RegisterBrokerBody: {first}")


def _locate(body: Body) -> tuple[int, Any]:
    """Byte position of the topic table inside ``body`` (-1: none) and the raw DataVersion."""
    unpacker = _unpacker(body)
    unpacker.feed(body)
    table_pos, version = -1, None
    for _ in range(_map_header(unpacker, "RegisterBrokerBody")):
        if unpacker.unpack() != _WRAPPER:
            unpacker.skip()
            continue
        for _ in range(_map_header(unpacker, _WRAPPER)):
            key = unpacker.unpack()
            if key == _TABLE:
                table_pos = unpacker.tell()
                unpacker.skip()
            elif key == _VERSION:
                version = unpacker.unpack()
            else:
                unpacker.skip()
    return table_pos, version


def register_parts(body: Body, step: int) -> Iterator[tuple[int, int, TopicConfigSerializeWrapper]]:
    """``(index, total, part)`` of a msgpack REGISTER_BROKER body, ``step`` topics per part.

    Raises:
        HeaderError: the body is not a RegisterBrokerBody (raised when the bad part is reached).
    """
    try:
        table_pos, raw_version = _locate(body)
        version = DataVersion.from_wire(raw_version) if raw_version is not None else DataVersion()
        if table_pos < 0:
            yield 0, 1, TopicConfigSerializeWrapper(data_version=version)
            return
        unpacker = _unpacker(body)
        unpacker.feed(memoryview(body)[table_pos:])
        count = unpacker.read_map_header()
    except (ValueError, TypeError, ValidationError, msgpack.UnpackException) as e:
        raise _bad(e) from e
    total = max(1, -(-count // step))
    left = count
    for index in range(total):
        try:
            n = min(step, left)
            table = {unpacker.unpack(): unpacker.unpack() for _ in range(n)}
            left -= n
            part = TopicConfigSerializeWrapper.from_wire({_TABLE: table, _VERSION: version})
        except (ValueError, TypeError, ValidationError, msgpack.UnpackException) as e:
            raise _bad(e) from e
        yield index, total, part


def register_parts_of_doc(doc: Any, step: int) -> Iterator[tuple[int, int, TopicConfigSerializeWrapper]]:
    """``register_parts`` of a RegisterBrokerBody already decoded (a JSON body, ``decode_in_slices``).

    Raises:
        HeaderError: the document is not a RegisterBrokerBody (raised when the bad part is reached).
    """
    try:
        if type(doc) is not dict:
            raise ValueError(f"it must be a map, got {type(doc).__name__}")
        wrapper = doc.get(_WRAPPER)
        if wrapper is not None and type(wrapper) is not dict:
            raise ValueError(f"{_WRAPPER} must be a map")
        wrapper = wrapper or {}
        raw_version = wrapper.get(_VERSION)
        version = DataVersion.from_wire(raw_version) if raw_version is not None else DataVersion()
        table = wrapper.get(_TABLE) or {}
        if type(table) is not dict:
            raise ValueError(f"{_TABLE} must be a map")
    except (ValueError, TypeError, ValidationError) as e:
        raise _bad(e) from e
    names = list(table)
    total = max(1, -(-len(names) // step))
    for index in range(total):
        try:
            part = {name: table[name] for name in names[index * step : (index + 1) * step]}
            yield index, total, TopicConfigSerializeWrapper.from_wire({_TABLE: part, _VERSION: version})
        except (ValueError, TypeError, ValidationError) as e:
            raise _bad(e) from e
