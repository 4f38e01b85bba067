"""Reading a message's properties string (``k\\x01v\\x02`` pairs) without decoding it.

Owns the one single-key scanner (``get_property``) and the screens the send paths run on every
message: ``may_be_timed`` (a ``DELAY`` or ``TIMER_*`` property may ask for a later delivery),
``is_half_message`` (``TRAN_MSG=true``) and ``may_be_timed_or_half`` (either: the message cannot
travel as a plain member of a batch). The broker's send processor, its store (dispatch, index,
TAGS hash) and the producer's coalescing all read properties through here. A screen is cheap and
may say True for a message that turns out plain (a user property named ``DELAY_X``); it never says
False for a timed or half one. This module imports nothing from the rest of the package.
"""

from __future__ import annotations

#: ``name + "\x01"`` of the properties the broker reads by name (``get_property``'s ``name_sep``).
TAGS_SEP = "TAGS\x01"
KEYS_SEP = "KEYS\x01"
UNIQ_SEP = "UNIQ_KEY\x01"
DELAY_SEP = "DELAY\x01"
REAL_TOPIC_SEP = "REAL_TOPIC\x01"
#: What marks a send as a half message: its properties hold ``TRAN_MSG=true``.
TRAN_MARK = "TRAN_MSG\x01true"


def get_property(props: str, name_sep: str) -> str | None:
    """The value of the property whose ``name + "\\x01"`` is ``name_sep``, or None.

    Only a match at the start of a pair counts (``NOT_UNIQ_KEY`` is not ``UNIQ_KEY``); the first
    such pair wins.
    """
    i = props.find(name_sep)
    while i > 0 and props[i - 1] != "\x02":
        i = props.find(name_sep, i + 1)
    if i < 0:
        return None
    start = i + len(name_sep)
    j = props.find("\x02", start)
    return props[start:] if j < 0 else props[start:j]


def may_be_timed(props: str) -> bool:
    """False when the message certainly asks for no later delivery (no ``DELAY`` / ``TIMER_``)."""
    return "DELAY" in props or "TIMER_" in props


def is_half_message(props: str) -> bool:
    """True when a send's properties ask for a transaction (``TRAN_MSG=true``)."""
    return TRAN_MARK in props


def may_be_timed_or_half(props: str) -> bool:
    """False when the message is certainly neither timed nor half: it may be stored as a plain
    member of a batch (the producer's coalescing, the broker's batch screen)."""
    return "DELAY" in props or "TIMER_" in props or TRAN_MARK in props
