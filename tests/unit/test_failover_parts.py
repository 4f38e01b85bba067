"""Controller mode's pure parts: the fence deadline, the SyncStateSet rules, the key records, config."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rocketpy.broker.failover.etcd import EtcdUnavailable, KeyValue, prefix_end
from rocketpy.broker.failover.keys import GroupKeys, MasterRecord, SyncStateSet, encode, parse_group
from rocketpy.broker.failover.lease import Lease, fence_margin_s
from rocketpy.broker.failover.sync_state import JOIN_GAP_BYTES, InSyncReplicas
from rocketpy.config import ConfigError, load_broker_config


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeEtcd:
    """Grants and renews leases; a renewal takes ``delay`` fake seconds and may fail or report 0."""

    request_timeout_s = 1.0

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.delay = 0.0
        self.down = False
        self.ttl = 5

    async def grant(self, ttl_s: int) -> tuple[int, int]:
        return 7, ttl_s

    async def keepalive(self, lease_id: int) -> int:
        self.clock.now += self.delay
        if self.down:
            raise EtcdUnavailable("down")
        return self.ttl


async def test_fence_deadline_counts_from_when_the_renewal_was_sent() -> None:
    clock = FakeClock()
    etcd = FakeEtcd(clock)
    lease = Lease(etcd, 5, clock)  # type: ignore[arg-type]
    await lease.grant()
    assert lease.deadline == 1000.0 + 5 - fence_margin_s(5) and lease.valid()
    clock.now += 2.0
    etcd.delay = 0.8  # the answer comes late: the deadline counts from the send, not the answer
    assert await lease.renew()
    assert lease.deadline == pytest.approx(1002.0 + 5 - 1.0)
    etcd.down = True
    clock.now += 1.0
    assert not await lease.renew()
    assert lease.valid()  # the last renewal still holds for a while ...
    clock.now = lease.deadline
    assert not lease.valid()  # ... and not a moment past the deadline, whatever etcd says later
    etcd.down, etcd.ttl = False, 0  # etcd no longer knows the lease
    assert not await lease.renew() and lease.lost.is_set() and not lease.valid()


def test_margin_is_a_fifth_of_the_ttl_at_least_half_a_second() -> None:
    assert fence_margin_s(10) == 2.0 and fence_margin_s(2) == 0.5


def _isr(all_ack: bool = True) -> tuple[InSyncReplicas, FakeClock]:
    clock = FakeClock()
    return InSyncReplicas(1, all_ack, max_gap_bytes=10_000, max_not_caught_up_s=3.0, clock=clock), clock


async def test_sync_acks_wait_for_every_member() -> None:
    isr, _ = _isr()
    isr.reset({1, 2, 3}, 0)
    isr.on_report(2, 500, 500)
    waiter = isr.future(500, 500, 5.0)
    await asyncio.sleep(0)
    assert not waiter.done()  # member 3 has not reported it
    isr.on_report(3, 500, 500)
    assert await waiter and isr.confirm_offset == 500


async def test_a_shrunk_set_releases_waits_and_a_joiner_waits_before_it_counts() -> None:
    isr, clock = _isr()
    isr.reset({1, 2}, 0)
    isr.on_report(2, 100, 100)
    isr.on_disconnect(2)
    assert isr.plan(300) == {1}  # disconnected: out
    waiter = isr.future(300, 300, 5.0)
    await asyncio.sleep(0)
    isr.apply({1}, 300)  # after etcd took the smaller set
    assert await waiter
    # replica 3 close to the end joins: acknowledgements wait for it, then it becomes a member
    isr.on_report(3, 300 - JOIN_GAP_BYTES // 2, 300)
    assert isr.plan(300) == {1} and 3 in isr.joining
    late = isr.future(400, 400, 5.0)
    await asyncio.sleep(0)
    assert not late.done()
    isr.on_report(3, 400, 400)
    assert await late
    assert isr.plan(400) == {1, 3}
    clock.now += 10.0  # not caught up for longer than haMaxTimeSlaveNotCatchup
    isr.apply({1, 3}, 400)
    assert isr.plan(900) == {1}


async def test_async_semantics_never_wait() -> None:
    isr, _ = _isr(all_ack=False)
    isr.reset({1, 2}, 0)
    assert await isr.future(10**9, 0, 0.01)
    isr.on_report(2, 5000, 5000)
    assert isr.plan(6000) == {1, 2}
    assert isr.plan(6000 + 20_000) == {1}  # past haMaxGapNotInSync


async def test_end_waits_answers_every_waiter() -> None:
    isr, _ = _isr()
    isr.reset({1, 2}, 0)
    waiter = isr.future(10, 10, 5.0)
    await asyncio.sleep(0)
    isr.end_waits()
    assert await waiter  # the ack gate then refuses it


def test_group_state_parses_every_record_and_skips_garbage() -> None:
    keys = GroupKeys("/rp", "C", "broker-a")
    kvs = [
        KeyValue(keys.master, MasterRecord(3, 2, "h:1", "h:2").stored(), 5, 9, 1, 77),
        KeyValue(keys.epoch, b'{"epoch":3,"brokerId":2,"startOffset":10}', 1, 9, 3, 0),
        KeyValue(keys.sync_state_set, encode(SyncStateSet(3, [2, 1], 4)), 1, 10, 4, 0),
        KeyValue(keys.alive(1), b'{"addr":"h:3","haAddr":"h:4","maxOffset":10,"epoch":3}', 2, 2, 1, 88),
        KeyValue(keys.alive(9), b"not json", 2, 2, 1, 88),
    ]
    state = parse_group(keys, kvs, 11)
    assert state.master is not None and (state.master.epoch, state.master.lease) == (3, 77)
    assert state.current_epoch == 3 and state.epoch_revision == 9
    assert state.sync_state_set is not None and state.sync_state_set.members == [1, 2]
    assert list(state.alive) == [1] and state.in_sync(1) and not state.in_sync(5)
    assert prefix_end("/a/") == b"/a0"


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "b.properties"
    path.write_text(text)
    try:
        load_broker_config(str(path), {})
    except ConfigError as e:
        return str(e).replace(str(path), "FILE")
    return ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("enableControllerMode=true\n", "enableControllerMode=true needs etcdEndpoints"),
        ("enableControllerMode=true\netcdEndpoints=h:0\n", "etcdEndpoints"),
        (
            "enableControllerMode=true\netcdEndpoints=h:2379\nbrokerRole=SLAVE\nbrokerId=1\n",
            "assigns broker ids",
        ),
        ("enableControllerMode=true\netcdEndpoints=h:2379\nhaMasterAddress=h:1\n", "haMasterAddress cannot"),
        ("enableControllerMode=true\netcdEndpoints=h:2379\ncontrollerLeaseTtlSeconds=1\n", "out of range"),
        ("enableControllerMode=true\netcdEndpoints=h:2379,h2:2379\ncontrollerType=etcd\n", ""),
    ],
)
def test_controller_mode_config_errors_say_what_to_do(tmp_path: Path, text: str, expected: Any) -> None:
    message = _config(tmp_path, text)
    assert expected in message if expected else message == ""
