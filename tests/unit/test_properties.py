"""The .properties reader follows java.util.Properties.load, edge case by edge case."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy import config
from rocketpy.errors import ConfigError
from rocketpy.properties import Property, parse_properties, read_properties_file


def kv(text: str) -> list[tuple[str, str]]:
    return [(p.key, p.value) for p in parse_properties(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b", [("a", "b")]),
        ("a:b", [("a", "b")]),
        ("a b", [("a", "b")]),
        ("a\tb", [("a", "b")]),
        ("a\fb", [("a", "b")]),
        ("a    =   b", [("a", "b")]),
        ("a = = b", [("a", "= b")]),  # only one separator is skipped
        ("a:=b", [("a", "=b")]),
        ("a  b = c", [("a", "b = c")]),  # whitespace separated: '=' belongs to the value
        ("a", [("a", "")]),
        ("a=", [("a", "")]),
        ("=b", [("", "b")]),
        ("   a=b", [("a", "b")]),  # leading whitespace skipped
        ("a=b  \t", [("a", "b  \t")]),  # trailing whitespace kept, as Java does
        ("a=b#c", [("a", "b#c")]),  # no inline comments
        ("a=b!c", [("a", "b!c")]),
    ],
)
def test_separators_and_whitespace(text: str, expected: list[tuple[str, str]]) -> None:
    assert kv(text) == expected


def test_comments_and_blank_lines_are_skipped() -> None:
    text = "# a comment\n! another\n   # indented comment\n\n   \n\t\nkey=value\n"
    assert parse_properties(text) == [Property("key", "value", 7)]


def test_continuation_joins_lines_and_drops_leading_whitespace_of_the_next() -> None:
    assert kv("a=one \\\n     two\\\n\tthree") == [("a", "one twothree")]


def test_even_backslashes_do_not_continue() -> None:
    assert kv("a=b\\\\\nc=d") == [("a", "b\\"), ("c", "d")]


def test_odd_backslashes_continue() -> None:
    assert kv("a=b\\\\\\\nc") == [("a", "b\\c")]


def test_comment_line_is_never_continued() -> None:
    assert kv("# comment \\\na=b") == [("a", "b")]


def test_continued_line_starting_with_hash_is_not_a_comment() -> None:
    assert kv("a=b\\\n  #c") == [("a", "b#c")]


def test_continuation_into_an_empty_line_ends_the_value() -> None:
    assert kv("a=b\\\n\nc=d") == [("a", "b"), ("c", "d")]


def test_continuation_at_end_of_file() -> None:
    assert kv("a=b\\") == [("a", "b")]


def test_continuation_in_the_key() -> None:
    assert kv("ab\\\n  cd=1") == [("abcd", "1")]


def test_lone_backslash_line_continuing_into_blank_is_skipped() -> None:
    assert kv("\\\n\nk=v") == [("k", "v")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=\\t\\n\\r\\f", [("a", "\t\n\r\f")]),
        ("a=\\u0041\\u00e9", [("a", "Aé")]),
        ("a=\\uD83D\\uDE00", [("a", "\U0001f600")]),  # surrogate pair, as Java's UTF-16
        ("a\\ b=c", [("a b", "c")]),
        ("a\\=b=c", [("a=b", "c")]),
        ("a\\:b:c", [("a:b", "c")]),
        ("a=\\q\\\\x", [("a", "q\\x")]),  # unknown escape drops the backslash
        ("a=\\ lead", [("a", " lead")]),  # escaped leading space kept
        ("a=C:\\\\dir", [("a", "C:\\dir")]),
        ("\\#notcomment=1", [("#notcomment", "1")]),
    ],
)
def test_escapes(text: str, expected: list[tuple[str, str]]) -> None:
    assert kv(text) == expected


def test_malformed_unicode_escape_is_an_error_with_file_and_line() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_properties("ok=1\na=\\u12G4\n", "f.properties")
    assert (
        str(ei.value)
        == "error: f.properties:2: malformed \\uXXXX escape '\\u12G4' (write \\u and 4 hex digits)"
    )


def test_short_unicode_escape_at_end_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"^error: x:1: malformed \\uXXXX escape '\\u12'"):
        parse_properties("a=\\u12", "x")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings_and_line_numbers(newline: str) -> None:
    text = newline.join(["# c", "a=1", "", "b=2\\", "  3", "c=4"])
    assert parse_properties(text) == [Property("a", "1", 2), Property("b", "23", 4), Property("c", "4", 6)]


def test_repeated_key_is_kept_in_order() -> None:
    assert kv("a=1\na=2") == [("a", "1"), ("a", "2")]


def test_read_file_utf8_with_bom(tmp_path: Path) -> None:
    path = tmp_path / "x.properties"
    path.write_bytes("\ufeffbrokerName=brôker\n".encode())
    assert read_properties_file(str(path)) == [Property("brokerName", "brôker", 1)]


def test_read_file_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "x.properties"
    path.write_bytes(b"a=1\nb=\xff\xfe\n")
    with pytest.raises(ConfigError) as ei:
        read_properties_file(str(path))
    assert str(ei.value) == f"error: {path}:2: not UTF-8 text: save the file as UTF-8"


def test_read_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.properties"
    with pytest.raises(ConfigError) as ei:
        read_properties_file(str(path))
    assert str(ei.value) == f"error: {path}: cannot read config file: No such file or directory"


def test_read_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        read_properties_file(str(tmp_path))
    assert str(ei.value) == f"error: {tmp_path}: cannot read config file: Is a directory"


def java_save_convert(text: str, escape_space: bool) -> str:
    """What java.util.Properties.store writes for a key (escape_space) or a value."""
    out = []
    for i, ch in enumerate(text):
        if ch == " ":
            out.append("\\ " if i == 0 or escape_space else " ")
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ch in "=:#!\\":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            units = ch.encode("utf-16-be")
            out.extend(f"\\u{int.from_bytes(units[j : j + 2], 'big'):04X}" for j in range(0, len(units), 2))
        else:
            out.append(ch)
    return "".join(out)


_TEXT = st.text(st.characters(codec="utf-8"), max_size=30)  # no lone surrogates


@given(key=_TEXT.filter(bool), value=_TEXT)
def test_reads_back_what_java_properties_store_writes(key: str, value: str) -> None:
    line = f"{java_save_convert(key, True)}={java_save_convert(value, False)}"
    assert kv(f"# stored\n{line}\n") == [(key, value)]


def test_reader_names_stay_importable_from_config() -> None:
    assert config.parse_properties is parse_properties
    assert config.read_properties_file is read_properties_file
    assert config.Property is Property
