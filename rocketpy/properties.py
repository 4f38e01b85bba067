"""Reading ``.properties`` files with Java's ``java.util.Properties.load`` rules.

Owns the syntax only: comments, separators, line continuations and escapes, giving ``Property``
entries (key, raw value, line) in file order. What the keys mean, trimming and typing values, is
``rocketpy.config``'s business. Files are read as UTF-8 (Java 9+ reads ``.properties`` resources as
UTF-8 too); a leading BOM is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rocketpy.errors import ConfigError

_WS = " \t\f"
_NEWLINE = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True, slots=True)
class Property:
    """One ``key=value`` entry of a ``.properties`` text and the line its logical line starts on."""

    key: str
    value: str
    line: int


def parse_properties(text: str, source: str = "<text>") -> list[Property]:
    """Parse ``.properties`` text as Java's ``Properties.load`` does.

    Rules: lines end at ``\\n``, ``\\r`` or ``\\r\\n``; leading whitespace (space, tab, form feed)
    is skipped; a line whose first other character is ``#`` or ``!`` is a comment (never
    continued); a line ending in an odd number of backslashes continues on the next line, whose
    leading whitespace is dropped; the key ends at the first unescaped ``=``, ``:`` or whitespace;
    whitespace and one ``=``/``:`` after it are skipped; the value is the rest of the line,
    trailing whitespace included; ``\\t \\n \\r \\f \\uXXXX`` are escapes and any other ``\\c`` is ``c``.

    Args:
        text: the file's content.
        source: the file name, used in error messages.

    Returns:
        The entries in file order (a repeated key appears twice; the last one wins when loading).

    Raises:
        ConfigError: a malformed ``\\uXXXX`` escape.
    """
    lines = _NEWLINE.split(text)
    out: list[Property] = []
    i = 0
    while i < len(lines):
        start = i + 1
        logical = lines[i].lstrip(_WS)
        i += 1
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical):
            logical = logical[:-1]
            if i >= len(lines):
                break
            logical += lines[i].lstrip(_WS)
            i += 1
        if not logical:
            continue
        key, value = _split_key_value(logical)
        where = f"{source}:{start}"
        out.append(Property(_unescape(key, where), _unescape(value, where), start))
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    n = len(line)
    key_len, value_start, has_sep, backslash = 0, n, False, False
    while key_len < n:
        c = line[key_len]
        if not backslash and c in "=:":
            value_start, has_sep = key_len + 1, True
            break
        if not backslash and c in _WS:
            value_start = key_len + 1
            break
        backslash = c == "\\" and not backslash
        key_len += 1
    while value_start < n:
        c = line[value_start]
        if c not in _WS:
            if has_sep or c not in "=:":
                break
            has_sep = True
        value_start += 1
    return line[:key_len], line[value_start:]


def _unescape(s: str, where: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
        elif i < n and s[i] == "u":
            digits = s[i + 1 : i + 5]
            if len(digits) < 4 or not _HEX.issuperset(digits):
                raise ConfigError(
                    f"error: {where}: malformed \\uXXXX escape '\\u{digits}' (write \\u and 4 hex digits)"
                )
            out.append(chr(int(digits, 16)))
            i += 5
        elif i < n:
            out.append(_ESCAPES.get(s[i], s[i]))
            i += 1
    text = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in text):  # \\uD83D\\uDE00 pairs, as Java's UTF-16
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def read_properties_file(path: str) -> list[Property]:
    """Read and parse a ``.properties`` file (UTF-8; a leading BOM is ignored).

    Raises:
        ConfigError: the file cannot be read, is not UTF-8, or has a malformed escape.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        reason = e.strerror or str(e)
        raise ConfigError(f"error: {path}: cannot read config file: {reason}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(f"error: {path}:{line}: not UTF-8 text: save the file as UTF-8") from e
    return parse_properties(text.removeprefix("\ufeff"), path)
