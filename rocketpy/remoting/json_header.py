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

Decoding is bounded before the parser allocates anything: the frame decoder refuses a header longer
than ``maxHeaderBytes``, and ``check_json_cost`` counts what the parse would build (the text with its
strings taken out, at C speed): at most ``MAX_JSON_HEADER_CONTAINERS`` objects and arrays (a
RocketMQ header has two: itself and ``extFields``) and ``MAX_JSON_HEADER_ITEMS`` commas.

Invariants: ``decode_json_header`` raises ``ValueError`` (with a reason fit for one log line, never
the whole input) for anything it does not accept; ``codec.py`` turns that into ``FrameError``.
"""

from __future__ import annotations

import json
from typing import Any

from rocketpy.limits import MAX_HEADER_ITEMS
from rocketpy.remoting.command import RemotingCommand

#: The ``language`` rocketpy announces (RocketMQ's LanguageCode name).
LANGUAGE = "PYTHON"
#: The ``version`` rocketpy announces: MQVersion V4_9_7's ordinal (the 4.x wire layout it speaks).
VERSION = 407
#: Objects and arrays a JSON header may hold (RocketMQ's have two; unknown keys may add a few).
MAX_JSON_HEADER_CONTAINERS = 16
#: Commas a JSON header may hold outside its strings: about one per field.
MAX_JSON_HEADER_ITEMS = 2 * MAX_HEADER_ITEMS

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


def check_json_cost(text: str) -> None:
    """Refuse a header text whose parse would build more than a header's worth of values: more than
    ``MAX_JSON_HEADER_CONTAINERS`` objects and arrays or ``MAX_JSON_HEADER_ITEMS`` commas outside
    strings. Run before ``json.loads``; linear, in C string methods only (about 1 ms for 64 KiB of
    escapes, the worst case): the text is counted as it is, and only when that passes a limit
    again with its strings taken out (escaped backslashes and quotes dropped, then every other
    piece between quotes).

    Raises:
        ValueError: naming the count and its limit.
    """
    if (
        text.count(",") <= MAX_JSON_HEADER_ITEMS
        and text.count("{") + text.count("[") <= MAX_JSON_HEADER_CONTAINERS
    ):
        return  # even counting what the strings hold
    bare = "".join(text.replace("\\\\", "").replace('\\"', "").split('"')[::2])
    containers = bare.count("{") + bare.count("[")
    if containers > MAX_JSON_HEADER_CONTAINERS:
        raise ValueError(
            f"JSON header holds {containers} objects and arrays; the limit is {MAX_JSON_HEADER_CONTAINERS}"
        )
    items = bare.count(",")
    if items > MAX_JSON_HEADER_ITEMS:
        raise ValueError(f"JSON header has {items} items; the limit is {MAX_JSON_HEADER_ITEMS}")


def decode_json_header(data: memoryview | bytes, serialize_type: int) -> RemotingCommand:
    """Parse a JSON header into a command with an empty body (its length was checked by the frame
    decoder, against ``maxHeaderBytes``).

    Raises:
        ValueError: not UTF-8 JSON, too many values (``check_json_cost``), not an object, or a
            field of the wrong type.
    """
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"undecodable JSON header: {str(exc)[:120]}") from None
    check_json_cost(text)
    try:
        doc = _loads(text)
    except RecursionError:
        raise ValueError("JSON header nests too deeply") from None
    except ValueError as exc:  # JSONDecodeError
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
        if len(raw_ext) > MAX_HEADER_ITEMS:
            raise ValueError(f"JSON header has {len(raw_ext)} extFields; the limit is {MAX_HEADER_ITEMS}")
        ext = {}
        for key, value in raw_ext.items():
            if value is None:
                continue
            if type(value) not in (str, int, bool):
                raise ValueError(f"JSON header extFields['{key[:40]}'] must be a string or integer")
            ext[key] = value
    return RemotingCommand(code, opaque, flag, remark, ext, b"", serialize_type)
