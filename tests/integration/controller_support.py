"""Shared pieces of the controller-mode tests: an etcd fixture, broker groups, role waits, epoch logs."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketpy import Admin
from tests.conftest import DaemonPool
from tests.daemons import Daemon
from tests.etcd import EtcdCluster, etcd_unavailable
from tests.integration.test_ha import HA_FAST
from tests.waiting import wait_until_async

#: Short timers: a 3 s lease (fence 2.4 s after the last renewal), fast HA and registration.
CONTROLLER_FAST: dict[str, Any] = {
    **HA_FAST,
    "enableControllerMode": True,
    "controllerLeaseTtlSeconds": 3,
    "brokerRole": "SYNC_MASTER",
    "syncFlushTimeout": 3000,
    "haHousekeepingInterval": 3000,
    "haMaxTimeSlaveNotCatchup": 3000,
}


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdCluster]:
    """A one-member etcd for this test (skipped, with the reason, where etcd cannot run)."""
    reason = etcd_unavailable()
    if reason:
        pytest.skip(reason)
    cluster = EtcdCluster.start(tmp_path / "etcd", 1)
    try:
        yield cluster
    finally:
        cluster.stop()


def start_replica(
    daemons: DaemonPool, ns: str, etcd: EtcdCluster, name: str = "broker-a", **props: Any
) -> Daemon:
    """A broker of group ``name`` in controller mode."""
    return daemons.broker(ns, brokerName=name, etcdEndpoints=etcd.endpoints, **{**CONTROLLER_FAST, **props})


async def role_of(admin: Admin, daemon: Daemon) -> dict[str, str]:
    """The controller fields of the broker's runtime info ({} when it does not answer)."""
    if daemon.returncode is not None:
        return {}
    try:
        return await admin.broker_runtime_info(daemon.addr)
    except Exception:  # a stopped or unreachable broker has no role
        return {}


async def wait_master(admin: Admin, candidates: list[Daemon], limit_s: float = 30.0) -> Daemon:
    """The candidate that reports itself master (waits for one)."""

    async def find() -> Daemon | None:
        for d in candidates:
            if (await role_of(admin, d)).get("controllerRole") == "MASTER":
                info = await admin.cluster_info()  # and the NameServer routes to it as brokerId 0
                if any(bd.broker_addrs.get(0) == d.addr for bd in info.broker_addr_table.values()):
                    return d
        return None

    found = await wait_until_async(find, limit_s, message="a master among the candidates")
    assert isinstance(found, Daemon)
    return found


async def wait_sync_state_set(admin: Admin, master: Daemon, size: int, limit_s: float = 30.0) -> list[int]:
    """The master's SyncStateSet once it has ``size`` members."""

    async def members() -> list[int] | None:
        text = (await role_of(admin, master)).get("syncStateSet", "")
        ids = [int(x) for x in text.split(",") if x]
        return ids if len(ids) >= size else None

    found = await wait_until_async(members, limit_s, message=f"a SyncStateSet of {size}")
    assert isinstance(found, list)
    return found


_EPOCH = re.compile(
    r"EPOCH-(BEGIN|END) name=(\S+) id=(\d+) epoch=(\d+) at_ms=(\d+)(?: start=\d+)?(?: last_ack_ms=(\d+))?"
)


@dataclass
class Tenure:
    """One broker's time as master of one epoch, from its own log."""

    name: str
    broker_id: int
    epoch: int
    begin_ms: int
    end_ms: int | None  # last acknowledgement (None: still master, or killed without a word)
    source: str


def tenures(logs: list[Path]) -> list[Tenure]:
    """Every EPOCH-BEGIN/END pair in the brokers' logs."""
    out: list[Tenure] = []
    for path in logs:
        open_: dict[int, Tenure] = {}
        for line in path.read_text(errors="replace").splitlines():
            m = _EPOCH.search(line)
            if not m:
                continue
            kind, name, bid, epoch, at_ms, last = m.groups()
            if kind == "BEGIN":
                t = Tenure(name, int(bid), int(epoch), int(at_ms), None, str(path))
                open_[int(epoch)] = t
                out.append(t)
            elif int(epoch) in open_:
                open_[int(epoch)].end_ms = int(last) if last and int(last) else int(at_ms)
    return out


def check_no_overlap(ts: list[Tenure], killed_at_ms: dict[str, int] | None = None) -> None:
    """No two masters of one group acknowledged in overlapping times; each epoch has one master."""
    killed = killed_at_ms or {}
    by_epoch: dict[tuple[str, int], Tenure] = {}
    for t in ts:
        key = (t.name, t.epoch)
        assert key not in by_epoch, f"two masters claim epoch {t.epoch}: {by_epoch[key]} and {t}"
        by_epoch[key] = t
    for name in {t.name for t in ts}:
        group = sorted((t for t in ts if t.name == name), key=lambda t: t.epoch)
        for a, b in itertools.pairwise(group):
            end = a.end_ms if a.end_ms is not None else killed.get(a.source, int(time.time() * 1000))
            assert end <= b.begin_ms, (
                f"epoch {a.epoch} acknowledged until {end}, epoch {b.epoch} began {b.begin_ms}"
            )


def broker_log(daemon: Daemon) -> Path:
    """The broker's log file."""
    return daemon.workdir / "logs" / "broker.log"


class Load:
    """Senders with unique ids; every acknowledgement (SEND_OK) is kept with when and where it landed."""

    def __init__(self, producer: Any, topic: str, senders: int = 4, pause_s: float = 0.0) -> None:
        self.producer, self.topic, self.senders, self.pause_s = producer, topic, senders, pause_s
        self.acked: dict[bytes, Any] = {}
        self.ack_times: list[tuple[float, str]] = []  # (monotonic time, broker address)
        self.failures = 0
        self.errors: list[str] = []  # the last few failures, for a test's message
        self.seq = 0
        self.running = True
        self._tasks: list[asyncio.Task[None]] = []

    async def _sender(self) -> None:
        from rocketpy import Message, SendStatus

        while self.running:
            self.seq += 1
            body = b"id-%09d" % self.seq
            try:
                r = await self.producer.send(Message(self.topic, body, keys=[body.decode()]))
            except Exception as e:  # not acknowledged, so not owed
                self.failures += 1
                self.errors = [*self.errors[-9:], f"{time.monotonic():.2f} {e}"]
                await asyncio.sleep(0.02)
                continue
            if r.status is SendStatus.SEND_OK:
                self.acked[body] = r
                self.ack_times.append((time.monotonic(), r.offset_msg_id))
            if self.pause_s:
                await asyncio.sleep(self.pause_s)

    def start(self) -> None:
        self._tasks = [asyncio.ensure_future(self._sender()) for _ in range(self.senders)]

    async def stop(self) -> None:
        self.running = False
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def acked_since(self, t: float, not_addr: str = "") -> int:
        """Acknowledgements after ``t`` (by a broker other than ``not_addr``, when given)."""
        return sum(
            1 for at, mid in self.ack_times if at >= t and (not not_addr or store_addr(mid) != not_addr)
        )

    async def first_ack_after(self, t: float, limit_s: float = 30.0, not_addr: str = "") -> float:
        """Seconds from ``t`` to the first acknowledgement after it (by another broker than
        ``not_addr``: the new master, not an answer of the old one still on its way)."""
        await wait_until_async(
            lambda: self.acked_since(t, not_addr) > 0, limit_s, message="an acknowledgement"
        )
        return min(at for at, mid in self.ack_times if at >= t and store_addr(mid) != not_addr) - t


def store_addr(offset_msg_id: str) -> str:
    """``ip:port`` of the broker that stored a message (from its offset msg id)."""
    from rocketpy.msgid import decode_offset_msg_id

    ip, port, _ = decode_offset_msg_id(offset_msg_id)
    return f"{ip}:{port}"


def check_all_acked_in_log(load: Load, log: bytes) -> None:
    """Every acknowledged id is in ``log`` at the offset its acknowledgement named, byte for byte."""
    from rocketpy.msgid import decode_offset_msg_id
    from rocketpy.record import decode_record

    missing = []
    for body, r in load.acked.items():
        _, _, off = decode_offset_msg_id(r.offset_msg_id)
        try:
            stored = decode_record(log, off)
        except Exception:
            missing.append((body, off))
            continue
        if stored.body != body:
            missing.append((body, off))
    assert not missing, f"{len(missing)} acknowledged messages missing, e.g. {missing[:3]}"
