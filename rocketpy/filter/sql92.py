"""SQL92 property filters, compiled once into Python functions (shared by the broker and the SDK).

``compile_sql92(text)`` parses (``sql92_parse``) and generates the source of small Python functions
from the checked tree. The generated source holds only this module's own tokens: every property
name, string and number of the user's text is passed in as a closure constant, so user text is
never evaluated. The functions are cached per expression text.

Values are tri-state ints inside the generated code: 0 FALSE, 1 NULL (unknown), 3 TRUE, so
``AND`` is ``&`` and ``OR`` is ``|`` (Kleene logic) and both short-circuit left to right as
RocketMQ's do. Semantics (RocketMQ's, reference §10): property values are strings; compared with
an integer constant a value is read as a Java long, with a decimal constant as a Java double,
``>``/``<`` between two properties read both as doubles, ``= TRUE`` reads ``'true'`` in any case;
a missing property makes a comparison, ``IN`` or a bare property NULL, and ``CONTAINS`` /
``STARTSWITH`` / ``ENDSWITH`` (and their NOT forms) FALSE. A value that cannot be converted
(``a > 5`` with ``a='x'``) aborts the evaluation and the message does not match, as RocketMQ's
exception does. A message matches only when the expression is TRUE.

Two entry points per expression: ``match_record(view)`` reads a stored commitlog record (the
broker's pull path: it locates the properties region and searches only the keys the expression
uses, without decoding the rest) and ``match_properties(dict)`` (the client's re-check).
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Callable
from typing import Any

from rocketpy.errors import RocketpyError
from rocketpy.filter.sql92_parse import (
    MAX_SQL_DEPTH,
    MAX_SQL_LENGTH,
    BoolCast,
    Compare,
    Const,
    In,
    IsNull,
    Kind,
    Logic,
    Node,
    Not,
    Prop,
    SqlParseError,
    StrOp,
    kind_of,
    parse,
)
from rocketpy.record import HEAD_SIZE, POS_BODY_LEN

__all__ = [
    "MAX_SQL_DEPTH",
    "MAX_SQL_LENGTH",
    "SqlEvaluationError",
    "SqlExpression",
    "SqlParseError",
    "compile_sql92",
]

_COMPILE_CACHE_MAX = 1024
_MIN_LONG, _MAX_LONG = -(1 << 63), (1 << 63) - 1
_DOUBLE = re.compile(rb"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)")
_BLANKS = bytes(range(33))  # Java's String.trim() drops chars <= ' '
_U32 = struct.Struct(">I").unpack_from
_SEP = b"\x02"


class SqlEvaluationError(RocketpyError, ValueError):
    """A property value that cannot be converted for a comparison (the message does not match)."""


def java_long(b: bytes) -> int:
    """Java ``Long.valueOf`` of a property value (no blanks, no ``_``, 64-bit range)."""
    if b.isdigit() and len(b) <= 18:  # the common case: plain ASCII digits that fit
        return int(b)
    try:
        v = int(b)
    except ValueError:
        raise SqlEvaluationError(f"{b!r} is not an integer") from None
    if not (b[-1:].isdigit() and (b[:1].isdigit() or b[:1] in b"+-") and b"_" not in b):
        raise SqlEvaluationError(f"{b!r} is not an integer")
    if not _MIN_LONG <= v <= _MAX_LONG:
        raise SqlEvaluationError(f"{b!r} is out of the 64-bit integer range")
    return v


def java_double(b: bytes) -> float:
    """Java ``Double.valueOf`` of a property value (trimmed; ``NaN``, ``Infinity``, ``f``/``d`` suffix)."""
    if b.replace(b".", b"", 1).isdigit():  # the common case: 12, 1.5, .5, 5.
        return float(b)
    s = b.strip(_BLANKS)
    if _DOUBLE.fullmatch(s) is None:
        raise SqlEvaluationError(f"{b!r} is not a number")
    if s[-1:] in b"fFdD" and not s.endswith(b"NaN"):
        s = s[:-1]
    return float(s)


_PY_OP = {"=": "==", "<>": "==", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class _Generator:
    """Turns a checked tree into one Python expression over tri-state ints and closure constants."""

    def __init__(self) -> None:
        self.consts: list[object] = []
        self.props: dict[str, str] = {}
        self.tmp_count = 0

    def const(self, value: object) -> str:
        self.consts.append(value)
        return f"k{len(self.consts) - 1}"

    def prop(self, name: str) -> str:
        var = self.props.get(name)
        if var is None:
            var = self.props[name] = f"p{len(self.props)}"
        return var

    def tmp(self) -> str:
        self.tmp_count += 1
        return f"t{self.tmp_count}"

    def cond(self, node: Node) -> str:
        """A tri-state expression for the condition ``node``."""
        if isinstance(node, Const):
            return "1" if node.value is None else ("3" if node.value else "0")
        if isinstance(node, Logic):
            return self._logic(node)
        if isinstance(node, Not):
            t = self.tmp()
            return f"(1 if ({t} := {self.cond(node.item)}) == 1 else {t} ^ 3)"
        if isinstance(node, BoolCast):
            return f"(1 if {self.prop(node.prop.name)} is None else 0)"
        if isinstance(node, IsNull):
            return self._is_null(node)
        if isinstance(node, In):
            p, yes, no = self.prop(node.prop.name), *(("0", "3") if node.negated else ("3", "0"))
            values = self.const(frozenset(v.encode() for v in node.values))
            return f"(1 if {p} is None else ({yes} if {p} in {values} else {no}))"
        if isinstance(node, StrOp):
            return self._str_op(node)
        assert isinstance(node, Compare), node
        return self._compare(node)

    def _logic(self, node: Logic) -> str:
        a = self.tmp()
        first, *rest = (self.cond(item) for item in node.items)
        if node.op == "AND":  # stops at the first FALSE (the running AND becomes 0)
            return "((" + f"{a} := {first})" + "".join(f" and ({a} := {a} & {x})" for x in rest) + ")"
        chain = f"({a} := {first}) == 3" + "".join(f" or ({a} := {a} | {x}) == 3" for x in rest)
        return f"(3 if ({chain}) else {a})"  # stops at the first TRUE

    def _is_null(self, node: IsNull) -> str:
        yes, no = ("0", "3") if node.negated else ("3", "0")
        kind = kind_of(node.operand)
        if kind is Kind.PROP:
            assert isinstance(node.operand, Prop)
            return f"({yes} if {self.prop(node.operand.name)} is None else {no})"
        if kind is Kind.BOOL:
            return f"({yes} if {self.cond(node.operand)} == 1 else {no})"
        return yes if kind is Kind.NULL else no

    def _str_op(self, node: StrOp) -> str:
        search = node.search.encode()
        if not search:
            return "0"  # RocketMQ: an empty search string never matches, negated or not
        if isinstance(node.left, Const):
            assert isinstance(node.left.value, str)
            hit = _str_test(node.op, node.left.value.encode(), search)
            return "3" if hit != node.negated else "0"
        assert isinstance(node.left, Prop)
        p, k = self.prop(node.left.name), self.const(search)
        test = {"CONTAINS": f"{k} in {p}", "STARTSWITH": f"{p}.startswith({k})"}.get(
            node.op, f"{p}.endswith({k})"
        )
        return f"(3 if {p} is not None and {'not ' if node.negated else ''}{test} else 0)"

    def _compare(self, node: Compare) -> str:
        yes, no = ("0", "3") if node.op == "<>" else ("3", "0")
        lk, rk = kind_of(node.left), kind_of(node.right)
        if Kind.BOOL in (lk, rk):
            return self._compare_bool(node, yes, no)
        guards: list[str] = []
        left = self._operand(node.left, rk, node.op, guards)
        right = self._operand(node.right, lk, node.op, guards)
        test = f"{yes} if {left} {_PY_OP[node.op]} {right} else {no}"
        if not guards:
            return f"({test})"
        return f"(1 if {' or '.join(g + ' is None' for g in guards)} else ({test}))"

    def _operand(self, node: Node, other: Kind, op: str, guards: list[str]) -> str:
        if isinstance(node, Prop):
            p = self.prop(node.name)
            guards.append(p)
            if other is Kind.LONG:
                return f"_long({p})"
            if other is Kind.DOUBLE or (other is Kind.PROP and op not in ("=", "<>")):
                return f"_double({p})"
            return p
        assert isinstance(node, Const)
        value = node.value.encode() if isinstance(node.value, str) else node.value
        return self.const(value)

    def _compare_bool(self, node: Compare, yes: str, no: str) -> str:
        """``=``/``<>`` with a condition or TRUE/FALSE on one side, a condition or property on the other."""
        x, y = self.tmp(), self.tmp()
        sides = []
        for side in (node.left, node.right):
            if isinstance(side, Prop):  # Java Boolean.valueOf: 'true' in any case
                p = self.prop(side.name)
                sides.append(f"(1 if {p} is None else (3 if {p}.lower() == b'true' else 0))")
            else:
                sides.append(self.cond(side))
        unknown = f"(({x} := {sides[0]}) == 1) | (({y} := {sides[1]}) == 1)"
        return f"(1 if {unknown} else ({yes} if {x} == {y} else {no}))"


def _str_test(op: str, value: bytes, search: bytes) -> bool:
    if op == "CONTAINS":
        return search in value
    return value.startswith(search) if op == "STARTSWITH" else value.endswith(search)


_RUNTIME: dict[str, Any] = {"_long": java_long, "_double": java_double, "_U32": _U32}


def _indent(lines: list[str], depth: int) -> list[str]:
    return ["    " * depth + line for line in lines]


def _build(gen: _Generator, body: str, source: str) -> dict[str, Callable[..., Any]]:
    """Compile the three matchers of one expression; returns them by name."""
    props = sorted(gen.props.items(), key=lambda kv: kv[1])
    record_lines = []
    if props:
        record_lines = [
            f"t = {HEAD_SIZE} + _U32(v, {POS_BODY_LEN})[0]",
            "s = t + 3 + v[t]",
            # a leading separator: every pair, the first included, is found as b"\x02name\x01"
            "props = b'\\x02' + v[s:s + ((v[s - 2] << 8) | v[s - 1])]",
        ]
    for name, var in props:
        sep = _SEP + name.encode() + b"\x01"
        record_lines += [
            f"i = props.find({gen.const(sep)})",
            f"if i < 0: {var} = None",
            "else:",
            f"    i += {len(sep)}; j = props.find(b'\\x02', i)",
            f"    {var} = props[i:j] if j >= 0 else props[i:]",
        ]
    dict_lines = []
    for name, var in props:
        dict_lines.append(f"{var} = d.get({gen.const(name)})")
        dict_lines.append(f"{var} = None if {var} is None else {var}.encode('utf-8', 'surrogatepass')")
    names = [f"k{i}" for i in range(len(gen.consts))] + list(_RUNTIME)
    code = "\n".join(
        [
            f"def _make({', '.join(names)}):",
            "    def match_record(v):",
            "        try:",
            *_indent([*record_lines, f"return {body} == 3"], 3),
            "        except _Mismatch:",
            "            return False",
            "    def match_properties(d):",
            "        try:",
            *_indent([*dict_lines, f"return {body} == 3"], 3),
            "        except _Mismatch:",
            "            return False",
            "    def evaluate(d):",
            *_indent([*dict_lines, f"return _TRI[{body}]"], 2),
            "    return match_record, match_properties, evaluate",
        ]
    )
    namespace: dict[str, Any] = {"_Mismatch": SqlEvaluationError, "_TRI": _TRI}
    exec(compile(code, f"<sql92 {source[:60]!r}>", "exec"), namespace)  # generated: no user text inside
    record, properties, evaluate = namespace["_make"](*gen.consts, *_RUNTIME.values())
    return {"match_record": record, "match_properties": properties, "evaluate": evaluate, "source": code}


_TRI = {0: False, 1: None, 3: True}


class SqlExpression:
    """A compiled SQL92 expression.

    Attributes:
        text: the expression as given.
        property_names: the properties it reads (only these are searched in a record).
        match_record: ``(record view) -> bool``: True when the stored record's properties match.
        match_properties: ``(dict[str, str]) -> bool``: the same test over a decoded message's properties.
        evaluate: ``(dict[str, str]) -> True | False | None``: the three-valued result
            (raises ``SqlEvaluationError`` where a value cannot be converted).
        source: the generated Python source (for inspection).
    """

    __slots__ = ("evaluate", "match_properties", "match_record", "property_names", "source", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        gen = _Generator()
        body = gen.cond(parse(text))
        self.property_names = frozenset(gen.props)
        built = _build(gen, body, text)
        self.match_record: Callable[[memoryview | bytes], bool] = built["match_record"]
        self.match_properties: Callable[[dict[str, str]], bool] = built["match_properties"]
        self.evaluate: Callable[[dict[str, str]], bool | None] = built["evaluate"]
        self.source: str = built["source"]  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SqlExpression({self.text!r})"


@functools.lru_cache(maxsize=_COMPILE_CACHE_MAX)
def compile_sql92(text: str) -> SqlExpression:
    """The compiled expression of ``text`` (cached per text).

    Raises:
        SqlParseError: the expression is malformed, mistyped or over the bounds; the message names
            the column.
    """
    return SqlExpression(text)
