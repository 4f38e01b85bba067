"""RocketMQ's JSON header (serialize type 0x00), the encoding of RocketMQ's own clients.

Owns the text of a JSON header both ways (reference §1.2)::

    {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":3,
     "serializeTypeCurrentRPC":"JSON","version":479}

Decoding takes ``code``, ``opaque``, ``flag``, ``remark`` and ``extFields`` and ignores every other
key (``language``, ``version``, ``serializeTypeCurrentRPC``, ...); the C++ client's trailing newline
is whitespace. ``extFields`` values may be strings, numbers or booleans (Java sends strings, the C++
client some ints); a null value is the field's absence. Encoding writes keys sorted as fastjson
does, always an ``extFields`` object (the C++ client dereferences it unchecked on a send answer) and
every ext value as a JSON string: RocketMQ's C++ client reads a number there as 0.

Invariants: ``decode_json_header`` raises ``ValueError`` (with a reason fit for one log line, never
the whole input) for anything it does not accept; ``codec.py`` turns that into ``FrameError``.
"""

from __future__ import annotations

import json
from typing import Any

from rocketpy.remoting.command import RemotingCommand

#: The ``language`` rocketpy announces (RocketMQ's LanguageCode name).
LANGUAGE = "PYTHON"
#: The ``version`` rocketpy announces: MQVersion V4_9_7's ordinal (the 4.x wire layout it speaks).
VERSION = 407
#: Longest JSON header accepted; RocketMQ's headers are a few hundred bytes.
MAX_JSON_HEADER_BYTES = 64 * 1024

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_loads = json.loads


def ext_text(value: Any) -> str:
    """An ext value as the string RocketMQ puts on the wire (booleans as ``true``/``false``)."""
    if type(value) is str:
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The JSON header of ``cmd`` (keys sorted; ext values as strings; null ones left out)."""
    ext = cmd.ext
    fields: dict[str, Any] = {
        "code": cmd.code,
        "extFields": {k: ext_text(v) for k, v in ext.items() if v is not None} if ext else {},
        "flag": cmd.flag,
        "language": LANGUAGE,
        "opaque": cmd.opaque,
    }
    if cmd.remark is not None:
        fields["remark"] = cmd.remark
    fields["serializeTypeCurrentRPC"] = "JSON"
    fields["version"] = VERSION
    return _dumps(fields).encode()


def _int_field(doc: dict[str, Any], name: str, default: int | None) -> int:
    value = doc.get(name, default)
    if type(value) is int and -(1 << 31) <= value < (1 << 32):
        return value
    raise ValueError(f"JSON header '{name}' must be a 32-bit integer, got {_short(value)}")


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def decode_json_header(data: memoryview | bytes, serialize_type: int) -> RemotingCommand:
    """Parse a JSON header into a command with an empty body.

    Raises:
        ValueError: too long, not UTF-8 JSON, not an object, or a field of the wrong type.
    """
    if len(data) > MAX_JSON_HEADER_BYTES:
        raise ValueError(f"JSON header of {len(data)} bytes exceeds {MAX_JSON_HEADER_BYTES}")
    try:
        doc = _loads(str(data, "utf-8"))
    except RecursionError:
        raise ValueError("JSON header nests too deeply") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"undecodable JSON header: {str(exc)[:120]}") from None
    if type(doc) is not dict:
        raise ValueError(f"JSON header must be an object, got {type(doc).__name__}")
    code = _int_field(doc, "code", None)
    opaque = _int_field(doc, "opaque", 0)
    flag = _int_field(doc, "flag", 0)
    remark = doc.get("remark")
    if remark is not None and type(remark) is not str:
        raise ValueError(f"JSON header 'remark' must be a string or null, got {_short(remark)}")
    raw_ext = doc.get("extFields")
    ext: dict[str, Any] | None = None
    if raw_ext is not None:
        if type(raw_ext) is not dict:
            raise ValueError(f"JSON header 'extFields' must be an object, got {_short(raw_ext)}")
        ext = {}
        for key, value in raw_ext.items():
            if value is None:
                continue
            if type(value) not in (str, int, bool):
                raise ValueError(f"JSON header extFields['{key[:40]}'] must be a string or integer")
            ext[key] = value
    return RemotingCommand(code, opaque, flag, remark, ext, b"", serialize_type)
