"""What the put path derives from a record's properties: the TAGS hash code of its consume-queue
unit and the keys of its index entries, read with ``rocketpy.message_props.get_property`` (the one
single-key scanner) without building a dict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.filter.tags import java_string_hash
from rocketpy.message_props import KEYS_SEP, TAGS_SEP, UNIQ_SEP, get_property


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
