"""The enum-valued fields of a heartbeat's ConsumerData, by name or by ordinal.

Java's clients write ``consumeType``, ``messageModel`` and ``consumeFromWhere`` as enum names
(``"CLUSTERING"``); RocketMQ's C++ client writes their ordinals (``1``). ``setting_name`` turns
either into the name, the one form the broker keeps. The ordinal tables are RocketMQ's enum
declaration orders (``ConsumeType``, ``MessageModel``, ``ConsumeFromWhere``).
"""

from __future__ import annotations

from typing import Any

#: ConsumerData field -> its enum's names in ordinal order.
SETTING_ORDINALS: dict[str, tuple[str, ...]] = {
    "consumeType": ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP"),
    "messageModel": ("BROADCASTING", "CLUSTERING"),
    "consumeFromWhere": (
        "CONSUME_FROM_LAST_OFFSET",
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        "CONSUME_FROM_MIN_OFFSET",
        "CONSUME_FROM_MAX_OFFSET",
        "CONSUME_FROM_FIRST_OFFSET",
        "CONSUME_FROM_TIMESTAMP",
    ),
}


def setting_name(field: str, value: Any) -> str:
    """The enum name of a ConsumerData setting sent as a name or an ordinal.

    Raises:
        ValueError: an ordinal outside the enum, or a value that is neither a string nor an int.
    """
    if type(value) is str:
        if value.isdigit():
            value = int(value)
        else:
            return value
    if type(value) is int:
        names = SETTING_ORDINALS.get(field, ())
        if 0 <= value < len(names):
            return names[value]
        raise ValueError(f"ConsumerData '{field}' ordinal {value} is not one of 0..{len(names) - 1}")
    raise ValueError(f"ConsumerData '{field}' must be an enum name or ordinal, got {type(value).__name__}")
