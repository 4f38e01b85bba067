"""Validation of the dashboard's form and query fields: each checker returns the typed value or
raises ``FormError`` with one sentence that names the field and says what to enter."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping

from rocketpy.errors import RocketpyError
from rocketpy.perm import PERM_READ, PERM_RW, PERM_WRITE
from rocketpy.record import MAX_TOPIC_BYTES
from rocketpy.topic import TOPIC_NAME_RE

#: Longest key or message id accepted in a search.
MAX_KEY_CHARS = 255
#: The topic permissions a form may choose (write, read, read+write).
PERMS = {PERM_WRITE: "write only", PERM_READ: "read only", PERM_RW: "read + write"}


class FormError(RocketpyError, ValueError):
    """A field a user filled in wrongly; ``str(e)`` is the message to show."""


def text(form: Mapping[str, str], name: str, label: str, *, required: bool = True) -> str:
    """The stripped value of ``name`` ('' when optional and empty)."""
    value = (form.get(name) or "").strip()
    if required and not value:
        raise FormError(f"{label} is required: enter a value")
    if len(value) > MAX_KEY_CHARS:
        raise FormError(f"{label} is longer than {MAX_KEY_CHARS} characters: shorten it")
    return value


def name(form: Mapping[str, str], field: str, label: str) -> str:
    """A topic or group name: letters, digits, '%', '|', '_', '-'; at most 127 bytes."""
    value = text(form, field, label)
    if len(value.encode()) > MAX_TOPIC_BYTES:
        raise FormError(f"{label} is longer than {MAX_TOPIC_BYTES} bytes: use a shorter name")
    if not TOPIC_NAME_RE.match(value):
        raise FormError(f"{label} {value!r} may contain only letters, digits, '%', '|', '_' and '-'")
    return value


def integer(form: Mapping[str, str], field: str, label: str, low: int, high: int) -> int:
    """An integer in ``[low, high]``."""
    raw = text(form, field, label)
    try:
        value = int(raw)
    except ValueError:
        raise FormError(f"{label} must be a whole number, got {raw!r}") from None
    if not low <= value <= high:
        raise FormError(f"{label} must be between {low} and {high}, got {value}")
    return value


def perm(form: Mapping[str, str], field: str = "perm") -> int:
    """A topic permission: 2, 4 or 6."""
    raw = text(form, field, "Permission")
    if not raw.isdigit() or int(raw) not in PERMS:
        raise FormError(f"Permission must be 2 (write), 4 (read) or 6 (read + write), got {raw!r}")
    return int(raw)


def timestamp_ms(form: Mapping[str, str], field: str, label: str) -> int:
    """A point in time: the browser's ``datetime-local`` value (the dashboard's local time) or ms
    since the epoch."""
    raw = text(form, field, label)
    if raw.isdigit():
        return int(raw)
    for fmt in ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            return int(_dt.datetime.strptime(raw, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise FormError(
        f"{label} must be a date and time like 2024-05-01T12:30 or ms since the epoch, got {raw!r}"
    )


def confirm(form: Mapping[str, str], field: str, expected: str, what: str) -> None:
    """The user typed ``expected`` into ``field`` to confirm a destructive action."""
    if (form.get(field) or "").strip() != expected:
        raise FormError(f"to {what}, type its name {expected!r} exactly into the confirmation box")
