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


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()`` of ``s`` as a signed 32-bit int (cached)."""
    h = _cache.get(s)
    if h is None:
        h = _compute(s)
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[s] = h
    return h


_TAIL_CHARS = 12
_POW31_TAIL = pow(31, _TAIL_CHARS, 1 << 32)


def java_string_hash_key(s: str) -> int:
    """``java_string_hash`` for keys that share long prefixes (``topic#UNIQ_KEY``): hot path.

    Uses ``hash(head + tail) = hash(head) * 31**len(tail) + hash(tail)`` (mod 2**32) with the head
    hash cached, so only the last 12 chars are hashed per call. Same result as ``java_string_hash``.
    """
    if len(s) <= _TAIL_CHARS + 4 or not s.isascii():
        return java_string_hash(s)
    h = (java_string_hash(s[:-_TAIL_CHARS]) & _MASK32) * _POW31_TAIL
    t = 0
    for c in s[-_TAIL_CHARS:].encode("ascii"):
        t = t * 31 + c
    h = (h + t) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """The ConsumeQueue tag code of a message's TAGS property (0 when there are no tags)."""
    return java_string_hash(tags) if tags else 0
