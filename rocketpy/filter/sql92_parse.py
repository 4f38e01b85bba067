"""The SQL92 filter language: tokens, grammar and static checks, producing a typed syntax tree.

Owns RocketMQ's selector grammar (reference §10): numeric (``5``, ``5L``, ``1.5``, ``.5``, ``5E3``),
string (``'it''s'``), boolean and NULL constants; ``=``, ``<>``, ``>``, ``>=``, ``<``, ``<=``;
``[NOT] BETWEEN a AND b``; ``[NOT] IN ('a', ...)``; ``IS [NOT] NULL``; ``[NOT] CONTAINS`` /
``STARTSWITH`` / ``ENDSWITH 's'``; ``AND``, ``OR``, ``NOT`` and parentheses; ``+x``/``-x`` on
numbers. Keywords are case-insensitive; any other identifier (``[A-Za-z_$][A-Za-z0-9_$]*``,
case-sensitive) names a message property, ``TAGS`` included.

Precedence is SQL's: ``OR`` < ``AND`` < ``NOT`` < predicates (``NOT a = 1`` is ``NOT (a = 1)``).
The static checks are RocketMQ's parse-time ones: ``>``/``<``/``BETWEEN`` take numbers or
properties only (``a > 'x'`` is an error), ``= NULL`` is an error (use ``IS NULL``), ``IN`` takes
a property and string constants, a constant number or string is not a condition. Every error is a
``SqlParseError`` carrying the 0-based position; input length (``MAX_SQL_LENGTH``) and nesting
depth (``MAX_SQL_DEPTH``) are bounded so no input can exhaust the parser or the code generator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from rocketpy.errors import RocketpyError

MAX_SQL_LENGTH = 4096
MAX_SQL_DEPTH = 32
_MAX_LONG = (1 << 63) - 1


class SqlParseError(RocketpyError, ValueError):
    """A SQL92 expression that cannot be used; ``position`` is 0-based, the message names the column."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"SQL92 error at column {position + 1}: {message}")
        self.position = position
        self.reason = message


class Kind(Enum):
    """Static kind of a node: what it evaluates to."""

    PROP = "property"
    LONG = "integer"
    DOUBLE = "number"
    STR = "string"
    BOOL = "condition"
    NULL = "NULL"


@dataclass(frozen=True, slots=True)
class Node:
    """A syntax tree node; ``pos`` is where its text starts."""

    pos: int


@dataclass(frozen=True, slots=True)
class Prop(Node):
    """A message property (a string at run time, or NULL when absent)."""

    name: str


@dataclass(frozen=True, slots=True)
class Const(Node):
    """A constant: int (LONG), float (DOUBLE), str (STR), bool (BOOL) or None (NULL)."""

    value: int | float | str | bool | None
    kind: Kind


@dataclass(frozen=True, slots=True)
class Compare(Node):
    """``left op right`` with op one of ``= <> < <= > >=``."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Logic(Node):
    """``AND``/``OR`` over two or more conditions (flattened)."""

    op: str
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not(Node):
    """``NOT item``."""

    item: Node


@dataclass(frozen=True, slots=True)
class In(Node):
    """``prop [NOT] IN ('a', ...)``."""

    prop: Prop
    values: tuple[str, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class StrOp(Node):
    """``left [NOT] CONTAINS|STARTSWITH|ENDSWITH 's'`` (never NULL: a missing property is FALSE)."""

    op: str
    left: Node
    search: str
    negated: bool


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    """``operand IS [NOT] NULL``."""

    operand: Node
    negated: bool


@dataclass(frozen=True, slots=True)
class BoolCast(Node):
    """A bare property used as a condition: NULL when absent, else FALSE (values are strings)."""

    prop: Prop


def kind_of(node: Node) -> Kind:
    """The static kind of ``node``."""
    if isinstance(node, Prop):
        return Kind.PROP
    if isinstance(node, Const):
        return node.kind
    return Kind.BOOL


KEYWORDS = frozenset(
    "AND OR NOT BETWEEN IN IS NULL TRUE FALSE CONTAINS STARTSWITH ENDSWITH LIKE ESCAPE".split()
)
_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
      | (?P<int>\d+[lL]?)
      | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
      | (?P<op><>|>=|<=|!=|==|[=<>(),+\-])
      | (?P<quote>')""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Token:
    """One token: ``kind`` is ``float``, ``int``, ``str``, ``ident``, ``kw``, ``op`` or ``end``."""

    kind: str
    text: str
    pos: int
    value: object = None


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` (ending with an ``end`` token)."""
    out: list[Token] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SqlParseError(f"unexpected character {text[pos]!r}", pos)
        kind = m.lastgroup
        assert kind is not None
        if kind == "quote":
            value, end = _string_literal(text, pos)
            out.append(Token("str", text[pos:end], pos, value))
            pos = end
            continue
        word = m.group()
        if kind in ("int", "float") and m.end() < n and (text[m.end()].isalnum() or text[m.end()] in "_$."):
            raise SqlParseError(f"malformed number {text[pos : m.end() + 1]!r}", pos)
        if kind == "ident" and word.upper() in KEYWORDS:
            out.append(Token("kw", word.upper(), pos))
        elif kind == "op" and word in ("!=", "=="):
            raise SqlParseError(f"{word!r} is not SQL92; use {'<>' if word == '!=' else '='}", pos)
        elif kind != "ws":
            out.append(Token(kind, word, pos))
        pos = m.end()
    out.append(Token("end", "", n))
    return out


def _string_literal(text: str, start: int) -> tuple[str, int]:
    parts: list[str] = []
    pos = start + 1
    while True:
        q = text.find("'", pos)
        if q < 0:
            raise SqlParseError("unterminated string; close it with ' (write '' for a quote inside)", start)
        parts.append(text[pos:q])
        if text.startswith("''", q):
            parts.append("'")
            pos = q + 2
            continue
        return "".join(parts), q + 1


class Parser:
    """Recursive descent over the tokens of one expression (``parse`` is the entry point)."""

    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    # -- token helpers
    def peek(self, offset: int = 0) -> Token:
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def at_kw(self, *words: str) -> bool:
        tok = self.peek()
        return tok.kind == "kw" and tok.text in words

    def expect_kw(self, word: str) -> Token:
        if not self.at_kw(word):
            self.fail(f"expected {word}")
        return self.take()

    def expect_op(self, op: str) -> Token:
        tok = self.peek()
        if tok.kind != "op" or tok.text != op:
            self.fail(f"expected {op!r}")
        return self.take()

    def fail(self, what: str) -> None:
        tok = self.peek()
        found = "the end of the expression" if tok.kind == "end" else repr(tok.text)
        raise SqlParseError(f"{what}, found {found}", tok.pos)

    def enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_SQL_DEPTH:
            raise SqlParseError(f"the expression nests deeper than {MAX_SQL_DEPTH} levels", pos)

    # -- grammar
    def parse(self) -> Node:
        node = self.condition(self.or_expr())
        if self.peek().kind != "end":
            self.fail("expected AND, OR or the end of the expression")
        return node

    def or_expr(self) -> Node:
        return self._logic("OR", self.and_expr)

    def and_expr(self) -> Node:
        return self._logic("AND", self.not_expr)

    def _logic(self, word: str, operand: object) -> Node:
        assert callable(operand)
        first = operand()
        if not self.at_kw(word):
            return first
        items = [self.condition(first)]
        while self.at_kw(word):
            self.take()
            items.append(self.condition(operand()))
        return Logic(first.pos, word, tuple(items))

    def not_expr(self) -> Node:
        if self.at_kw("NOT"):
            tok = self.take()
            self.enter(tok.pos)
            item = self.condition(self.not_expr())
            self.depth -= 1
            return Not(tok.pos, item)
        return self.predicate()

    def condition(self, node: Node) -> Node:
        """``node`` used where a condition is needed (AND, OR, NOT, the whole expression)."""
        kind = kind_of(node)
        if kind is Kind.PROP:
            assert isinstance(node, Prop)
            return BoolCast(node.pos, node)
        if kind in (Kind.BOOL, Kind.NULL):
            return node
        raise SqlParseError(
            f"a {kind.value} constant is not a condition; compare it, e.g. a = {_show(node)}", node.pos
        )

    def predicate(self) -> Node:
        left = self.operand()
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("=", "<>", "<", "<=", ">", ">="):
            self.take()
            return compare(tok.text, left, self.operand(), tok.pos)
        negated = False
        if self.at_kw("NOT") and self.peek(1).kind == "kw":
            self.take()
            negated = True
            if not self.at_kw("BETWEEN", "IN", "CONTAINS", "STARTSWITH", "ENDSWITH"):
                self.fail("expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT")
        if self.at_kw("BETWEEN"):
            return self.between(left, negated)
        if self.at_kw("IN"):
            return self.in_list(left, negated)
        if self.at_kw("CONTAINS", "STARTSWITH", "ENDSWITH"):
            op = self.take()
            return str_op(op.text, left, self.string(), negated, op.pos)
        if self.at_kw("IS") and not negated:
            self.take()
            is_not = self.at_kw("NOT")
            if is_not:
                self.take()
            self.expect_kw("NULL")
            return IsNull(left.pos, left, is_not)
        if self.at_kw("LIKE"):
            raise SqlParseError("LIKE is not supported; use CONTAINS, STARTSWITH or ENDSWITH", tok.pos)
        return left

    def between(self, value: Node, negated: bool) -> Node:
        pos = self.take().pos
        low = self.operand()
        self.expect_kw("AND")
        high = self.operand()
        if (
            isinstance(low, Const)
            and isinstance(high, Const)
            and low.kind in _NUMBERS
            and high.kind in _NUMBERS
        ):
            assert isinstance(low.value, int | float) and isinstance(high.value, int | float)
            if low.value > high.value:
                raise SqlParseError(
                    f"BETWEEN {low.value} AND {high.value}: the low bound is above the high", pos
                )
        if negated:
            return Logic(pos, "OR", (compare("<", value, low, pos), compare(">", value, high, pos)))
        return Logic(pos, "AND", (compare(">=", value, low, pos), compare("<=", value, high, pos)))

    def in_list(self, left: Node, negated: bool) -> Node:
        pos = self.take().pos
        if not isinstance(left, Prop):
            raise SqlParseError(f"IN needs a property on its left, not {_show(left)}", left.pos)
        self.expect_op("(")
        values = [self.string()]
        while self.peek().kind == "op" and self.peek().text == ",":
            self.take()
            values.append(self.string())
        self.expect_op(")")
        return In(pos, left, tuple(values), negated)

    def string(self) -> str:
        tok = self.peek()
        if tok.kind != "str":
            self.fail("expected a string constant like 'abc'")
        self.take()
        assert isinstance(tok.value, str)
        return tok.value

    def operand(self) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("+", "-"):
            self.take()
            self.enter(tok.pos)
            inner = self.operand()
            self.depth -= 1
            return _signed(tok.text, inner, tok.pos)
        return self.primary()

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind == "int":
            value = int(tok.text.rstrip("lL"))
            if value > _MAX_LONG:
                raise SqlParseError(f"{tok.text} is out of the 64-bit integer range", tok.pos)
            return Const(tok.pos, value, Kind.LONG)
        if tok.kind == "float":
            return Const(tok.pos, float(tok.text), Kind.DOUBLE)
        if tok.kind == "str":
            assert isinstance(tok.value, str)
            return Const(tok.pos, tok.value, Kind.STR)
        if tok.kind == "ident":
            return Prop(tok.pos, tok.text)
        if tok.kind == "kw" and tok.text in ("TRUE", "FALSE"):
            return Const(tok.pos, tok.text == "TRUE", Kind.BOOL)
        if tok.kind == "kw" and tok.text == "NULL":
            return Const(tok.pos, None, Kind.NULL)
        if tok.kind == "op" and tok.text == "(":
            self.enter(tok.pos)
            inner = self.or_expr()
            self.depth -= 1
            self.expect_op(")")
            return inner
        self.i -= 1
        self.fail("expected a property, a constant or '('")
        raise AssertionError("unreachable")


def _show(node: Node) -> str:
    if isinstance(node, Const):
        if node.kind is Kind.STR:
            return "'" + str(node.value).replace("'", "''") + "'"
        if node.kind is Kind.BOOL:
            return "TRUE" if node.value else "FALSE"
        return "NULL" if node.value is None else repr(node.value)
    if isinstance(node, Prop):
        return node.name
    return "a condition"


def _signed(sign: str, inner: Node, pos: int) -> Node:
    if not isinstance(inner, Const) or inner.kind not in (Kind.LONG, Kind.DOUBLE):
        raise SqlParseError(f"unary {sign} applies to number constants only (there is no arithmetic)", pos)
    assert isinstance(inner.value, int | float)
    return Const(pos, -inner.value if sign == "-" else inner.value, inner.kind)


_ORDERED = (Kind.PROP, Kind.LONG, Kind.DOUBLE)
_NUMBERS = (Kind.LONG, Kind.DOUBLE)


def compare(op: str, left: Node, right: Node, pos: int) -> Compare:
    """A checked comparison (RocketMQ's ``checkLessThanOperand`` / ``checkEqualOperand`` rules)."""
    lk, rk = kind_of(left), kind_of(right)
    if op in ("=", "<>"):
        for node, kind in ((left, lk), (right, rk)):
            if kind is Kind.NULL:
                raise SqlParseError(
                    f"NULL cannot be compared with {op}; use IS NULL or IS NOT NULL", node.pos
                )
        if not (Kind.PROP in (lk, rk) or lk is rk or (lk in _NUMBERS and rk in _NUMBERS)):
            raise SqlParseError(f"{_show(left)} cannot be compared with {_show(right)}", pos)
        return Compare(pos, op, left, right)
    for node, kind in ((left, lk), (right, rk)):
        if kind not in _ORDERED:
            raise SqlParseError(
                f"{_show(node)} cannot be compared with {op}: only numbers and properties can", node.pos
            )
    return Compare(pos, op, left, right)


def str_op(op: str, left: Node, search: str, negated: bool, pos: int) -> StrOp:
    """A checked CONTAINS / STARTSWITH / ENDSWITH."""
    if kind_of(left) not in (Kind.PROP, Kind.STR):
        raise SqlParseError(f"{op} needs a property or a string on its left, not {_show(left)}", left.pos)
    return StrOp(pos, op, left, search, negated)


def parse(text: str) -> Node:
    """The checked syntax tree of ``text``.

    Raises:
        SqlParseError: on any lexical, grammar or type error, or an expression over the bounds.
    """
    if not isinstance(text, str):
        raise SqlParseError(f"the expression must be a str, not {type(text).__name__}", 0)
    if len(text) > MAX_SQL_LENGTH:
        raise SqlParseError(
            f"the expression is {len(text)} chars; the limit is {MAX_SQL_LENGTH}", MAX_SQL_LENGTH
        )
    if not text.strip():
        raise SqlParseError("the expression is empty; write a condition such as a > 5", 0)
    return Parser(text).parse()
