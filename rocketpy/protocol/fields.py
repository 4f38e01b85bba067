"""Typed reads of a command's ``ext`` fields.

Natively ``ext`` values are msgpack ints, strs and bools; RocketMQ's JSON clients send strings (Java)
or a mix of strings and ints (C++: booleans as "1"/"0"). These helpers accept all of them and raise
``HeaderError`` naming the field when it is missing or malformed; the server answers that error
with INVALID_PARAMETER and the message as remark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rocketpy.errors import HeaderError

_MISSING = object()


def _lookup(ext: Mapping[str, Any] | None, name: str, default: Any) -> Any:
    value = ext.get(name, _MISSING) if ext else _MISSING
    if value is _MISSING or value is None:
        if default is None:
            raise HeaderError(f"request header field '{name}' is missing; the sender must set it")
        return default
    return value


def ext_int(ext: Mapping[str, Any] | None, name: str, default: int | None = None) -> int:
    """Return field ``name`` as an int; accepts ints and decimal strings.

    Raises:
        HeaderError: the field is missing (and no default) or not an integer.
    """
    value = _lookup(ext, name, default)
    if type(value) is int:
        return value
    if isinstance(value, str):
        try:
            return int(value.strip(), 10)
        except ValueError:
            pass
    raise HeaderError(f"request header field '{name}' must be an integer, got {value!r}")


def ext_str(ext: Mapping[str, Any] | None, name: str, default: str | None = None) -> str:
    """Return field ``name`` as a str; ints are converted to their decimal text.

    Raises:
        HeaderError: the field is missing (and no default) or not a string.
    """
    value = _lookup(ext, name, default)
    if type(value) is str:
        return value
    if type(value) is int:
        return str(value)
    raise HeaderError(f"request header field '{name}' must be a string, got {value!r}")


def ext_bool(ext: Mapping[str, Any] | None, name: str, default: bool | None = None) -> bool:
    """Return field ``name`` as a bool; accepts bools, "true"/"false" (any case) and "1"/"0" (the C++ client).

    Raises:
        HeaderError: the field is missing (and no default) or not a boolean.
    """
    value = _lookup(ext, name, default)
    if type(value) is bool:
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
    raise HeaderError(f"request header field '{name}' must be true or false, got {value!r}")


def ext_opt_int(ext: Mapping[str, Any] | None, name: str) -> int | None:
    """Return field ``name`` as an int, or None when it is absent.

    Raises:
        HeaderError: the field is present but not an integer.
    """
    if not ext or ext.get(name) is None:
        return None
    return ext_int(ext, name)


def ext_opt_str(ext: Mapping[str, Any] | None, name: str) -> str | None:
    """Return field ``name`` as a str, or None when it is absent.

    Raises:
        HeaderError: the field is present but not a string.
    """
    if not ext or ext.get(name) is None:
        return None
    return ext_str(ext, name)
