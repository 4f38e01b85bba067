"""Tag hash codes: Java ``String.hashCode`` as a signed int32 (the ConsumeQueue tag code).

Java hashes UTF-16 code units: ``h = 31*h + c`` over the string's chars, wrapped to int32. For
strings of ASCII/BMP characters that is the code points; astral characters count as two surrogate
code units. Results are cached (tags and index keys repeat a lot), bounded by ``_CACHE_MAX``.
"""

from __future__ import annotations

_CACHE_MAX = 65_536
_cache: dict[str, int] = {}
_MASK32 = 0xFFFFFFFF


def _compute(s: str) -> int:
    if s.isascii():
        units: bytes | list[int] = s.encode("ascii")
    else:
        b = s.encode("utf-16-be")
        units = [(b[i] << 8) | b[i + 1] for i in range(0, len(b), 2)]
    h = 0
    for c in units:
        h = (31 * h + c) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def split_tag_expression(expr: str) -> frozenset[str]:
    """The tags of a subscription expression ``"TagA || TagB"`` (trimmed, empties dropped).

    ``"*"`` and ``""`` (every message) are the callers' business; this only splits.
    """
    return frozenset(t for t in (part.strip() for part in expr.split("||")) if t)


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()`` of ``s`` as a signed 32-bit int (cached)."""
    h = _cache.get(s)
    if h is None:
        h = _compute(s)
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[s] = h
    return h


POW31 = [pow(31, i, 1 << 32) for i in range(257)]
_POW31 = POW31
# 48 * (31**(n-1) + ... + 31 + 1): the '0' (48) part of every char of an n-char key
BASE48 = [48 * sum(31**k for k in range(n)) for n in range(65)]
# '0'-'9' -> '0', 'A'-'F' -> '1' (their codes are 48 + digit and 48 + 7 + digit); anything else invalid
HEX_MASK = bytes(ord("0") if 48 <= i <= 57 else ord("1") if 65 <= i <= 70 else ord("x") for i in range(256))


def _pow31(n: int) -> int:
    return _POW31[n] if n <= 256 else pow(31, n, 1 << 32)


def key_hash_u32(key: str) -> tuple[int, int]:
    """(unsigned hash, length in UTF-16 units) of ``key``.

    Uppercase-hex keys (unique message ids) use C-level integer parsing: with ``c = 48 + d`` for
    digits and ``c = 48 + 7 + d`` for A-F (``d`` the hex digit value), the Java polynomial
    ``sum(c_i * 31**k)`` equals ``int(key, 31) + 48 * sum(31**k) + 7 * int(letter_mask, 31)``.
    """
    n = len(key)
    if 0 < n <= 64:
        try:
            b = key.encode("ascii")
            letters = int(b.translate(HEX_MASK), 31)
            return (int(b, 31) + BASE48[n] + 7 * letters) & _MASK32, n
        except (UnicodeEncodeError, ValueError):
            pass
    h = _compute(key) & _MASK32
    return h, (n if key.isascii() else len(key.encode("utf-16-le")) // 2)


def topic_key_hash(topic: str, key: str) -> int:
    """``java_string_hash(f"{topic}#{key}")`` computed fast (index keys; hot path)."""
    kh, n = key_hash_u32(key)
    h = ((java_string_hash(topic + "#") & _MASK32) * _pow31(n) + kh) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def java_string_hash_key(s: str) -> int:
    """``java_string_hash`` for index keys ``topic#key``: splits at the first ``#`` (same result)."""
    topic, sep, key = s.partition("#")
    if not sep:
        return java_string_hash(s)
    return topic_key_hash(topic, key)


def tags_code(tags: str | None) -> int:
    """The ConsumeQueue tag code of a message's TAGS property (0 when there are no tags)."""
    return java_string_hash(tags) if tags else 0
