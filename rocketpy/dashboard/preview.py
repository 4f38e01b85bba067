"""Message body previews: text, pretty JSON and a hex dump, each bounded in size.

Bodies are hostile input: these functions only produce plain strings, which the templates escape
(autoescape); nothing here builds HTML.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: Bytes of a body shown as text / JSON.
TEXT_LIMIT = 64 * 1024
#: Bytes of a body shown in the hex dump.
HEX_LIMIT = 4096


@dataclass(frozen=True)
class BodyPreview:
    """A body seen three ways (``json`` is None when the body is not a JSON document)."""

    size: int
    text: str
    text_truncated: bool
    json: str | None
    hex: str
    hex_truncated: bool


def hex_dump(data: bytes) -> str:
    """``hexdump -C``-style lines: offset, 16 bytes in hex, the printable ASCII."""
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        ascii_ = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{at:08x}  {hexes:<47}  |{ascii_}|")
    return "\n".join(lines)


def pretty_json(data: bytes) -> str | None:
    """The body re-indented when it is a JSON object or array, else None."""
    if data.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True)


def preview(body: bytes) -> BodyPreview:
    """The previews of one message body."""
    head = body[:TEXT_LIMIT]
    return BodyPreview(
        size=len(body),
        text=head.decode("utf-8", "replace"),
        text_truncated=len(body) > TEXT_LIMIT,
        json=pretty_json(body) if len(body) <= TEXT_LIMIT else None,
        hex=hex_dump(body[:HEX_LIMIT]),
        hex_truncated=len(body) > HEX_LIMIT,
    )
