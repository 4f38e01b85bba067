"""Sys-flag bits of pull requests (RocketMQ's ``PullSysFlag``), shared by client and broker.

The consumer sets them in PULL_MESSAGE's ``sysFlag``; the broker reads them. Message sys flags
(compression, transaction state) are record fields and live with the record layout
(``rocketpy/record.py``). The module-level ints are for per-request tests (see ``rocketpy/perm.py``).
"""

from __future__ import annotations

from enum import IntFlag


class PullSysFlag(IntFlag):
    """RocketMQ's pull flags (``PullSysFlag.java``)."""

    #: The request carries the queue's consumed offset in ``commitOffset``; the broker stores it.
    COMMIT_OFFSET = 0x1
    #: The broker may hold the pull until a message arrives (long polling).
    SUSPEND = 0x2
    #: The request carries its subscription expression (else the broker uses the heartbeat's).
    SUBSCRIPTION = 0x4
    #: Class filter mode (a filter server); not used by rocketpy, reserved on the wire.
    CLASS_FILTER = 0x8
    #: A LitePullConsumer's pull.
    LITE_PULL = 0x10


FLAG_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
FLAG_SUSPEND = int(PullSysFlag.SUSPEND)
FLAG_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)
FLAG_CLASS_FILTER = int(PullSysFlag.CLASS_FILTER)
FLAG_LITE_PULL = int(PullSysFlag.LITE_PULL)


def build_pull_sys_flag(commit_offset: bool, suspend: bool, subscription: bool) -> int:
    """The ``sysFlag`` of a pull (RocketMQ's ``PullSysFlag.buildSysFlag`` without class filter)."""
    flag = 0
    if commit_offset:
        flag |= FLAG_COMMIT_OFFSET
    if suspend:
        flag |= FLAG_SUSPEND
    if subscription:
        flag |= FLAG_SUBSCRIPTION
    return flag
