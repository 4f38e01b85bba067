"""Permission bits of topics and brokers (RocketMQ's ``PermName``), shared by client and daemons.

A topic's ``perm`` (in TopicConfig, QueueData and REGISTER_BROKER) and a broker's
``brokerPermission`` are these bits. The helpers take plain ints and test against plain ints: an
``int & IntFlag`` would build a new flag object per call, and the send and pull checks run per request.
"""

from __future__ import annotations

from enum import IntFlag


class PermName(IntFlag):
    """RocketMQ's permission bits (``PermName.java``); RW = READ | WRITE = 6."""

    INHERIT = 1
    WRITE = 2
    READ = 4
    PRIORITY = 8


PERM_INHERIT = int(PermName.INHERIT)
PERM_WRITE = int(PermName.WRITE)
PERM_READ = int(PermName.READ)
PERM_PRIORITY = int(PermName.PRIORITY)
#: Read and write: the default of a new topic.
PERM_RW = PERM_READ | PERM_WRITE


def is_readable(perm: int) -> bool:
    """True when ``perm`` carries the read bit."""
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    """True when ``perm`` carries the write bit."""
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    """True when ``perm`` carries the inherit bit (a template topic for auto-creation, e.g. TBW102)."""
    return bool(perm & PERM_INHERIT)


def perm_to_string(perm: int) -> str:
    """``R``/``W``/``X`` or ``-`` per bit, as RocketMQ's ``PermName.perm2String`` (6 -> ``"RW-"``)."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )
