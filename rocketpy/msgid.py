"""Message ids: the offset msg id (store host + commitlog offset) and the client unique id (UNIQ_KEY).

Offset msg id (RocketMQ ``MessageDecoder.createMessageId``): 16 bytes as 32 uppercase hex chars,
``store ip (4) | store port int32 (4) | commitlog offset int64 (8)``, big-endian.

Unique id (RocketMQ ``MessageClientIDSetter``): 16 bytes as 32 uppercase hex chars,
``ip (4) | pid int16 | per-process random int32 | ms since the 1st of the month int32 | counter int16``.
The first three fields are a per-process constant prefix, so a new id costs a time read, a counter
increment and one small format.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import os
import random
import socket
import struct
import time

_OFFSET_ID = struct.Struct(">4sIQ")  # ip | port | commitlog offset
_HEX_LEN = 32


def _ip_bytes(ip: str) -> bytes:
    try:
        return socket.inet_aton(ip)
    except OSError as e:
        raise ValueError(f"not an IPv4 address: {ip!r}; offset msg ids need an IPv4 store address") from e


def create_offset_msg_id(store_ip: str, store_port: int, commitlog_offset: int) -> str:
    """Build the 32-hex-char offset msg id of a stored message.

    Args:
        store_ip: the broker's IPv4 address.
        store_port: the broker's listen port.
        commitlog_offset: the record's physical offset in the commitlog.
    """
    return _OFFSET_ID.pack(_ip_bytes(store_ip), store_port & 0xFFFFFFFF, commitlog_offset).hex().upper()


def offset_msg_id_from_packed(host8: bytes, commitlog_offset: int) -> str:
    """Offset msg id from the 8 stored host bytes (ip + int32 port) and an offset (hot path)."""
    return (host8 + commitlog_offset.to_bytes(8, "big")).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Split an offset msg id into ``(ip, port, commitlog_offset)``.

    Raises:
        ValueError: when ``msg_id`` is not 32 hex chars, or its port is not a port (a unique message
            id, ``SendResult.msg_id``, is 32 hex chars too; the message says what is expected).
    """
    if len(msg_id) != _HEX_LEN:
        raise ValueError(f"offset msg id must be 32 hex chars, got {len(msg_id)}: {msg_id!r}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as e:
        raise ValueError(f"offset msg id is not hex: {msg_id!r}") from e
    ip, port, offset = _OFFSET_ID.unpack(raw)
    if not 0 < port <= 65535:
        raise ValueError(
            f"{msg_id!r} is not an offset msg id (its port would be {port}); a unique message id "
            "(SendResult.msg_id) is found by its topic and key instead"
        )
    return socket.inet_ntoa(ip), port, offset


def local_ipv4() -> str:
    """Best-effort primary IPv4 of this host (no packet is sent); 127.0.0.1 when unknown."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.255", 1))
        return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    finally:
        s.close()


class _UniqueIdGenerator:
    """Per-process generator of UNIQ_KEY values; thread-safe.

    The counter is an ``itertools.count`` (its ``next`` is atomic under the GIL, no lock), and the
    hex of prefix + millisecond is built once per millisecond: a send pays for one clock read and
    one short format.
    """

    def __init__(self) -> None:
        prefix = _ip_bytes(local_ipv4()) + struct.pack(">hi", os.getpid() & 0x7FFF, random.getrandbits(31))
        self._prefix_hex = prefix.hex().upper()
        self._counter = itertools.count(1)
        self._set_month(time.time())
        self._stamp = (-1, "")  # (ms, prefix hex + ms hex): replaced whole, so readers see a pair

    def _set_month(self, now_s: float) -> None:
        now = _dt.datetime.fromtimestamp(now_s)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        self._month_start_ms = int(start.timestamp() * 1000)
        nxt = (start + _dt.timedelta(days=32)).replace(day=1)
        self._next_month_ms = int(nxt.timestamp() * 1000)

    def next(self) -> str:
        counter = next(self._counter) & 0xFFFF
        now_ms = int(time.time() * 1000)
        stamp_ms, head = self._stamp
        if now_ms != stamp_ms:
            if now_ms >= self._next_month_ms:
                self._set_month(now_ms / 1000)
            diff = (now_ms - self._month_start_ms) & 0xFFFFFFFF
            head = f"{self._prefix_hex}{diff:08X}"
            self._stamp = (now_ms, head)
        return f"{head}{counter:04X}"


_GEN = _UniqueIdGenerator()


def new_unique_id() -> str:
    """A new client unique message id (``UNIQ_KEY``), 32 uppercase hex chars."""
    return _GEN.next()


def reset_after_fork() -> None:
    """Give a forked child its own prefix (pid changes)."""
    global _GEN
    _GEN = _UniqueIdGenerator()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=reset_after_fork)
