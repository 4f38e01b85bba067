"""``rocketpy store-dump PATH [--json]``: print what a store file holds.

Detects the file type by its directory: a ``commitlog/`` file prints its records, a
``consumequeue/{topic}/{queue}/`` file its 20-byte units, an ``index/`` file its header. Output is a
table, or one JSON object per line with ``json_lines``. Reads through a read-only mapping.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import zlib
from collections.abc import Iterator
from typing import Any

from rocketpy.broker.store.consume_queue import UNIT, UNIT_SIZE
from rocketpy.broker.store.index import HEADER
from rocketpy.message import MessageConst, string_to_properties
from rocketpy.msgid import offset_msg_id_from_packed
from rocketpy.record import BLANK_MAGIC, HEAD_SIZE, MESSAGE_MAGIC, RECORD_HEAD, SIZE_MAGIC


def _kind(path: str) -> str | None:
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    if len(parts) >= 2 and parts[-2] == "commitlog":
        return "commitlog"
    if len(parts) >= 4 and parts[-4] == "consumequeue":
        return "consumequeue"
    if len(parts) >= 2 and parts[-2] == "index":
        return "index"
    return None


def _records(mm: mmap.mmap, base: int) -> Iterator[dict[str, Any]]:
    pos, size = 0, len(mm)
    while pos + 8 <= size:
        total, magic = SIZE_MAGIC.unpack_from(mm, pos)
        if magic == BLANK_MAGIC:
            yield {"offset": base + pos, "size": total, "type": "BLANK"}
            return
        if magic != MESSAGE_MAGIC or total < HEAD_SIZE + 3 or pos + total > size:
            if any(mm[pos : pos + 8]):
                yield {"offset": base + pos, "size": total, "type": "INVALID", "magic": f"0x{magic:08x}"}
            return
        f = RECORD_HEAD.unpack_from(mm, pos)
        body_len = f[14]
        t = pos + HEAD_SIZE + body_len
        tl = mm[t]
        topic = mm[t + 1 : t + 1 + tl].decode(errors="replace")
        props = string_to_properties(mm[t + 3 + tl : pos + total].decode(errors="replace"))
        yield {
            "offset": base + pos, "size": total, "type": "MESSAGE", "topic": topic, "queueId": f[3],
            "queueOffset": f[5], "storeTimestamp": f[10], "tags": props.get(MessageConst.TAGS, ""),
            "keys": props.get(MessageConst.KEYS, ""), "uniqKey": props.get(MessageConst.UNIQ_KEY, ""),
            "bodyLen": body_len, "crcOk": zlib.crc32(mm[pos + HEAD_SIZE : t]) == f[2],
            "offsetMsgId": offset_msg_id_from_packed(f[11], f[6]),
        }  # fmt: skip
        pos += total


def _units(mm: mmap.mmap, base: int) -> Iterator[dict[str, Any]]:
    for i in range(len(mm) // UNIT_SIZE):
        phys, size, tag = UNIT.unpack_from(mm, i * UNIT_SIZE)
        if size == 0:
            return
        yield {"queueOffset": (base + i * UNIT_SIZE) // UNIT_SIZE, "commitlogOffset": phys, "size": size,
               "tagsCode": tag}  # fmt: skip


def _index_header(mm: mmap.mmap) -> Iterator[dict[str, Any]]:
    b_ts, e_ts, b_phys, e_phys, slots, count = HEADER.unpack_from(mm, 0)
    yield {"beginTimestamp": b_ts, "endTimestamp": e_ts, "beginPhyOffset": b_phys, "endPhyOffset": e_phys,
           "hashSlotCount": slots, "indexCount": count}  # fmt: skip


def _print(rows: Iterator[dict[str, Any]], json_lines: bool) -> int:
    n = 0
    header: list[str] | None = None
    for row in rows:
        if json_lines:
            print(json.dumps(row))
        else:
            if header is None or list(row) != header:
                header = list(row)
                print("  ".join(header))
            print("  ".join(str(v) for v in row.values()))
        n += 1
    return n


def main(path: str, json_lines: bool) -> int:
    """Print the contents of one store file; returns the process exit code."""
    kind = _kind(path)
    if kind is None:
        print(f"error: cannot tell what {path} is: expected a file in commitlog/, consumequeue/TOPIC/QUEUE/ "
              f"or index/ of a store directory", file=sys.stderr)  # fmt: skip
        return 2
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                print(f"{path}: empty file", file=sys.stderr)
                return 0
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                name = os.path.basename(path)
                base = int(name) if name.isdigit() and kind != "index" else 0
                rows = {"commitlog": _records, "consumequeue": _units}.get(kind)
                n = _print(rows(mm, base) if rows else _index_header(mm), json_lines)
    except OSError as e:
        print(f"error: cannot read {path}: {e.strerror}", file=sys.stderr)
        return 1
    if not json_lines:
        print(f"({n} {'rows' if kind != 'index' else 'header'} in {kind} file {path})", file=sys.stderr)
    return 0
