"""SQL92 filters: the compiled evaluator against a small reference evaluator, and the parser's errors.

The property-based test builds random expressions as (text, reference function) pairs, so the
reference never sees our parser: it evaluates the generated tree directly with RocketMQ's rules
(reference §10) in the plainest Python. Both must agree on the three-valued result, on conversion
failures, and on the match of a stored record and of a property dict.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.filter.sql92 import (
    MAX_SQL_DEPTH,
    MAX_SQL_LENGTH,
    SqlEvaluationError,
    SqlParseError,
    compile_sql92,
)
from rocketpy.message import properties_to_string
from rocketpy.record import encode_record

Props = dict[str, str]
Ref = Callable[[Props], "bool | None"]


class Mismatch(Exception):
    """The reference's conversion failure (RocketMQ throws; the message does not match)."""


def ref_long(s: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", s) or not -(2**63) <= int(s) < 2**63:
        raise Mismatch(s)
    return int(s)


def ref_double(s: str) -> float:
    t = s.strip("".join(map(chr, range(33))))
    m = re.fullmatch(r"([+-]?)(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?", t)
    if not m:
        raise Mismatch(s)
    return float(m.group(1) + m.group(2))


def ref_compare(op: str, lv: object, rv: object) -> bool | None:
    if lv is None or rv is None:
        return None
    if op in ("<", "<=", ">", ">="):
        if isinstance(lv, str) and isinstance(rv, str):
            lv, rv = ref_double(lv), ref_double(rv)
        elif isinstance(lv, str):
            lv = ref_long(lv) if isinstance(rv, int) else ref_double(lv)
        elif isinstance(rv, str):
            rv = ref_long(rv) if isinstance(lv, int) else ref_double(rv)
        return {"<": lv < rv, "<=": lv <= rv, ">": lv > rv, ">=": lv >= rv}[op]  # type: ignore[operator]
    if isinstance(lv, str) != isinstance(rv, str):
        s, other = (lv, rv) if isinstance(lv, str) else (rv, lv)
        assert isinstance(s, str)
        if isinstance(other, bool):
            converted: object = s.lower() == "true"
        elif isinstance(other, int):
            converted = ref_long(s)
        else:
            converted = ref_double(s)
        equal = converted == other
    else:
        equal = lv == rv
    return equal if op == "=" else not equal


def ref_not(v: bool | None) -> bool | None:
    return None if v is None else not v


def ref_and(items: list[Ref], p: Props) -> bool | None:
    seen = []
    for item in items:
        v = item(p)
        if v is False:
            return False
        seen.append(v)
    return None if None in seen else True


def ref_or(items: list[Ref], p: Props) -> bool | None:
    seen = []
    for item in items:
        v = item(p)
        if v is True:
            return True
        seen.append(v)
    return None if None in seen else False


NAMES = ["a", "b", "TAGS"]
VALUES = ["1", "5", "-3", "2.5", "abc", "", "true", "TRUE", "x y", " 7", "1e3", "9999999999999999999", "7L"]
INTS = [-5, 0, 1, 5, 7, 10]
DOUBLES = [0.5, 2.5, -1.5, 1000.0]
STRINGS = ["abc", "1", "true", "", "it's"]


def q(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def kw(word: str, data: st.DataObject) -> str:
    return data.draw(st.sampled_from([word.upper(), word.lower(), word.capitalize()]))


@st.composite
def operand(draw: st.DrawFn, numeric_only: bool) -> tuple[str, Callable[[Props], object]]:
    choices = ["prop", "int", "double"] if numeric_only else ["prop", "int", "double", "str", "bool"]
    what = draw(st.sampled_from(choices))
    if what == "prop":
        name = draw(st.sampled_from(NAMES))
        return name, lambda p: p.get(name)
    if what == "int":
        i = draw(st.sampled_from(INTS))
        return str(i), lambda p: i
    if what == "double":
        d = draw(st.sampled_from(DOUBLES))
        return repr(d), lambda p: d
    if what == "str":
        s = draw(st.sampled_from(STRINGS))
        return q(s), lambda p: s
    b = draw(st.booleans())
    return ("TRUE" if b else "FALSE"), lambda p: b


def _kind(text: str) -> str:
    if text in NAMES:
        return "prop"
    if text in ("TRUE", "FALSE"):
        return "bool"
    return "str" if text.startswith("'") else "num"


@st.composite
def comparison(draw: st.DrawFn) -> tuple[str, Ref]:
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
    ordered = op not in ("=", "<>")
    lt, lf = draw(operand(ordered))
    rt, rf = draw(operand(ordered))
    kinds = {_kind(lt), _kind(rt)}
    if not ordered and "prop" not in kinds and len(kinds) > 1:
        rt, rf = lt, lf  # the parser refuses e.g. TRUE = 5; compare like with like
    return f"{lt} {op} {rt}", lambda p: ref_compare(op, lf(p), rf(p))


@st.composite
def predicate(draw: st.DrawFn) -> tuple[str, Ref]:
    data = draw(st.data())
    name = draw(st.sampled_from(NAMES))
    form = draw(st.sampled_from(["cmp", "between", "in", "null", "strop", "bare", "const"]))
    neg = draw(st.booleans())
    NOT = kw("NOT", data) + " " if neg else ""
    if form == "cmp":
        return draw(comparison())
    if form == "between":
        lo, hi = sorted(draw(st.lists(st.sampled_from(INTS + DOUBLES), min_size=2, max_size=2)))

        def between(p: Props) -> bool | None:
            v = p.get(name)
            if neg:
                return ref_or([lambda p: ref_compare("<", v, lo), lambda p: ref_compare(">", v, hi)], p)
            return ref_and([lambda p: ref_compare(">=", v, lo), lambda p: ref_compare("<=", v, hi)], p)

        return f"{name} {NOT}{kw('BETWEEN', data)} {lo!r} {kw('AND', data)} {hi!r}", between
    if form == "in":
        items = draw(st.lists(st.sampled_from(STRINGS + VALUES), min_size=1, max_size=3))
        text = f"{name} {NOT}{kw('IN', data)} ({', '.join(map(q, items))})"
        return text, lambda p: None if p.get(name) is None else (p[name] in items) != neg
    if form == "null":
        text = f"{name} {kw('IS', data)} {NOT}{kw('NULL', data)}"
        return text, lambda p: (p.get(name) is None) != neg
    if form == "strop":
        op = draw(st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"]))
        s = draw(st.sampled_from(["b", "1", "", "ab", "e"]))
        test = {"CONTAINS": str.__contains__, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}[op]

        def strop(p: Props) -> bool:  # never NULL: a missing property or an empty search is FALSE
            v = p.get(name)
            return bool(s) and v is not None and test(v, s) != neg

        return f"{name} {NOT}{kw(op, data)} {q(s)}", strop
    if form == "bare":
        return name, lambda p: None if p.get(name) is None else False
    c = draw(st.sampled_from([True, False, None]))
    return {True: "TRUE", False: "FALSE", None: "NULL"}[c], lambda p: c


def combine(children: st.SearchStrategy[tuple[str, Ref]]) -> st.SearchStrategy[tuple[str, Ref]]:
    def logic(op: str, items: list[tuple[str, Ref]]) -> tuple[str, Ref]:
        fns = [f for _, f in items]
        text = f" {op} ".join(f"({t})" for t, _ in items)
        return text, (lambda p: ref_and(fns, p)) if op == "AND" else (lambda p: ref_or(fns, p))

    items = st.lists(children, min_size=2, max_size=3)
    return st.one_of(
        st.builds(lambda xs: logic("AND", xs), items),
        st.builds(lambda xs: logic("OR", xs), items),
        st.builds(lambda x: (f"NOT ({x[0]})", lambda p: ref_not(x[1](p))), children),
    )


EXPRESSIONS = st.recursive(predicate(), combine, max_leaves=8)
PROPERTIES = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES), max_size=3)


def _record(props: Props) -> memoryview:
    return memoryview(encode_record(topic="T", body=b"body", properties=properties_to_string(props)))


@settings(max_examples=600, deadline=None)
@given(EXPRESSIONS, PROPERTIES)
def test_compiled_matches_reference(expr: tuple[str, Ref], props: Props) -> None:
    text, ref = expr
    compiled = compile_sql92(text)
    try:
        want: bool | None = ref(props)
    except Mismatch:
        with pytest.raises(SqlEvaluationError):
            compiled.evaluate(props)
        want = False
    else:
        assert compiled.evaluate(props) is want, (text, props)
    assert compiled.match_properties(props) is (want is True), (text, props)
    assert compiled.match_record(_record(props)) is (want is True), (text, props)


@pytest.mark.parametrize(
    ("text", "props", "want"),
    [
        ("a > 5", {"a": "7"}, True),
        ("a > 5", {}, None),
        ("a = 5", {"a": "5.0"}, "error"),  # a long constant reads the value as a Java long
        ("a = 5.0", {"a": "5"}, True),
        ("a > b", {"a": "10", "b": "9.5"}, True),  # two properties: compared as doubles
        ("a = b", {"a": "10", "b": "10.0"}, False),  # ... but = compares the strings
        ("a = TRUE", {"a": "True"}, True),
        ("NOT a IN ('x')", {}, None),
        ("a NOT CONTAINS 'x'", {}, False),
        ("a IS NULL OR a > 'b' <> TRUE", None, "parse"),
        ("TAGS = 'TagA' AND KEYS IS NULL", {"TAGS": "TagA"}, True),
        ("a BETWEEN -1.0 AND 1.5", {"a": "-0.5"}, True),
        ("a BETWEEN -1 AND 1.5", {"a": "-0.5"}, "error"),  # the long bound reads a long
        ("a > 5 OR b = 'x'", {"a": "zz", "b": "x"}, "error"),  # RocketMQ aborts on the bad conversion
        ("b = 'x' OR a > 5", {"a": "zz", "b": "x"}, True),  # ... unless OR already short-circuited
        ("a = 'it''s'", {"a": "it's"}, True),
        ("a = 9223372036854775807", {"a": "9223372036854775807"}, True),
        ("a > -9223372036854775807", {"a": "9223372036854775808"}, "error"),
    ],
)
def test_semantics_examples(text: str, props: Props | None, want: object) -> None:
    if want == "parse":
        with pytest.raises(SqlParseError):
            compile_sql92(text)
        return
    compiled = compile_sql92(text)
    assert props is not None
    if want == "error":
        with pytest.raises(SqlEvaluationError):
            compiled.evaluate(props)
        assert not compiled.match_properties(props) and not compiled.match_record(_record(props))
    else:
        assert compiled.evaluate(props) is want
        assert compiled.match_record(_record(props)) is (want is True)


@pytest.mark.parametrize(
    ("text", "column", "says"),
    [
        ("a = 'abc", 5, "unterminated string"),
        ("a > 'x'", 5, "cannot be compared with >"),
        ("'x' < a", 1, "cannot be compared with <"),
        ("a BETWEEN 'a' AND 'z'", 11, "cannot be compared"),
        ("a = NULL", 5, "IS NULL"),
        ("a != 1", 3, "use <>"),
        ("a == 1", 3, "use ="),
        ("5", 1, "not a condition"),
        ("-a > 1", 1, "no arithmetic"),
        ("a IN (1, 2)", 7, "string constant"),
        ("'x' IN ('x')", 1, "IN needs a property"),
        ("a LIKE 'x%'", 3, "CONTAINS"),
        ("a > 1 b", 7, "expected AND, OR"),
        ("a > 1 AND", 10, "expected a property"),
        ("(a > 1", 7, "expected ')'"),
        ("a # 1", 3, "unexpected character"),
        ("a > 99999999999999999999", 5, "64-bit"),
        ("a > 12abc", 5, "malformed number"),
        ("a BETWEEN 5 AND 1", 3, "low bound"),
        ("TRUE = 5", 6, "cannot be compared"),
        ("   ", 1, "empty"),
        ("a IS 5", 6, "expected NULL"),
    ],
)
def test_parse_errors_name_the_column(text: str, column: int, says: str) -> None:
    with pytest.raises(SqlParseError) as info:
        compile_sql92(text)
    assert f"column {column}:" in str(info.value) and says in str(info.value), str(info.value)


def test_nesting_and_length_are_bounded() -> None:
    deepest = "(" * MAX_SQL_DEPTH + "a = 1" + ")" * MAX_SQL_DEPTH
    assert compile_sql92(deepest).match_properties({"a": "1"})
    nots = "NOT " * MAX_SQL_DEPTH + "a = 1"
    assert compile_sql92(nots).evaluate({"a": "1"}) is (MAX_SQL_DEPTH % 2 == 0)
    mixed = "NOT (" * (MAX_SQL_DEPTH // 2) + "a = 1 OR b > 2" + ")" * (MAX_SQL_DEPTH // 2)
    assert compile_sql92(mixed).evaluate({"a": "2", "b": "3"}) is True  # 16 NOTs of TRUE
    with pytest.raises(SqlParseError, match="nests deeper"):
        compile_sql92("(" * (MAX_SQL_DEPTH + 1) + "a = 1" + ")" * (MAX_SQL_DEPTH + 1))
    with pytest.raises(SqlParseError, match="nests deeper"):
        compile_sql92("(" * (MAX_SQL_LENGTH - 1))
    long_chain = " OR ".join(f"a = {i}" for i in range(600))[: MAX_SQL_LENGTH - 10].rsplit(" OR ", 1)[0]
    assert compile_sql92(long_chain).match_properties({"a": "3"})
    with pytest.raises(SqlParseError, match="limit"):
        compile_sql92("a = 1 OR " * 1000 + "a = 2")


def test_generated_source_holds_no_user_text() -> None:
    evil = "x = '__import__(\"os\").system(\"false\")' OR y STARTSWITH ')); import os #'"
    compiled = compile_sql92(evil)
    assert "import" not in compiled.source and "system" not in compiled.source
    assert compiled.match_properties({"x": '__import__("os").system("false")'})
    assert compiled.property_names == {"x", "y"}


def test_client_recheck_drops_non_matches() -> None:
    from rocketpy.client.pull_loop import filter_by_tags
    from rocketpy.message import MessageExt
    from rocketpy.subscription import parse_subscription

    sub = parse_subscription("T", "TAGS = 'A' AND n > 1", expression_type="SQL92")
    msgs = [
        MessageExt("T", b"", tags=tag, properties={"n": n}) for tag, n in (("A", "2"), ("B", "2"), ("A", "0"))
    ]
    assert [(m.tags, m.properties["n"]) for m in filter_by_tags(sub, msgs)] == [("A", "2")]
