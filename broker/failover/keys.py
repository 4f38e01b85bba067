"""The etcd key layout of controller mode and the JSON records stored under it (pure).

Per broker group, under ``{etcdKeyPrefix}/{cluster}/{brokerName}/``::

    master            {"epoch", "brokerId", "addr", "haAddr"}      bound to the master's lease
    epoch             {"epoch", "brokerId", "startOffset"}          the current master epoch
    syncStateSet      {"epoch", "members": [ids], "version"}       written by that epoch's master
    alive/{id}        {"addr", "haAddr", "maxOffset", "epoch"}      bound to each broker's own lease
    ids/next          {"next": n}                                  the next broker id to hand out
    ids/{id}          {"code": registerCheckCode}                  which store owns broker id ``id``

``master`` exists exactly while a master holds its lease: its deletion (lease expiry, a revoke, a
switchover) is what followers wait for. ``epoch`` and ``syncStateSet`` outlive masters: the next
election reads them, and compares their revisions in its transaction. Broker ids start at 1: 0 is
the master's id in routes, whoever it is.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from rocketpy.broker.failover.etcd import KeyValue

MASTER_ID = 0


class GroupKeys:
    """The keys of one broker group."""

    def __init__(self, prefix: str, cluster: str, broker_name: str) -> None:
        self.root = f"{prefix.rstrip('/')}/{cluster}/{broker_name}/"
        self.master = self.root + "master"
        self.epoch = self.root + "epoch"
        self.sync_state_set = self.root + "syncStateSet"
        self.alive_prefix = self.root + "alive/"
        self.next_id = self.root + "ids/next"

    def alive(self, broker_id: int) -> str:
        """The liveness key of ``broker_id``."""
        return f"{self.alive_prefix}{broker_id}"

    def id_owner(self, broker_id: int) -> str:
        """The key naming the store that owns ``broker_id``."""
        return f"{self.root}ids/{broker_id}"


def encode(record: Any) -> bytes:
    """A record as the JSON bytes stored in etcd."""
    return json.dumps(asdict(record), sort_keys=True, separators=(",", ":")).encode()


def _decode(raw: bytes) -> dict[str, Any]:
    doc = json.loads(raw or b"{}")
    if not isinstance(doc, dict):
        raise ValueError(f"not a JSON object: {raw[:60]!r}")
    return doc


@dataclass(slots=True)
class MasterRecord:
    """The master of an epoch (the ``master`` key's value)."""

    epoch: int
    brokerId: int
    addr: str
    haAddr: str
    lease: int = 0  # the key's lease (from etcd, not stored in the value)
    create_revision: int = 0

    @classmethod
    def from_kv(cls, kv: KeyValue) -> MasterRecord:
        d = _decode(kv.value)
        return cls(
            int(d["epoch"]),
            int(d["brokerId"]),
            str(d["addr"]),
            str(d["haAddr"]),
            kv.lease,
            kv.create_revision,
        )

    def stored(self) -> bytes:
        """The stored value (without the etcd-side fields)."""
        return encode(_Stored(self.epoch, self.brokerId, self.addr, self.haAddr))


@dataclass(slots=True)
class _Stored:
    epoch: int
    brokerId: int
    addr: str
    haAddr: str


@dataclass(slots=True)
class EpochRecord:
    """The current master epoch (the ``epoch`` key's value)."""

    epoch: int
    brokerId: int
    startOffset: int

    @classmethod
    def from_raw(cls, raw: bytes) -> EpochRecord:
        d = _decode(raw)
        return cls(int(d["epoch"]), int(d["brokerId"]), int(d.get("startOffset", 0)))


@dataclass(slots=True)
class SyncStateSet:
    """The in-sync replicas of an epoch (the ``syncStateSet`` key's value)."""

    epoch: int
    members: list[int] = field(default_factory=list)
    version: int = 0

    @classmethod
    def from_raw(cls, raw: bytes) -> SyncStateSet:
        d = _decode(raw)
        return cls(int(d["epoch"]), sorted(int(m) for m in d.get("members") or []), int(d.get("version", 0)))


@dataclass(slots=True)
class AliveRecord:
    """A running broker of the group (its ``alive/{id}`` key's value)."""

    addr: str
    haAddr: str
    maxOffset: int
    epoch: int
    lease: int = 0

    @classmethod
    def from_kv(cls, kv: KeyValue) -> AliveRecord:
        d = _decode(kv.value)
        return cls(
            str(d["addr"]), str(d["haAddr"]), int(d.get("maxOffset", 0)), int(d.get("epoch", 0)), kv.lease
        )

    def stored(self) -> bytes:
        """The stored value."""
        return json.dumps(
            {"addr": self.addr, "haAddr": self.haAddr, "maxOffset": self.maxOffset, "epoch": self.epoch},
            sort_keys=True,
            separators=(",", ":"),
        ).encode()


@dataclass(slots=True)
class GroupState:
    """One read of a group's keys, with the revisions an election's transaction compares."""

    master: MasterRecord | None = None
    epoch: EpochRecord | None = None
    epoch_revision: int = 0
    sync_state_set: SyncStateSet | None = None
    sync_state_set_revision: int = 0
    alive: dict[int, AliveRecord] = field(default_factory=dict)
    revision: int = 0

    @property
    def current_epoch(self) -> int:
        """The group's newest epoch (0: never had a master)."""
        return self.epoch.epoch if self.epoch else 0

    def in_sync(self, broker_id: int) -> bool:
        """``broker_id`` is in the SyncStateSet (a group that never had one: everyone is)."""
        sss = self.sync_state_set
        return sss is None or broker_id in sss.members


def parse_group(keys: GroupKeys, kvs: list[KeyValue], revision: int) -> GroupState:
    """A ``GroupState`` from a prefix range over ``keys.root`` (unreadable records are skipped)."""
    state = GroupState(revision=revision)
    for kv in kvs:
        try:
            if kv.key == keys.master:
                state.master = MasterRecord.from_kv(kv)
            elif kv.key == keys.epoch:
                state.epoch, state.epoch_revision = EpochRecord.from_raw(kv.value), kv.mod_revision
            elif kv.key == keys.sync_state_set:
                state.sync_state_set = SyncStateSet.from_raw(kv.value)
                state.sync_state_set_revision = kv.mod_revision
            elif kv.key.startswith(keys.alive_prefix):
                state.alive[int(kv.key[len(keys.alive_prefix) :])] = AliveRecord.from_kv(kv)
        except (ValueError, KeyError, TypeError):
            continue
    return state
