"""RocketMQ's named broker stats (VIEW_BROKER_STATS_DATA) over a minute, an hour and a day.

Owns three rings of snapshots of ``BrokerStats``' counter tables, as RocketMQ's ``StatsItem``
keeps per item: a snapshot every 10 s (the minute ring, 7 kept), every 10 min (the hour ring, 7
kept) and every hour (the day ring, 25 kept). A figure is the difference between the live counter
and the oldest snapshot of its ring: ``sum``, ``tps`` (sum per second over that span) and
``avgpt`` (sum per request). RocketMQ takes the difference up to its newest snapshot; this takes
it up to now, so a figure is never older than the call.

A snapshot is one flat ``array('q')`` per table (``[messages, bytes, requests]`` per key, in the
table's insertion order: keys are only ever added, so a key's position never changes and a key
newer than a snapshot counted 0 then). Taking one copies the tables once (``maybe_roll``, from the
broker's one-second stats timer); a ring that rolls reuses the snapshot another ring just took.
Memory: at most 39 snapshots of ``3 * 8`` bytes per key.
"""

from __future__ import annotations

import itertools
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketpy.broker.stats import BrokerStats

#: ring name -> (seconds between snapshots, snapshots kept): RocketMQ's StatsItem sampling
RINGS: dict[str, tuple[float, int]] = {"minute": (10.0, 7), "hour": (600.0, 7), "day": (3600.0, 25)}

#: stats name -> (table, counter column): ``puts`` is keyed by topic, ``gets`` by ``topic@group``
#: (RocketMQ's statsKey), ``totals`` by the broker's cluster name
STATS_NAMES: dict[str, tuple[str, int]] = {
    "TOPIC_PUT_NUMS": ("puts", 0),
    "TOPIC_PUT_SIZE": ("puts", 1),
    "GROUP_GET_NUMS": ("gets", 0),
    "GROUP_GET_SIZE": ("gets", 1),
    "BROKER_PUT_NUMS": ("totals", 0),
    "BROKER_GET_NUMS": ("totals", 2),
}
_REQUESTS = 2  # the column of a table's request counts


@dataclass(frozen=True, slots=True)
class _Snapshot:
    ts: float
    puts: array[int]
    gets: array[int]
    #: put messages, put requests, got messages, pulls
    totals: tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class StatsFigure:
    """One ring's figure of a stats item (RocketMQ's BrokerStatsItem)."""

    sum: int
    tps: float
    avgpt: float

    def to_wire(self) -> dict[str, Any]:
        """RocketMQ's field names."""
        return {"sum": self.sum, "tps": self.tps, "avgpt": self.avgpt}


class StatsWindows:
    """Minute, hour and day figures of ``BrokerStats``' counters.

    Args:
        stats: the counters.
        clock: seconds clock (the one ``stats`` uses).
    """

    def __init__(self, stats: BrokerStats, clock: Callable[[], float]) -> None:
        self._stats = stats
        self._clock = clock
        first = self._take(clock())
        self.rings = {name: deque([first], maxlen=slots) for name, (_, slots) in RINGS.items()}
        #: key -> its position in its table (grown as keys are added)
        self._positions: dict[str, dict[Any, int]] = {"puts": {}, "gets": {}}

    def maybe_roll(self) -> None:
        """Take a snapshot for every ring whose step has passed (call about once a second)."""
        now = self._clock()
        due = [n for n, (step, _) in RINGS.items() if now - self.rings[n][-1].ts >= step - 0.5]
        if due:
            snap = self._take(now)
            for name in due:
                self.rings[name].append(snap)

    def _take(self, now: float) -> _Snapshot:
        s = self._stats
        puts = array("q", itertools.chain.from_iterable(s.topic_puts.values()))
        gets = array("q", itertools.chain.from_iterable(s.group_topic_gets.values()))
        totals = (s.put_msgs_total, s.put_requests_total, s.get_msgs_total, s.get_requests_total)
        return _Snapshot(now, puts, gets, totals)

    def view(self, stats_name: str, stats_key: str) -> dict[str, StatsFigure] | None:
        """``{"minute", "hour", "day"}`` figures of one item (None: no such item yet).

        ``stats_key``: a topic (``TOPIC_*``), ``topic@group`` (``GROUP_*``); the ``BROKER_*``
        items are the broker's totals (the caller checks the key names its cluster).

        Raises:
            KeyError: ``stats_name`` is not one of ``STATS_NAMES``.
        """
        table, col = STATS_NAMES[stats_name]
        if table == "totals":
            t = self._totals()
            return self._figures(lambda snap: (snap.totals[col], snap.totals[col + 1]), (t[col], t[col + 1]))
        key: Any = stats_key
        counters = self._stats.topic_puts if table == "puts" else self._stats.group_topic_gets
        if table == "gets":
            topic, sep, group = stats_key.partition("@")
            if not sep:
                return None
            key = (group, topic)
        live = counters.get(key)
        if live is None:
            return None
        at = 3 * self._position(table, counters, key)

        def old(snap: _Snapshot) -> tuple[int, int]:
            flat = snap.puts if table == "puts" else snap.gets
            return (flat[at + col], flat[at + _REQUESTS]) if at < len(flat) else (0, 0)

        return self._figures(old, (live[col], live[_REQUESTS]))

    def _totals(self) -> tuple[int, int, int, int]:
        s = self._stats
        return (s.put_msgs_total, s.put_requests_total, s.get_msgs_total, s.get_requests_total)

    def _position(self, table: str, counters: dict[Any, list[int]], key: Any) -> int:
        positions = self._positions[table]
        if key not in positions:
            start = len(positions)
            positions.update(zip(itertools.islice(counters, start, None), itertools.count(start)))
        return positions[key]

    def _figures(
        self, old: Callable[[_Snapshot], tuple[int, int]], live: tuple[int, int]
    ) -> dict[str, StatsFigure]:
        now = self._clock()
        out = {}
        for name, ring in self.rings.items():
            first = ring[0]
            value, times = old(first)
            total = live[0] - value
            elapsed = now - first.ts
            tps = total / elapsed if elapsed > 0 else 0.0
            calls = live[1] - times
            out[name] = StatsFigure(total, tps, total / calls if calls > 0 else 0.0)
        return out
