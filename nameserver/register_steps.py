"""A whole topic table in one REGISTER_BROKER, decoded and merged in bounded steps.

Owns ``register_parts``: a broker that does not split its registration (``enableSplitRegistration
=false``, or another implementation) may send 100,000 topics in one msgpack body; decoding and
validating it at once would stop the NameServer for seconds. The body is read with a streaming
``msgpack.Unpacker``: the DataVersion first (the table is skipped over in C), then the table
``step`` topics at a time, each step validated and merged as one part of a split registration
(route_info's ``split``), with the event loop free between steps.
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


def _bad(e: Exception) -> HeaderError:
    first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    return HeaderError(f"request body is not a valid RegisterBrokerBody: {first}")


def _locate(body: Body) -> tuple[int, Any]:
    """Byte position of the topic table inside ``body`` (-1: none) and the raw DataVersion."""
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(body) + 1, strict_map_key=False)
    unpacker.feed(body)
    table_pos, version = -1, None
    for _ in range(unpacker.read_map_header()):
        if unpacker.unpack() != _WRAPPER:
            unpacker.skip()
            continue
        for _ in range(unpacker.read_map_header()):
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
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(body) + 1, strict_map_key=False)
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
