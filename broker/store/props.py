"""Reading TAGS / KEYS / UNIQ_KEY / DELAY out of a RocketMQ properties string (``k\\x01v\\x02``
pairs) without building a dict: the put path needs one or two values of a few names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.filter.tags import java_string_hash

TAGS_SEP = "TAGS\x01"
KEYS_SEP = "KEYS\x01"
UNIQ_SEP = "UNIQ_KEY\x01"
DELAY_SEP = "DELAY\x01"


def get_property(props: str, name_sep: str) -> str | None:
    """The value of the property whose ``name + "\\x01"`` is ``name_sep``, or None."""
    i = props.find(name_sep)
    while i > 0 and props[i - 1] != "\x02":
        i = props.find(name_sep, i + 1)
    if i < 0:
        return None
    start = i + len(name_sep)
    j = props.find("\x02", start)
    return props[start:] if j < 0 else props[start:j]


@twin
def tags_hash(props: str) -> int:
    """Java ``hashCode`` of the TAGS value, 0 without one: the consume-queue tag code of an ordinary
    record (compiled twin in ``_speedups``)."""
    tags = get_property(props, TAGS_SEP)
    return java_string_hash(tags) if tags else 0


def index_keys(props: str) -> list[str]:
    """The keys to index: each KEYS word and the UNIQ_KEY."""
    out: list[str] = []
    if KEYS_SEP in props:
        keys = get_property(props, KEYS_SEP)
        if keys:
            out.extend(k for k in keys.split(" ") if k)
    if UNIQ_SEP in props:
        uniq = get_property(props, UNIQ_SEP)
        if uniq:
            out.append(uniq)
    return out


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.store import _speedups

    same_signature(tags_hash)(_speedups.tags_hash)
    same_signature(_speedups.tags_hash)(tags_hash)
