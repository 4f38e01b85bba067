"""The HA wire: a raw TCP stream on ``haListenPort`` (not the remoting protocol), all big-endian.

RocketMQ's scheme (reference §9) plus a handshake of rocketpy's own, so that a wrong peer is told why
and disconnected instead of corrupting a store:

```
slave -> master  HELLO   magic b"RPHA" | version u8 | brokerId i64 | mappedFileSizeCommitLog i32 |
                         nameLen u16 | brokerName (UTF-8)
master -> slave  WELCOME magic b"RPHA" | status u8 (0 accepted, 1 refused) | textLen u16 | text (UTF-8)
slave -> master  REPORT  maxPhyOffset i64   (after HELLO, after each chunk, every haSendHeartbeatInterval)
master -> slave  TRANSFER masterPhyOffset i64 | bodySize i32 | bodySize raw commitlog bytes
                         (bodySize <= haTransferBatchSize; 0 is a heartbeat)
```

A master reads HELLO's fixed part first and refuses anything whose magic is wrong (a remoting
client, a port scanner) before reading more.
"""

from __future__ import annotations

import asyncio
import struct

from rocketpy.errors import RocketpyError

MAGIC = b"RPHA"
VERSION = 1
#: magic, version, brokerId, mappedFileSizeCommitLog, broker name length
HELLO = struct.Struct(">4sBqiH")
#: magic, status, text length
WELCOME = struct.Struct(">4sBH")
#: the slave's max commitlog offset
REPORT = struct.Struct(">q")
#: master commitlog offset of the body, body size
TRANSFER = struct.Struct(">qi")

STATUS_ACCEPTED = 0
STATUS_REFUSED = 1
#: The largest transfer body a slave accepts (haTransferBatchSize is capped at this).
MAX_TRANSFER_BODY = 4 << 20
MAX_NAME_BYTES = 255
MAX_TEXT_BYTES = 4096


class HAProtocolError(RocketpyError):
    """The peer broke the HA protocol (wrong magic, garbled or truncated frame)."""


class HARefused(RocketpyError):
    """The master refuses this slave (the text says why)."""


def describe_stream_error(e: BaseException) -> str:
    """One phrase for why an HA stream ended."""
    if isinstance(e, asyncio.IncompleteReadError):
        return f"connection closed mid-frame ({len(e.partial)} of {e.expected} bytes)"
    if isinstance(e, TimeoutError):
        return "no traffic within the timeout"
    return str(e) or type(e).__name__


def encode_hello(broker_id: int, file_size: int, broker_name: str) -> bytes:
    """The slave's HELLO."""
    name = broker_name.encode()[:MAX_NAME_BYTES]
    return HELLO.pack(MAGIC, VERSION, broker_id, file_size, len(name)) + name


def encode_welcome(status: int, text: str) -> bytes:
    """The master's answer to HELLO (``text`` says why when refused)."""
    raw = text.encode()[:MAX_TEXT_BYTES]
    return WELCOME.pack(MAGIC, status, len(raw)) + raw


def check_magic(magic: bytes, what: str) -> None:
    """Raise ``HAProtocolError`` unless ``magic`` is the HA magic."""
    if magic != MAGIC:
        raise HAProtocolError(
            f"{what} does not speak the HA protocol (first bytes {magic!r}, expected {MAGIC!r})"
        )
