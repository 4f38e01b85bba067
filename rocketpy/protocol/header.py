"""Declarative request and response headers: each field's wire name is written once, on its class.

A header is a class deriving from ``Header`` whose annotated attributes are its fields, each
declared with ``wire("wireName", ...)``::

    class GetMaxOffsetRequestHeader(Header):
        topic: str = wire("topic")
        queue_id: int = wire("queueId", lo=0, hi=MAX_QUEUE_ID)

The class gets ``__slots__``, an ``__init__`` (fields in declaration order, as a dataclass),
``__repr__`` and ``__eq__``, and three codecs generated once, when the class is created, as straight
line code (no per-field loop at run time, so a generated reader costs what a hand-written one does):

- ``from_ext(ext)``: read a received ``ext`` map. A value that already has its wire type is taken
  as is; anything else goes through ``rocketpy.protocol.fields`` (decimal strings from RocketMQ's
  JSON clients, ``"1"``/``"0"`` booleans from its C++ client, nil), which raises ``HeaderError``
  naming the field. Then the declared ranges (``lo``/``hi``) and non-empty strings
  (``nonempty=True``) are checked, and the class's ``_validate`` hook runs when it has one.
- ``to_ext()``: the map to send; an optional field (``T | None``) that is None is left out.
- ``pack(*values)``: the same map from positional values in field order, without an object (the
  hot paths' builder: one call, one dict literal).

Field types are ``str``, ``int``, ``bool`` and ``str | None`` / ``int | None`` / ``bool | None``
(declared with ``default=None``; absent on the wire when None), or an ``IntEnum`` named with
``enum=`` (an int on the wire, read into the enum's member; a value outside it is a
``HeaderError`` listing the members). A field without ``default`` is required, and required fields
come first. ``WIRE`` lists the fields
(``WireField``), so the ACL and the specs find a field's wire name from its attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any, ClassVar, Self, dataclass_transform

from rocketpy.errors import HeaderError
from rocketpy.protocol import fields as _fields

_REQUIRED: Any = object()
_KINDS = ("str", "int", "bool")


class WireField:
    """One declared header field.

    Attributes:
        attr: the Python attribute name.
        wire: the field's name in the ``ext`` map.
        kind: ``"str"``, ``"int"`` or ``"bool"``.
        optional: None is a value (left out of the map when sending).
        required: no default: ``from_ext`` raises when the field is absent.
        default: the value an absent field takes.
        lo, hi: the inclusive range of an int field (None: unbounded on that side).
        nonempty: a str field must not be empty.
        enum: the IntEnum an int field's value is read into (None: a plain int).
        hint: what to do, appended to a range or emptiness error.
    """

    __slots__ = (
        "attr", "default", "enum", "hi", "hint", "kind", "lo", "nonempty", "optional", "required", "wire",
    )  # fmt: skip

    def __init__(
        self,
        wire: str,
        default: Any,
        lo: int | None,
        hi: int | None,
        nonempty: bool,
        enum: type[IntEnum] | None,
        hint: str,
    ) -> None:
        self.wire, self.default, self.lo, self.hi = wire, default, lo, hi
        self.nonempty, self.enum, self.hint = nonempty, enum, hint
        self.required = default is _REQUIRED
        self.attr, self.kind, self.optional = "", "", False

    def __repr__(self) -> str:
        return f"WireField({self.attr!r} <-> {self.wire!r}: {self.kind}{' | None' if self.optional else ''})"


def wire(
    name: str,
    *,
    default: Any = _REQUIRED,
    lo: int | None = None,
    hi: int | None = None,
    nonempty: bool = False,
    enum: type[IntEnum] | None = None,
    hint: str = "",
) -> Any:
    """Declare a header field named ``name`` on the wire (see the module docstring)."""
    return WireField(name, default, lo, hi, nonempty, enum, hint)


def _parse_annotation(owner: str, f: WireField, annotation: Any) -> tuple[str, bool]:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    parts = [p.strip() for p in text.split("|")]
    optional = "None" in parts
    kinds = [p for p in parts if p != "None"]
    if f.enum is not None and kinds == [f.enum.__name__]:
        return "int", optional
    attr = f.attr
    if len(kinds) != 1 or kinds[0] not in _KINDS:
        raise TypeError(f"{owner}.{attr}: a header field is str, int or bool (or one of them | None)")
    return kinds[0], optional


def range_error(field: WireField, value: int) -> HeaderError:
    """The error for an int field outside its declared range."""
    if field.lo is not None and field.hi is not None:
        text = f"must be between {field.lo} and {field.hi}"
    elif field.lo is not None:
        text = f"must be at least {field.lo}"
    else:
        text = f"must be at most {field.hi}"
    hint = f"; {field.hint}" if field.hint else ""
    return HeaderError(f"request header field {field.wire!r} {text}, got {value}{hint}")


def enum_error(field: WireField, value: int) -> HeaderError:
    """The error for an enum field whose value is none of the enum's members."""
    assert field.enum is not None
    members = ", ".join(f"{int(m)} ({m.name})" for m in field.enum)
    return HeaderError(f"request header field {field.wire!r} must be one of {members}, got {value}")


def empty_error(field: WireField) -> HeaderError:
    """The error for a str field declared ``nonempty`` that arrived empty."""
    hint = f"; {field.hint}" if field.hint else "; the sender must set it"
    return HeaderError(f"request header field {field.wire!r} is empty{hint}")


def _reader_lines(i: int, f: WireField) -> list[str]:
    """Lines of ``from_ext`` that leave field ``i``'s value in ``v{i}``."""
    v, w, d = f"v{i}", repr(f.wire), f"F[{i}].default"
    if f.optional:
        lines = [f"{v} = get({w})", f"if {v} is not None and type({v}) is not {f.kind}:",
                 f"    {v} = _{f.kind}(ext, {w})"]  # fmt: skip
        guard = f"{v} is not None and "
    else:
        default = "None" if f.required else d
        lines = [
            f"{v} = get({w})",
            f"if type({v}) is not {f.kind}:",
            f"    {v} = _{f.kind}(ext, {w}, {default})",
        ]
        guard = ""
    if f.kind == "int" and (f.lo is not None or f.hi is not None):
        lo = "" if f.lo is None else f"{f.lo} <= "
        hi = "" if f.hi is None else f" <= {f.hi}"
        lines += [f"if {guard}not ({lo}{v}{hi}):", f"    raise _range(F[{i}], {v})"]
    if f.enum is not None:
        convert = [
            "try:",
            f"    {v} = F[{i}].enum({v})",
            "except ValueError:",
            f"    raise _enum(F[{i}], {v}) from None",
        ]
        lines += [f"if {v} is not None:", *("    " + line for line in convert)] if f.optional else convert
    if f.kind == "str" and f.nonempty:
        lines += [f"if {guard}not {v}:", f"    raise _empty(F[{i}])"]
    return lines


def _compile(name: str, source: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    exec(compile(source, f"<header codec {name}>", "exec"), namespace)
    fn: Callable[..., Any] = namespace[name]
    return fn


def _make_codecs(cls: type[Header], specs: tuple[WireField, ...]) -> None:
    ns: dict[str, Any] = {
        "F": specs, "_EMPTY": {}, "_new": object.__new__, "_range": range_error, "_empty": empty_error,
        "_enum": enum_error,
        "_str": _fields.ext_str, "_int": _fields.ext_int, "_bool": _fields.ext_bool,
    }  # fmt: skip
    body = ["get = ext.get if ext else _EMPTY.get"]
    for i, f in enumerate(specs):
        body += _reader_lines(i, f)
    body.append("h = _new(cls)")
    body += [f"h.{f.attr} = v{i}" for i, f in enumerate(specs)]
    if getattr(cls, "_validate", None) is not None:
        body.append("h._validate()")
    body.append("return h")
    from_ext = _compile("from_ext", "def from_ext(cls, ext):\n    " + "\n    ".join(body), dict(ns))
    cls.from_ext = classmethod(from_ext)  # type: ignore[method-assign, assignment]

    args = ", ".join(f"v{i}" for i in range(len(specs)))
    # an enum member goes on the wire as its plain int (the JSON header writes values as text)
    value = [f"int(v{i})" if f.enum is not None else f"v{i}" for i, f in enumerate(specs)]
    always = ", ".join(f"{f.wire!r}: {value[i]}" for i, f in enumerate(specs) if not f.optional)
    pack = [f"ext = {{{always}}}"]
    for i, f in enumerate(specs):
        if f.optional:
            pack += [f"if v{i} is not None:", f"    ext[{f.wire!r}] = {value[i]}"]
    pack.append("return ext")
    cls.pack = staticmethod(_compile("pack", f"def pack({args}):\n    " + "\n    ".join(pack), {}))  # type: ignore[method-assign, assignment]
    attrs = ", ".join(f"self.{f.attr}" for f in specs)
    to_ext = f"def to_ext(self):\n    return pack({attrs})"
    cls.to_ext = _compile("to_ext", to_ext, {"pack": cls.pack})  # type: ignore[method-assign]

    params = ", ".join(f.attr if f.required else f"{f.attr}=F[{i}].default" for i, f in enumerate(specs))
    sets = "\n    ".join(f"self.{f.attr} = {f.attr}" for f in specs) or "pass"
    init = _compile("__init__", f"def __init__(self, {params}):\n    {sets}", dict(ns))
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[misc, method-assign]


class _HeaderMeta(type):
    """Turns the ``wire(...)`` declarations of a ``Header`` subclass into slots and codecs."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any], **kw: Any) -> _HeaderMeta:
        annotations: dict[str, Any] = ns.get("__annotations__", {})
        specs: list[WireField] = []
        for attr, annotation in annotations.items():
            declared = ns.get(attr)
            if not isinstance(declared, WireField):
                continue
            declared.attr = attr
            declared.kind, declared.optional = _parse_annotation(name, declared, annotation)
            if declared.optional and declared.default is not None:
                raise TypeError(f"{name}.{attr}: an optional field is declared with default=None")
            specs.append(declared)
            del ns[attr]
        seen_default = False
        for f in specs:
            if not f.required:
                seen_default = True
            elif seen_default:
                raise TypeError(f"{name}.{f.attr}: a required field follows a field with a default")
        inherited: tuple[WireField, ...] = ()
        for base in bases:
            inherited = getattr(base, "WIRE", ()) or inherited
        if inherited and specs:
            raise TypeError(f"{name}: a header extends another header's fields by declaring them all")
        ns.setdefault("__slots__", tuple(f.attr for f in specs))
        cls = super().__new__(mcs, name, bases, ns, **kw)
        if specs:
            cls.WIRE = tuple(specs)  # type: ignore[attr-defined]
            _make_codecs(cls, cls.WIRE)  # type: ignore[arg-type, attr-defined]
        return cls


@dataclass_transform(field_specifiers=(wire,))
class Header(metaclass=_HeaderMeta):
    """Base of every declared header (see the module docstring)."""

    __slots__ = ()
    #: The declared fields, in order.
    WIRE: ClassVar[tuple[WireField, ...]] = ()

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None) -> Self:
        """Read a received ``ext`` map.

        Raises:
            HeaderError: a required field is missing, or a field is malformed or out of range.
        """
        return cls()  # a header without fields; subclasses with fields get a generated reader

    def to_ext(self) -> dict[str, Any]:
        """The ``ext`` map to send."""
        return {}

    @staticmethod
    def pack(*values: Any) -> dict[str, Any]:
        """The ``ext`` map from the field values in declaration order (no object made)."""
        return {}

    @classmethod
    def wire_name(cls, attr: str) -> str:
        """The wire name of attribute ``attr``.

        Raises:
            KeyError: no field has that attribute.
        """
        for f in cls.WIRE:
            if f.attr == attr:
                return f.wire
        raise KeyError(f"{cls.__name__} has no field {attr!r}")

    def __repr__(self) -> str:
        inner = ", ".join(f"{f.attr}={getattr(self, f.attr)!r}" for f in self.WIRE)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.attr) == getattr(other, f.attr) for f in self.WIRE)

    __hash__ = None  # type: ignore[assignment]
