"""The one check of a decoded request against the shape its handler expects.

A frame's header ``ext`` and a structured body arrive as whatever msgpack or JSON decodes to: any
nesting of maps, lists and scalars. Handlers index them as RocketMQ's Java classes would, so a map
key that is an array, a list where a string belongs or a million-deep nesting would otherwise end
as a traceback deep in a handler. Everything a handler reads passes through here first:

- ``check_ext``: the header's ``ext`` is a flat map of string keys to scalars (RocketMQ's
  ``HashMap<String, String>`` extFields) of bounded count and length;
- ``check_doc``: any decoded body nests at most ``MAX_BODY_DEPTH`` levels and has string or int
  map keys;
- ``check_shape``: a body matches a declared shape (``Scalar``, ``ListOf``, ``MapOf``,
  ``Fields``), with the path of the first bad field in the error (``mqSet[3].queueId``).

Every failure raises ``HeaderError`` (answered as INVALID_PARAMETER with the message as remark);
messages never quote the input at length.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rocketpy._accel import twin
from rocketpy.errors import HeaderError

#: Fields one request header may carry (RocketMQ's largest headers have about 25).
MAX_EXT_FIELDS = 256
#: Longest header field value, in characters (topics are <= 127, properties strings are larger).
MAX_EXT_VALUE_CHARS = 64 * 1024
#: Deepest nesting of maps and lists a structured body may have (RocketMQ's bodies nest <= 5).
MAX_BODY_DEPTH = 32

_SCALARS = (str, int, bool, float, type(None))
_NESTED = (dict, list)
_EXT_VALUE_TYPES = frozenset({str, int, bool, float, bytes, type(None)})


def _clip(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@twin
def check_ext(ext: Mapping[Any, Any] | None) -> None:
    """Check a header's ``ext`` is a flat map of string keys to bounded scalars.

    Runs for every request a daemon reads (``ProcessorTable``); the compiled twin in
    ``_speedups`` decides the common case in one pass and hands anything else to this function.

    Raises:
        HeaderError: naming the first bad field.
    """
    if not ext:
        return
    if len(ext) > MAX_EXT_FIELDS:
        raise HeaderError(f"the request header has {len(ext)} fields; the limit is {MAX_EXT_FIELDS}")
    for key, value in ext.items():
        if type(key) is not str:
            raise HeaderError(f"request header field names must be strings, got {_clip(key)}")
        if type(value) not in _EXT_VALUE_TYPES:
            raise HeaderError(
                f"request header field '{key[:80]}' must be a string, number or boolean, "
                f"got {type(value).__name__}"
            )
        if type(value) in (str, bytes) and len(value) > MAX_EXT_VALUE_CHARS:
            raise HeaderError(
                f"request header field '{key[:80]}' is {len(value)} long; the limit is {MAX_EXT_VALUE_CHARS}"
            )


@twin
def check_doc(doc: Any, what: str) -> None:
    """Check a decoded body nests at most ``MAX_BODY_DEPTH`` levels with str or int map keys.

    Iterative (an explicit stack), so a hostile depth cannot exhaust the interpreter's stack. The
    compiled twin in ``_speedups`` walks a body of plain maps and lists in C and hands anything
    else (a fault to report, a subclass) to this function.

    Raises:
        HeaderError: too deep, or a map key that is not a string or an integer.
    """
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > MAX_BODY_DEPTH:
                raise HeaderError(f"the {what} body nests deeper than {MAX_BODY_DEPTH} levels")
            for key, value in node.items():
                if type(key) is not str and type(key) is not int:
                    raise HeaderError(f"the {what} body has a map key that is a {type(key).__name__}")
                if isinstance(value, _NESTED):
                    stack.append((value, depth + 1))
        elif isinstance(node, list):
            if depth > MAX_BODY_DEPTH:
                raise HeaderError(f"the {what} body nests deeper than {MAX_BODY_DEPTH} levels")
            stack.extend((item, depth + 1) for item in node if isinstance(item, _NESTED))


class _At:
    """The path of a nested value (``parent[3]``, ``parent.name``), made into text only when an
    error names it: a body that passes (nearly every one) builds no path strings."""

    __slots__ = ("key", "parent")

    def __init__(self, parent: str | _At, key: str | int) -> None:
        self.parent = parent
        self.key = key

    def __str__(self) -> str:
        key = self.key
        return f"{self.parent}[{key}]" if type(key) is int else f"{self.parent}.{str(key)[:80]}"


class Shape:
    """A declared shape of a decoded value; ``check`` raises ``HeaderError`` naming ``path``."""

    def check(self, value: Any, path: str | _At) -> None:
        """Raise ``HeaderError`` when ``value`` (found at ``path``) does not have this shape."""
        raise NotImplementedError


@dataclass(frozen=True)
class Scalar(Shape):
    """A str, int, bool or float (``types``); strings at most ``max_len`` characters.

    ``int`` admits decimal strings too (RocketMQ's JSON clients send numbers as text).
    """

    types: tuple[type, ...]
    max_len: int = 4096
    required: bool = False

    def check(self, value: Any, path: str | _At) -> None:
        """See ``Shape.check``."""
        kind = type(value)
        if kind in self.types:  # exact types: a bool is not an int here
            if kind is str and len(value) > self.max_len:
                raise HeaderError(f"'{path}' is {len(value)} characters; the limit is {self.max_len}")
            return
        if kind is str and int in self.types and value.strip().lstrip("-").isdigit():
            return
        names = " or ".join(t.__name__ for t in self.types)
        raise HeaderError(f"'{path}' must be {names}, got {type(value).__name__} {_clip(value)}")


@dataclass(frozen=True)
class ListOf(Shape):
    """A list of at most ``max_len`` items, each of shape ``item``."""

    item: Shape
    max_len: int
    required: bool = False

    def check(self, value: Any, path: str | _At) -> None:
        """See ``Shape.check``."""
        if type(value) is not list:
            raise HeaderError(f"'{path}' must be a list, got {type(value).__name__}")
        if len(value) > self.max_len:
            raise HeaderError(f"'{path}' has {len(value)} entries; the limit is {self.max_len}")
        item_shape = self.item
        for i, item in enumerate(value):
            item_shape.check(item, _At(path, i))


@dataclass(frozen=True)
class MapOf(Shape):
    """A map of at most ``max_len`` entries with str (or int) keys and values of shape ``value``."""

    value: Shape
    max_len: int
    required: bool = False

    def check(self, value: Any, path: str | _At) -> None:
        """See ``Shape.check``."""
        if type(value) is not dict:
            raise HeaderError(f"'{path}' must be a map, got {type(value).__name__}")
        if len(value) > self.max_len:
            raise HeaderError(f"'{path}' has {len(value)} entries; the limit is {self.max_len}")
        value_shape = self.value
        for key, item in value.items():
            value_shape.check(item, _At(path, str(key)))


@dataclass(frozen=True)
class Fields(Shape):
    """A map with named fields; unnamed fields are allowed (newer clients send more) and unchecked.

    A field whose shape is ``required`` must be present and not nil; others may be absent or nil.
    """

    fields: dict[str, Shape] = field(default_factory=dict)
    required: bool = False

    def check(self, value: Any, path: str | _At) -> None:
        """See ``Shape.check``."""
        if type(value) is not dict:
            raise HeaderError(f"'{path}' must be a map, got {type(value).__name__}")
        for name, shape in self.fields.items():
            item = value.get(name)
            if item is None:
                if getattr(shape, "required", False):
                    raise HeaderError(f"'{path}.{name}' is missing; the sender must set it")
                continue
            shape.check(item, _At(path, name))


def check_shape(doc: Any, shape: Shape, what: str) -> None:
    """Check a decoded body ``doc`` (the structure named ``what``) against ``shape``.

    Raises:
        HeaderError: naming the path of the first field that does not match.
    """
    shape.check(doc, what)


STR = Scalar((str,))
INT = Scalar((int,))
BOOL = Scalar((bool, str))
REQUIRED_STR = Scalar((str,), required=True)
REQUIRED_INT = Scalar((int,), required=True)
ANY_SCALAR = Scalar(_SCALARS[:4])


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.protocol import _speedups

    same_signature(check_ext)(_speedups.check_ext)
    same_signature(_speedups.check_ext)(check_ext)
    same_signature(check_doc)(_speedups.check_doc)
    same_signature(_speedups.check_doc)(check_doc)
