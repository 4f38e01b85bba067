"""Static bounds shared by the daemons and the SDK.

Every frame, pending-request table and per-connection task set is bounded by a number that lives
here (or in a config field that defaults to one of these). Exceeding a bound gets a fast refusal or
a flow-control pause, never unbounded growth. The relations between the numbers are asserted at
import time, so a bad edit fails loudly.
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB

#: Largest frame (bytes after the 4-byte length prefix) a connection accepts; RocketMQ's
#: ``com.rocketmq.remoting.frameMaxLength`` default.
MAX_FRAME_BYTES = 16 * MIB

#: The header length field is 24 bits wide.
MAX_HEADER_BYTES = (1 << 24) - 1

#: Largest frame header a connection decodes (``maxHeaderBytes``, both daemons); a longer one closes
#: the connection as soon as its length is read, before anything of it is buffered. The largest header
#: of a send RocketMQ accepts is about 33 KiB (properties are at most 32,767 bytes); a JSON header
#: writes each \x01 / \x02 of the properties as a 6-byte escape, so a client sending very many tiny
#: properties may need more. Decoding 64 KiB of the smallest msgpack values takes about 2 ms.
DEFAULT_MAX_HEADER_BYTES = 64 * KIB

#: Entries of one map and elements of one array a header may hold, checked before they are decoded
#: (msgpack's ``max_map_len`` / ``max_array_len``; the JSON header's comma count). Above
#: ``shape.MAX_EXT_FIELDS``, so a header of up to this many fields is still answered
#: INVALID_PARAMETER rather than closed.
MAX_HEADER_ITEMS = 1024

#: Largest message body a producer may send (RocketMQ ``maxMessageSize``).
MAX_MESSAGE_BYTES = 4 * MIB

#: Requests a peer may have awaiting a response on one connection before new calls are refused.
MAX_PENDING_REQUESTS_PER_CONNECTION = 65536

#: Asynchronous handlers (e.g. held long-polling pulls) one connection may have running; past this
#: the server stops reading from that connection until some finish.
MAX_INFLIGHT_HANDLERS_PER_CONNECTION = 4096

#: Opaque (request id) values wrap below this, so Java/JSON peers see a positive int32.
MAX_OPAQUE = (1 << 31) - 1

#: Bytes a connection may hold unsent because its peer does not read; past this the connection is
#: closed (reading already pauses at the transport's high-water mark, far below this).
MAX_WRITE_BUFFER_BYTES = 64 * MIB

#: Bodies at least this large are written as their own buffer (no copy into the header buffer).
WRITE_JOIN_MAX_BODY_BYTES = 16 * KIB

#: Frames one connection may have decoded and dispatched per event-loop turn; a connection with more
#: waiting stops reading and continues in the next turn, so every other connection gets its turn
#: in between (one pipelining or hostile peer cannot stall the rest).
MAX_FRAMES_PER_TURN = 32

#: Handler time one connection's turn should take; a connection whose turns run longer gets fewer
#: frames per turn (halved each time, down to 1), and more again once its turns are cheap.
TURN_BUDGET_SECONDS = 0.001

#: Connections a daemon accepts in total, and from one peer IP address (``maxConnections``,
#: ``maxConnectionsPerAddress``); connections past either are closed at once.
MAX_CONNECTIONS = 4096
MAX_CONNECTIONS_PER_ADDRESS = 1024

#: A server closes a connection that sent nothing for this long while nothing was running for it
#: (RocketMQ's ``serverChannelMaxIdleTimeSeconds``; clients heartbeat every 30 s).
CHANNEL_IDLE_SECONDS = 120

#: A server closes a connection whose incomplete frame has not completed for this long (slow-loris).
PARTIAL_FRAME_SECONDS = 30

assert MAX_MESSAGE_BYTES < MAX_FRAME_BYTES, "a message must fit in one frame"
assert DEFAULT_MAX_HEADER_BYTES <= MAX_HEADER_BYTES, "the header length field is 24 bits"
assert MAX_FRAME_BYTES <= (1 << 32) - 1, "the frame length field is 32 bits"
assert MAX_INFLIGHT_HANDLERS_PER_CONNECTION <= MAX_PENDING_REQUESTS_PER_CONNECTION
assert WRITE_JOIN_MAX_BODY_BYTES < MAX_FRAME_BYTES
assert MAX_WRITE_BUFFER_BYTES >= 2 * MAX_FRAME_BYTES, "a stalled peer must still fit a full frame"
