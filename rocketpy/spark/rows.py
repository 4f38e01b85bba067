"""Rows written to the ``rocketpy`` data source -> SDK ``Message``s (the write-side columns).

Owns the write schema check and the row conversion. Columns: ``body`` (binary or string,
required), ``topic`` (string; else option ``topic``), ``tags`` (string), ``keys`` (string or
array of strings), ``properties`` (map of strings), and at most one of ``queue_id`` (int: that
queue id) and ``orderKey`` (string or integer: same key -> same queue, RocketMQ's hash
selector). Other columns are refused by name so a typo cannot drop data silently. A null body,
or no topic from column or option, fails the task with a message naming the row's position.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from rocketpy.message import Message
from rocketpy.spark.options import SparkOptionError

WRITE_COLUMNS = ("body", "topic", "tags", "keys", "properties", "queue_id", "orderKey")
_TYPES = {
    "body": ("binary", "string"),
    "topic": ("string",),
    "tags": ("string",),
    "keys": ("string", "array<string>"),
    "properties": ("map<string,string>",),
    "queue_id": ("int", "bigint", "smallint", "tinyint"),
    "orderKey": ("string", "int", "bigint"),
}


@dataclass(frozen=True)
class WriteLayout:
    """The write columns of a DataFrame, canonically spelled, in its column order."""

    columns: tuple[str, ...]
    body_is_text: bool
    default_topic: str | None

    @property
    def routing(self) -> str | None:
        """``queue_id``, ``orderKey`` or None (round robin)."""
        for name in ("queue_id", "orderKey"):
            if name in self.columns:
                return name
        return None


def check_layout(fields: list[tuple[str, str]], default_topic: str | None) -> WriteLayout:
    """Check ``(name, simpleString type)`` pairs of the DataFrame against the write columns.

    Raises:
        SparkOptionError: a missing body, an unknown or mistyped column, both routings, no topic.
    """
    by_name: dict[str, str] = {}
    for name, dtype in fields:
        canonical = next((c for c in WRITE_COLUMNS if c.lower() == name.lower()), None)
        if canonical is None:
            near = difflib.get_close_matches(name, WRITE_COLUMNS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise SparkOptionError(
                f"column {name!r} cannot be written{hint}: a rocketpy write takes {', '.join(WRITE_COLUMNS)}"
                " (select or rename columns first)"
            )
        if dtype.replace(" ", "") not in _TYPES[canonical]:
            raise SparkOptionError(f"column {name} is {dtype}; it must be {' or '.join(_TYPES[canonical])}")
        by_name[canonical] = dtype
    if "body" not in by_name:
        raise SparkOptionError("a rocketpy write needs a body column (binary or string)")
    if "queue_id" in by_name and "orderKey" in by_name:
        raise SparkOptionError("give queue_id or orderKey, not both")
    if "topic" not in by_name and not default_topic:
        raise SparkOptionError("no topic: add a topic column or .option('topic', ...)")
    return WriteLayout(tuple(by_name), by_name["body"] == "string", default_topic)


def to_message(layout: WriteLayout, row: Any, position: int) -> tuple[Message, Any]:
    """One row as a Message and its routing value (queue id, order key or None)."""
    values = dict(zip(layout.columns, row, strict=True))
    body = values["body"]
    if body is None:
        raise SparkOptionError(f"row {position} of this partition has a null body")
    if isinstance(body, str):
        body = body.encode()
    topic = values.get("topic") or layout.default_topic
    if not topic:
        raise SparkOptionError(f"row {position} of this partition has no topic (column null, no option)")
    msg = Message(
        topic,
        bytes(body),
        tags=values.get("tags") or None,
        keys=values.get("keys") or None,
        properties={str(k): str(v) for k, v in _pairs(values.get("properties"))},
    )
    route = values.get(layout.routing) if layout.routing else None
    return msg, route


def _pairs(properties: Any) -> Any:
    """A map value's ``(key, value)`` pairs: Arrow gives a list of pairs, a ``Row`` a dict."""
    if not properties:
        return ()
    return properties.items() if isinstance(properties, dict) else properties
