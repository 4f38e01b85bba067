"""The master's SyncStateSet: who must have a message before it is acknowledged, and who may join.

Owns, for the epoch this broker is master of:

- ``members``: the SyncStateSet as written in etcd (this broker included). With SYNC semantics
  (``allAckInSyncStateSet``, or brokerRole=SYNC_MASTER) a message is acknowledged only once every
  member reported its end offset (RocketMQ's ``allAckInSyncStateSet``), so every member holds every
  acknowledged message and any of them may win the next election without loss;
- ``joining``: replicas close enough to join (within ``JOIN_GAP_BYTES``): acknowledgements already
  wait for them, and they become members once they hold everything acknowledged so far
  (``confirm_offset``). A joiner that does not get there within ``haMaxTimeSlaveNotCatchup`` is
  dropped again. Waiting for joiners first is what lets a replica join under continuous load;
- the acknowledgement waits (``OffsetWaits``: futures by end offset, released as reports arrive).

Rules (``plan``): a member leaves when its HA session ends, when it falls more than
``haMaxGapNotInSync`` behind, or when it has not caught up for ``haMaxTimeSlaveNotCatchup``. The
caller writes a smaller set to etcd *before* it applies it (acks must not outrun etcd), and applies
a larger one before writing it (waiting for more replicas is always safe). With ASYNC semantics
nothing waits, and members are the replicas within ``haMaxGapNotInSync`` that caught up recently:
the set then only says who may be elected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rocketpy.broker.ha.offset_waits import OffsetWaits
from rocketpy.waits import answered

#: A replica this close to the master's end joins (acknowledgements start waiting for it).
JOIN_GAP_BYTES = 1 << 20


class InSyncReplicas:
    """One master's SyncStateSet and acknowledgement waits.

    Args:
        me: this broker's id.
        all_ack: SYNC semantics (acknowledge once every member has the message).
        max_gap_bytes: ``haMaxGapNotInSync``.
        max_not_caught_up_s: ``haMaxTimeSlaveNotCatchup`` in seconds.
        clock: seconds.
    """

    def __init__(
        self,
        me: int,
        all_ack: bool,
        max_gap_bytes: int,
        max_not_caught_up_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.me = me
        self.all_ack = all_ack
        self.max_gap_bytes = max_gap_bytes
        self.max_not_caught_up_s = max_not_caught_up_s
        self.clock = clock
        self.members: set[int] = {me}
        self.joining: dict[int, float] = {}  # id -> when it began to join
        self._others: tuple[int, ...] | None = None  # members and joiners but me (None: recompute)
        self.acked: dict[int, int] = {}
        self.connected: set[int] = set()
        self.caught_up_at: dict[int, float] = {}
        self._master_max_at_report: dict[int, int] = {}
        self.confirm_offset = 0
        self.waits = OffsetWaits()

    def reset(self, members: set[int], confirm_offset: int) -> None:
        """A new epoch: ``members`` as elected, everything up to ``confirm_offset`` settled."""
        self.members = set(members) | {self.me}
        self.joining.clear()
        self._others = None
        self.confirm_offset = confirm_offset
        self.release(confirm_offset)

    # -- reports ----------------------------------------------------------------------------------
    def on_report(self, broker_id: int, acked: int, master_max: int) -> None:
        """A replica reported ``acked``; ``master_max`` is this log's end now."""
        now = self.clock()
        self.connected.add(broker_id)
        self.acked[broker_id] = acked
        if acked >= self._master_max_at_report.get(broker_id, 0):
            self.caught_up_at[broker_id] = now
        self._master_max_at_report[broker_id] = master_max
        self.release(master_max)

    def on_disconnect(self, broker_id: int) -> None:
        """A replica's HA session ended."""
        self.connected.discard(broker_id)

    # -- acknowledgements -------------------------------------------------------------------------
    def ack_point(self, master_max: int) -> int:
        """The offset every member and joiner holds (``master_max`` when nobody else counts)."""
        if not self.all_ack:
            return master_max
        others = self._others
        if others is None:  # recomputed after each change of members or joiners
            others = self._others = tuple(sorted((self.members | set(self.joining)) - {self.me}))
        if len(others) == 1:
            return self.acked.get(others[0], 0)
        return min((self.acked.get(m, 0) for m in others), default=master_max)

    def release(self, master_max: int) -> None:
        """Complete the waits the ack point now covers."""
        released = self.waits.release(self.ack_point(master_max))
        if released > self.confirm_offset:
            self.confirm_offset = released

    def future(self, end: int, master_max: int, timeout_s: float) -> asyncio.Future[bool]:
        """A future: True once every member and joiner holds ``end``, False after ``timeout_s``."""
        if not self.all_ack or self.ack_point(master_max) >= end:
            if end > self.confirm_offset:
                self.confirm_offset = end
            return answered(True)
        return self.waits.future(end, timeout_s)

    # -- membership -------------------------------------------------------------------------------
    def _keeps(self, broker_id: int, master_max: int, now: float) -> bool:
        return (
            broker_id in self.connected
            and master_max - self.acked.get(broker_id, 0) <= self.max_gap_bytes
            and now - self.caught_up_at.get(broker_id, 0.0) <= self.max_not_caught_up_s
        )

    def plan(self, master_max: int) -> set[int]:
        """The SyncStateSet the rules want now (also starts and ends joins, a local matter)."""
        now = self.clock()
        want = {m for m in self.members if m == self.me or self._keeps(m, master_max, now)}
        for r in sorted(self.connected - self.members):
            acked = self.acked.get(r, 0)
            if not self.all_ack:
                if self._keeps(r, master_max, now):
                    want.add(r)
                continue
            since = self.joining.get(r)
            if since is None:
                if master_max - acked <= JOIN_GAP_BYTES:
                    self.joining[r] = now  # acknowledgements wait for it from now on
                    self._others = None
            elif acked >= self.confirm_offset:
                want.add(r)
            elif now - since > self.max_not_caught_up_s:
                del self.joining[r]
                self._others = None
        for r in [r for r in self.joining if r not in self.connected]:
            del self.joining[r]
            self._others = None
        self.release(master_max)
        return want

    def apply(self, members: set[int], master_max: int) -> None:
        """Adopt ``members`` (after writing it to etcd when it is smaller)."""
        self.members = set(members) | {self.me}
        for m in self.members:
            self.joining.pop(m, None)
        self._others = None
        self.release(master_max)

    def end_waits(self) -> None:
        """End every wait (the broker is no longer master: the ack gate refuses those sends)."""
        self.waits.end_all()
