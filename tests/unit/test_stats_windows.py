"""RocketMQ's named broker stats (``broker/stats_windows.py``): minute, hour and day figures from
snapshots rolled by the stats timer, on an injected clock."""

from __future__ import annotations

import pytest

from rocketpy.broker.stats import BrokerStats


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def run(self, stats: BrokerStats, seconds: int, step: int = 1) -> None:
        """Advance ``seconds``, with the broker's stats timer every ``step`` seconds (one: the
        broker's)."""
        for _ in range(seconds // step):
            self.now += step
            stats.sample()


def test_minute_hour_and_day_figures() -> None:
    clock = Clock()
    s = BrokerStats(clock)
    clock.run(s, 5)
    s.on_put("A", 10, 1000)  # one request of 10 messages
    s.on_put("A", 20, 2000)
    s.on_get("g", "A", 6, 600)
    view = s.windows.view("TOPIC_PUT_NUMS", "A")
    assert view is not None
    # every ring starts at the boot snapshot (all zero): 30 messages in 5 s, 15 per request
    assert {r: (f.sum, f.tps, f.avgpt) for r, f in view.items()} == {
        r: (30, 6.0, 15.0) for r in ("minute", "hour", "day")
    }
    size = s.windows.view("TOPIC_PUT_SIZE", "A")
    assert size is not None and size["day"].sum == 3000 and size["day"].avgpt == 1500.0
    got = s.windows.view("GROUP_GET_NUMS", "A@g")
    assert got is not None and got["minute"].sum == 6
    assert s.windows.view("GROUP_GET_NUMS", "A@other") is None
    assert s.windows.view("GROUP_GET_NUMS", "no-separator") is None
    assert s.windows.view("TOPIC_PUT_NUMS", "B") is None
    total = s.windows.view("BROKER_PUT_NUMS", "")
    assert total is not None and total["day"].sum == 30

    # 70 s later the minute ring no longer reaches back to the puts; the hour and day do
    clock.run(s, 70)
    s.on_put("A", 1, 1)
    view = s.windows.view("TOPIC_PUT_NUMS", "A")
    assert view is not None
    assert view["minute"].sum == 1 and view["hour"].sum == 31 and view["day"].sum == 31
    assert 0 < view["minute"].tps < 1 / 59

    # two hours later only the day ring still does
    clock.run(s, 2 * 3600, step=5)
    view = s.windows.view("TOPIC_PUT_NUMS", "A")
    assert view is not None and (view["minute"].sum, view["hour"].sum, view["day"].sum) == (0, 0, 31)
    assert view["minute"].tps == 0.0 and view["minute"].avgpt == 0.0
    # a topic first seen after the snapshots counted 0 in them
    s.on_put("C", 4, 4)
    view = s.windows.view("TOPIC_PUT_NUMS", "C")
    assert view is not None and view["minute"].sum == 4 and view["day"].sum == 4


def test_rings_are_bounded_and_share_snapshots() -> None:
    clock = Clock()
    s = BrokerStats(clock)
    clock.run(s, 2 * 86400, step=60)
    assert [len(r) for r in s.windows.rings.values()] == [7, 7, 25]
    minute, hour = s.windows.rings["minute"], s.windows.rings["hour"]
    assert hour[-1] is minute[-1] or hour[-1].ts < minute[-1].ts


def test_unknown_stats_name() -> None:
    with pytest.raises(KeyError):
        BrokerStats().windows.view("NOPE", "A")
