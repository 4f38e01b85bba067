"""Structured bodies decoded a slice at a time, with the event loop free between slices.

Owns ``decode_in_slices``: a body too long to decode at once on the loop (``body.py``,
``BODY_INLINE_BYTES``) is decoded value by value, each step lasting about ``TURN_BUDGET_SECONDS``
(the clock is read every ``CLOCK_EVERY_VALUES`` values), with ``asyncio.sleep(0)`` between steps.
msgpack is walked with a streaming ``Unpacker`` (each container's header read, each scalar unpacked
in C; nothing is allocated ahead of the values that are there); JSON is decoded from UTF-8 in 1 MiB
pieces and tokenized, strings read by the ``json`` module's own scanner. The document is built with
an explicit stack that checks what ``shape.check_doc`` checks (depth, map keys) as it goes, so a
hostile document fails at its first bad value.

Invariants: the result equals what ``msgpack.unpackb(raw=False, strict_map_key=False)`` /
``json.loads`` return for a valid body; every failure is a ``HeaderError`` naming the structure and
never quoting the input at length.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import re
from collections.abc import Generator, Iterator
from time import perf_counter
from typing import Any

import msgpack

from rocketpy.errors import HeaderError
from rocketpy.limits import TURN_BUDGET_SECONDS
from rocketpy.protocol.shape import MAX_BODY_DEPTH
from rocketpy.remoting.command import SERIALIZE_JSON, Body

#: Values decoded between two reads of the clock (a step ends once ``TURN_BUDGET_SECONDS`` passed).
CLOCK_EVERY_VALUES = 128
#: Maps and arrays one body may hold. Each is an object the garbage collector walks; a body of half
#: a million empty maps would make its full passes long. RocketMQ's largest bodies, a broker's topic
#: table in REGISTER_BROKER, hold one map per topic (the 8 MiB body limit fits about 50,000).
MAX_BODY_CONTAINERS = 100_000
#: Text a JSON step decodes from UTF-8 at a time.
TEXT_PIECE_BYTES = 1 << 20

_NO_KEY = object()
_NOTHING = object()
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_CONSTANTS = {"true": True, "false": False, "null": None, "NaN": float("nan"),
              "Infinity": float("inf"), "-Infinity": float("-inf")}  # fmt: skip
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]


class _Builder:
    """Builds a document from values and container starts, in document order.

    Each open container is ``[container, pending key, items left]``; items left counts down for a
    msgpack container (keys and values) and is None for JSON's (closed by its bracket).
    """

    __slots__ = ("containers", "kind", "root", "stack", "what")

    def __init__(self, what: str, kind: str) -> None:
        self.what, self.kind = what, kind
        self.stack: list[list[Any]] = []
        self.root: Any = _NOTHING
        self.containers = 0

    @property
    def done(self) -> bool:
        """True once the root value is complete."""
        return self.root is not _NOTHING and not self.stack

    def bad(self, why: str) -> HeaderError:
        """The error for a body that is not a document of this kind."""
        return HeaderError(f"the request body is not a {self.kind} {self.what}: {why}")

    def open(self, container: list[Any] | dict[Any, Any], items: int | None) -> None:
        """A container starts (msgpack: with ``items`` keys and values or elements)."""
        self.value(container, opening=True)
        if len(self.stack) >= MAX_BODY_DEPTH:
            raise HeaderError(f"the {self.what} body nests deeper than {MAX_BODY_DEPTH} levels")
        self.containers += 1
        if self.containers > MAX_BODY_CONTAINERS:
            raise HeaderError(f"the {self.what} body holds more than {MAX_BODY_CONTAINERS} maps and arrays")
        self.stack.append([container, _NO_KEY, items])
        if items == 0:
            self.close()

    def close(self) -> None:
        """The innermost container ends; so do the ones it completes (msgpack)."""
        stack = self.stack
        stack.pop()
        while stack and stack[-1][2] == 0:
            stack.pop()

    def value(self, value: Any, opening: bool = False) -> None:
        """A value (or a container that starts) in the innermost container, or the root."""
        stack = self.stack
        if not stack:
            if self.root is not _NOTHING:
                raise self.bad("extra data after the document")
            self.root = value
            return
        top = stack[-1]
        container = top[0]
        if type(container) is list:
            container.append(value)
        elif top[1] is _NO_KEY:
            if type(value) is not str and type(value) is not int:
                raise HeaderError(f"the {self.what} body has a map key that is a {type(value).__name__}")
            top[1] = value
        else:
            container[top[1]] = value
            top[1] = _NO_KEY
        if top[2] is not None:
            top[2] -= 1
            if top[2] == 0 and not opening:
                self.close()


def _msgpack_steps(body: Body, builder: _Builder) -> Iterator[None]:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(body) + 1)
    unpacker.feed(body)
    end = len(body)
    count = 0
    step_end = perf_counter() + TURN_BUDGET_SECONDS
    try:
        while not builder.done:
            pos = unpacker.tell()
            if pos >= end:
                raise builder.bad("the document is cut short")
            kind = body[pos]
            if kind & 0xF0 == 0x90 or kind in (0xDC, 0xDD):
                builder.open([], unpacker.read_array_header())
            elif kind & 0xF0 == 0x80 or kind in (0xDE, 0xDF):
                n = unpacker.read_map_header()
                builder.open({}, 2 * n)
            else:
                builder.value(unpacker.unpack())
            count += 1
            if count % CLOCK_EVERY_VALUES == 0 and perf_counter() >= step_end:
                yield
                step_end = perf_counter() + TURN_BUDGET_SECONDS
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as e:
        raise builder.bad(str(e)[:120] or type(e).__name__) from None
    if unpacker.tell() != end:
        raise builder.bad("extra data after the document")


def _json_text(body: Body) -> Generator[None, None, str]:
    """The body's text, decoded from UTF-8 a piece at a time."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    pieces = []
    view = memoryview(body)
    for start in range(0, len(view), TEXT_PIECE_BYTES):
        pieces.append(decoder.decode(view[start : start + TEXT_PIECE_BYTES], final=False))
        yield
    pieces.append(decoder.decode(b"", final=True))
    return "".join(pieces)


def _ws(text: str, pos: int) -> int:
    return _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]


def _json_steps(text: str, builder: _Builder) -> Iterator[None]:
    pos, end, count = 0, len(text), 0
    step_end = perf_counter() + TURN_BUDGET_SECONDS
    while not builder.done:
        pos = _ws(text, pos)
        if pos >= end:
            raise builder.bad("the document is cut short")
        pos, complete = _json_value(text, pos, builder)
        if complete:
            pos = _json_after_value(text, _ws(text, pos), builder)
        count += 1
        if count % CLOCK_EVERY_VALUES == 0 and perf_counter() >= step_end:
            yield
            step_end = perf_counter() + TURN_BUDGET_SECONDS
    if _ws(text, pos) != end:
        raise builder.bad(f"extra data at character {pos}")


def _json_value(text: str, pos: int, builder: _Builder) -> tuple[int, bool]:
    """Read one value at ``pos``, or the start of a container and its first key: the position
    after it, and whether a whole value was read (a scalar or an empty container)."""
    char = text[pos]
    if char == '"':
        value, after = _scanstring(text, pos + 1)
        builder.value(value)
        return int(after), True
    if char == "{" or char == "[":
        builder.open({} if char == "{" else [], None)
        after = _ws(text, pos + 1)
        if after < len(text) and text[after] == ("}" if char == "{" else "]"):
            builder.close()  # empty
            return after + 1, True
        return (after if char == "[" else _json_key_next(text, after, builder)), False
    number = _NUMBER.match(text, pos)
    if number is not None:
        raw = number.group()
        builder.value(float(raw) if number.group(1) or number.group(2) else int(raw))
        return number.end(), True
    for word, value in _CONSTANTS.items():
        if text.startswith(word, pos):
            builder.value(value)
            return pos + len(word), True
    raise builder.bad(f"unexpected {text[pos]!r} at character {pos}")


def _json_key_next(text: str, pos: int, builder: _Builder) -> int:
    """Read a key and its colon inside an object; the position of its value."""
    if pos >= len(text) or text[pos] != '"':
        raise builder.bad(f"expected a key in quotes at character {pos}")
    key, after = _scanstring(text, pos + 1)
    builder.value(key)
    pos = _ws(text, int(after))
    if pos >= len(text) or text[pos] != ":":
        raise builder.bad(f"expected ':' at character {pos}")
    return _ws(text, pos + 1)


def _json_after_value(text: str, pos: int, builder: _Builder) -> int:
    """After a value: ',' (then the next key or element) or the brackets that close containers."""
    while builder.stack:
        container = builder.stack[-1][0]
        closing = "}" if type(container) is dict else "]"
        if pos < len(text) and text[pos] == ",":
            after = _ws(text, pos + 1)
            return _json_key_next(text, after, builder) if closing == "}" else after
        if pos < len(text) and text[pos] == closing:
            builder.close()
            pos = _ws(text, pos + 1)
            continue
        raise builder.bad(f"expected ',' or '{closing}' at character {pos}")
    return pos


def _steps(body: Body, serialize_type: int, builder: _Builder) -> Iterator[None]:
    if serialize_type != SERIALIZE_JSON:
        yield from _msgpack_steps(body, builder)
        return
    try:
        text = yield from _json_text(body)
    except UnicodeDecodeError as e:
        raise builder.bad(str(e)[:120]) from None
    try:
        yield from _json_steps(text, builder)
    except (ValueError, IndexError) as e:  # the json scanners' errors (JSONDecodeError is a ValueError)
        if isinstance(e, HeaderError):
            raise
        raise builder.bad(str(e)[:120]) from None


async def decode_in_slices(body: Body, serialize_type: int, what: str) -> Any:
    """Decode a structured body (msgpack or JSON by ``serialize_type``) a slice at a time, checking
    depth and map keys as ``check_doc`` does (``what`` names the structure in errors).

    Raises:
        HeaderError: the body is not a document of its kind, nests too deeply or has a map key that
            is not a string or an integer.
    """
    builder = _Builder(what, "JSON" if serialize_type == SERIALIZE_JSON else "msgpack")
    for _ in _steps(body, serialize_type, builder):
        await asyncio.sleep(0)
    return builder.root


def decode_stepwise(body: Body, serialize_type: int, what: str) -> Any:
    """``decode_in_slices`` without the pauses (tests and tools compare it with the one-call decoders)."""
    builder = _Builder(what, "JSON" if serialize_type == SERIALIZE_JSON else "msgpack")
    for _ in _steps(body, serialize_type, builder):
        pass
    return builder.root
