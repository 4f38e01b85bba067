"""Which member of a broker set a queue is pulled from (RocketMQ's ``pullFromWhichNodeTable``).

Owns the per-queue broker id the last pull answer suggested (``suggestWhichBrokerId``: the master
says 1 when the consumer reads far behind and ``slaveReadEnable`` is on) and the choice of address:
the suggested member when the route lists it, else the master, else any member (a slave serves
pulls, offsets and admin reads while its master is down). Bounded by the queues a client pulls.
"""

from __future__ import annotations

from rocketpy.message import MessageQueue
from rocketpy.route import MASTER_ID

#: Queues remembered at most (a client pulls far fewer; beyond this, suggestions are dropped).
MAX_QUEUES = 65_536


class PullNodeTable:
    """Suggested broker id per message queue."""

    def __init__(self) -> None:
        self._suggested: dict[MessageQueue, int] = {}

    def suggest(self, mq: MessageQueue, broker_id: int) -> None:
        """Remember a pull answer's ``suggestWhichBrokerId`` for ``mq``."""
        if broker_id == MASTER_ID:
            self._suggested.pop(mq, None)
        elif len(self._suggested) < MAX_QUEUES or mq in self._suggested:
            self._suggested[mq] = broker_id

    def choose(self, mq: MessageQueue, members: dict[int, str]) -> str | None:
        """The address to pull ``mq`` from among ``members`` (broker id -> address)."""
        if not members:
            return None
        wanted = self._suggested.get(mq, MASTER_ID)
        return members.get(wanted) or members.get(MASTER_ID) or members[min(members)]

    @staticmethod
    def fallback(members: dict[int, str], failed: str) -> str | None:
        """Another member than ``failed`` (a slave when the master did not answer), or None."""
        others = [addr for _, addr in sorted(members.items()) if addr != failed]
        return others[0] if others else None
