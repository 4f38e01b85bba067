"""Controller mode's role machine: election, fencing, following and rejoin of one broker (RocketMQ 5's
``ReplicasManager``, coordinated through etcd).

Owns this broker's role in its group and every change of it, in one routine that reads the group's
keys (``keys.py``) each ``POLL_S`` or when a watch notice or an HA event wakes it:

- **join**: the broker id (``identity.py``), a lease (``lease.py``) and ``alive/{id}`` bound to it;
  while etcd does not answer the broker takes no role and says so (reads keep working).
- **election**: no ``master`` key -> a replica of the SyncStateSet (any replica with
  ``enableElectUncleanMaster``, logged as possibly losing messages) cuts a torn replica tail, then
  one transaction compares ``master`` absent and the revisions of ``epoch`` and ``syncStateSet`` it
  read, and writes epoch+1, ``master`` (bound to its lease) and the SyncStateSet {itself}. Replicas
  with newer data go first (``STAGGER_S`` per rank). The winner appends the epoch to its epoch file,
  accepts slaves, starts the master-only services, registers as brokerId 0 and opens writes.
- **fencing**: acknowledgements pass ``ack_refusal`` at the moment the answer is built: only a
  master whose lease is before its fence deadline acknowledges (``lease.py`` says why no other
  broker can be master by then). A master that finds ``master`` gone or someone else's stops at once.
- **following and rejoin**: a replica asks the master its epoch entries (GET_BROKER_EPOCH_CACHE),
  truncates its log, queues and index to the consistent point (``store/epoch.py``), adopts the
  entries and replicates from there.
- **SyncStateSet**: a master keeps ``sync_state.InSyncReplicas`` and writes changes with its
  ``master`` key's create revision as the fencing token (shrinking in etcd before it applies).

Log lines ``EPOCH-BEGIN`` / ``EPOCH-END`` record when this broker acknowledged as master of which
epoch (wall-clock ms), so a test can check that no two masters acknowledged at overlapping times.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from enum import StrEnum
from typing import Any

from rocketpy.broker.failover.etcd import (
    EtcdClient,
    EtcdError,
    EtcdUnavailable,
    created,
    delete_op,
    modified,
    put_op,
    range_op,
)
from rocketpy.broker.failover.identity import (
    Identity,
    IdentityError,
    identity_path,
    load_identity,
    obtain_identity,
)
from rocketpy.broker.failover.keys import (
    AliveRecord,
    EpochRecord,
    GroupKeys,
    GroupState,
    MasterRecord,
    SyncStateSet,
    encode,
    parse_group,
)
from rocketpy.broker.failover.lease import Lease, boot_clock
from rocketpy.broker.failover.role import ControllerReplication
from rocketpy.broker.failover.sync_state import InSyncReplicas
from rocketpy.broker.master_services import MasterOnlyServices
from rocketpy.broker.processors.body import decode_map
from rocketpy.broker.store import MessageStore, PutMessageResult, PutMessageStatus
from rocketpy.broker.store.epoch import EpochFile, consistent_point
from rocketpy.config import BrokerConfig, BrokerRole, StoreConfig
from rocketpy.errors import RemotingConnectError, RemotingTimeoutError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand

log = logging.getLogger("rocketpy.broker.failover")

POLL_S = 1.0
STAGGER_S = 0.3
ISR_CHECK_S = 0.2
CALL_TIMEOUT_S = 3.0
SWITCH_TIMEOUT_S = 10.0
NUDGE_TIMEOUT_S = 1.0
JOIN_RETRY_S = 1.0
WATCH_RENEW_S = 10.0
#: etcd's gRPC code for a lease it does not know (NOT_FOUND).
LEASE_NOT_FOUND = 5
#: ``alive/{id}`` carries the log end for election ranks: refreshed at most this often (an etcd
#: write each: every replica of every group writes its own).
ALIVE_UPDATE_S = 5.0


class Role(StrEnum):
    """What this broker is in its group now."""

    NONE = "NONE"  # no role yet: joining, etcd unreachable, or no master to follow
    FOLLOWER = "FOLLOWER"
    MASTER = "MASTER"


def _event_key(event: dict[str, Any]) -> str:
    """A watch event's key (the gateway sends it in base64)."""
    try:
        return base64.b64decode(str((event.get("kv") or {}).get("key", ""))).decode(errors="replace")
    except ValueError:
        return ""


def wall_ms() -> int:
    """Wall-clock milliseconds (log lines only; never used to decide anything)."""
    return int(time.time() * 1000)


class ReplicasManager:
    """The controller-mode role of one broker.

    Args:
        broker_config / store_config: its settings.
        store: its store.
        replication: its ``ControllerReplication``.
        services: its master-only services.
        remoting: its RemotingClient (epoch entries from the master).
        etcd: the etcd client (default: from ``etcdEndpoints``).
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        store: MessageStore,
        replication: ControllerReplication,
        services: MasterOnlyServices,
        remoting: RemotingClient,
        etcd: EtcdClient | None = None,
    ) -> None:
        bc = broker_config
        self.broker_config, self.store_config = bc, store_config
        self.store, self.replication, self.services, self.remoting = store, replication, services, remoting
        endpoints = [e.strip() for e in bc.etcd_endpoints.replace(";", ",").split(",") if e.strip()]
        self.etcd = etcd or EtcdClient(
            endpoints, request_timeout_s=min(1.0, bc.controller_lease_ttl_seconds / 4)
        )
        self.keys = GroupKeys(bc.etcd_key_prefix, bc.broker_cluster_name, bc.broker_name)
        self.lease = Lease(self.etcd, bc.controller_lease_ttl_seconds)
        self.epochs = EpochFile(store_config.store_path_root_dir)
        self.all_ack = bc.all_ack_in_sync_state_set or store_config.broker_role is BrokerRole.SYNC_MASTER
        self.identity: Identity | None = None
        self.role = Role.NONE
        self.epoch = 0
        self.following: tuple[int, int] | None = None  # (epoch, master id) being followed
        self.isr: InSyncReplicas | None = None
        self.last_state: GroupState | None = None
        self.broker_addr = self.ha_addr = ""
        self.registered_as: Callable[[int], Awaitable[None]] | None = None
        self.switching_to: int | None = None
        self.elections_won = 0
        self.last_ack_ms = 0
        self.etcd_reachable = False
        self._master_rev = self._epoch_rev = self._sss_rev = self._sss_version = 0
        self._candidate_since: float | None = None
        self._wake = asyncio.Event()
        self._role_lock = asyncio.Lock()  # one role change at a time (routine, switchover, shutdown)
        self._isr_wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._isr_task: asyncio.Task[None] | None = None
        self._warned: set[str] = set()
        self._alive_sent: tuple[int, int] | None = None
        self._alive_at = 0.0
        replication.service.listeners.append(self._on_ha_event)  # type: ignore[union-attr]

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def broker_id(self) -> int:
        """This store's controller-assigned id (-1 until known)."""
        return self.identity.broker_id if self.identity else -1

    async def load(self) -> None:
        """Read the epoch file and a stored identity (before the broker registers anywhere)."""
        self.epochs.load(self.store.max_physical_offset)
        path = identity_path(self.store_config.store_path_root_dir)
        ident = await asyncio.to_thread(load_identity, path)
        if ident is not None and ident.broker_name == self.broker_config.broker_name:
            self.identity = ident

    async def start(
        self, broker_addr: str, ha_addr: str, registered_as: Callable[[int], Awaitable[None]]
    ) -> None:
        """Start the role routine; the first join attempt happens before this returns."""
        self.broker_addr, self.ha_addr, self.registered_as = broker_addr, ha_addr, registered_as
        try:
            await self._join_once()
        except (EtcdUnavailable, EtcdError) as e:
            self._warn_etcd(e)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._role_routine(), name="rocketpy-controller-role"),
            loop.create_task(self._watch_routine(), name="rocketpy-controller-watch"),
        ]

    async def shutdown(self) -> None:
        """Stop the routines, stop acknowledging, and end the lease so another replica takes over now."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # no role change runs from here on
        async with self._role_lock:
            await self._demote("the broker is shutting down")
        await self.replication.stop_following()
        await self.lease.revoke()
        await self.etcd.close()

    def _warn_etcd(self, e: Exception) -> None:
        self.etcd_reachable = False
        if "etcd" not in self._warned:
            self._warned.add("etcd")
            msg = (
                f"controller mode: etcd at {', '.join(self.etcd.endpoints)} does not answer ({e}); this "
                "broker takes no role until it does (no master without the coordinator; reads are served)"
            )
            log.error(msg)

    # -- join -----------------------------------------------------------------------------------
    async def _join_once(self) -> None:
        bc = self.broker_config
        if self.identity is None or not self.lease.lease_id or self.lease.lost.is_set():
            path = identity_path(self.store_config.store_path_root_dir)
            self.identity = await obtain_identity(
                self.etcd, self.keys, bc.broker_cluster_name, bc.broker_name, path
            )
            await self.lease.grant()
            self._alive_sent = None
            log.info(
                "controller: %s joined as brokerId %d (lease %x, ttl %ds)",
                bc.broker_name,
                self.broker_id,
                self.lease.lease_id,
                self.lease.granted_ttl_s,
            )
            self._spawn_keeper()
        await self._put_alive(force=True)
        if "etcd" in self._warned:
            log.warning("controller mode: etcd answers again")
            self._warned.discard("etcd")
        self.etcd_reachable = True

    def _spawn_keeper(self) -> None:
        keeper = asyncio.get_running_loop().create_task(
            self._keep_routine(), name="rocketpy-controller-lease"
        )
        self._tasks.append(keeper)

    async def _keep_routine(self) -> None:
        await self.lease.keep_routine()
        self._wake.set()  # the lease is gone: the role routine demotes and joins again

    async def _put_alive(self, force: bool = False) -> None:
        now = boot_clock()
        point = (self.store.max_physical_offset, self.epochs.last_epoch)
        if not force and (point == self._alive_sent or now - self._alive_at < ALIVE_UPDATE_S):
            return
        rec = AliveRecord(self.broker_addr, self.ha_addr, point[0], point[1])
        await self.etcd.put(self.keys.alive(self.broker_id), rec.stored(), self.lease.lease_id)
        self._alive_sent, self._alive_at = point, now

    # -- the role routine -----------------------------------------------------------------------
    async def _role_routine(self) -> None:
        while True:
            try:
                async with self._role_lock:
                    await self._tick()
            except EtcdError as e:
                if e.code == LEASE_NOT_FOUND:  # the lease ended before the keeper noticed
                    self.lease.lost.set()
                    continue
                self._warn_etcd(e)
            except EtcdUnavailable as e:
                self._warn_etcd(e)
            except IdentityError as e:
                log.error("controller mode: %s", e)
                await asyncio.sleep(10 * JOIN_RETRY_S)
            self._wake.clear()
            try:
                async with asyncio.timeout(JOIN_RETRY_S if not self.etcd_reachable else self._poll_s()):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _poll_s(self) -> float:
        if self._candidate_since is not None:
            return STAGGER_S / 3
        return POLL_S

    async def _tick(self) -> None:
        if self.lease.lost.is_set() or not self.lease.lease_id:
            await self._demote("the lease ended in etcd")
            await self._join_once()
        kvs, revision = await self.etcd.range(self.keys.root, prefix=True)
        self.etcd_reachable = True
        state = self.last_state = parse_group(self.keys, kvs, revision)
        if (
            state.alive.get(self.broker_id) is None
            or state.alive[self.broker_id].lease != self.lease.lease_id
        ):
            await self._put_alive(force=True)
        if self.role is Role.MASTER:
            await self._master_tick(state)
        else:
            await self._replica_tick(state)
        await self._put_alive()

    def _wake_now(self) -> None:
        self._wake.set()

    async def _watch_routine(self) -> None:
        """Wake the role routine at each change of the group's role keys (polling covers a dead
        watch). A stream lives at most ``WATCH_RENEW_S``: one that went silent with its connection
        (a link that went down and up) is replaced; a new stream starts with a read."""
        while True:
            try:
                async with (
                    asyncio.timeout(WATCH_RENEW_S),
                    aclosing(self.etcd.watch(self.keys.root)) as stream,
                ):
                    async for events in stream:
                        if any(not _event_key(e).startswith(self.keys.alive_prefix) for e in events):
                            self._wake.set()  # liveness refreshes alone change no role
            except TimeoutError:
                self._wake.set()  # anything the old stream missed is read now
                continue
            except (EtcdUnavailable, ValueError, OSError) as e:
                log.debug("controller watch ended: %s", e)
            await asyncio.sleep(JOIN_RETRY_S)

    # -- replica side ---------------------------------------------------------------------------
    async def _replica_tick(self, state: GroupState) -> None:
        m = state.master
        if m is None:
            await self._maybe_elect(state)
            return
        self._candidate_since = None
        if m.brokerId == self.broker_id:
            if m.lease == self.lease.lease_id:
                await self._take_over(state, m)
            else:  # a record of this store's previous run (the store lock proves that run is over)
                await self.etcd.txn(
                    [modified(self.keys.master, m.create_revision)], [delete_op(self.keys.master)]
                )
                log.info(
                    "controller: removed the master record of this broker's previous run (epoch %d)", m.epoch
                )
            return
        if self.following != (m.epoch, m.brokerId):
            await self._follow(m)

    def _rank(self, state: GroupState) -> int:
        me = self.broker_id
        eligible = [i for i in state.alive if state.in_sync(i)]
        if not eligible and self.broker_config.enable_elect_unclean_master:
            eligible = list(state.alive)
        mine = AliveRecord("", "", self.store.confirm_offset, self.epochs.last_epoch)

        def key(i: int) -> tuple[int, int, int]:
            rec = mine if i == me else state.alive[i]
            return (-rec.epoch, -rec.maxOffset, i)

        if me in eligible:
            return sorted(eligible, key=key).index(me)
        return len(eligible) + 2  # an unclean candidate gives the in-sync ones their turn first

    async def _maybe_elect(self, state: GroupState) -> None:
        me = self.broker_id
        if not state.in_sync(me):
            sss = state.sync_state_set.members if state.sync_state_set else []
            if not self.broker_config.enable_elect_unclean_master:
                self._once(
                    f"not-in-sss-{state.current_epoch}",
                    logging.WARNING,
                    f"controller: no master, and brokerId {me} is not in the SyncStateSet {sss}: "
                    "waiting for an in-sync replica (enableElectUncleanMaster=false)",
                )
                return
            self._once(
                f"unclean-{state.current_epoch}",
                logging.WARNING,
                f"controller: brokerId {me} is not in the SyncStateSet {sss} but may be elected "
                "(enableElectUncleanMaster=true): messages acknowledged by the last master may be lost",
            )
        now = boot_clock()
        if self._candidate_since is None:
            self._candidate_since = now
        rank = self._rank(state)
        if now - self._candidate_since < rank * STAGGER_S:
            return
        await self._elect(state)

    async def _elect(self, state: GroupState) -> None:
        await self._stop_following()
        start = await self._cut_torn_tail()
        epoch = max(state.current_epoch, self.epochs.last_epoch) + 1
        me, k = self.broker_id, self.keys
        rec = MasterRecord(epoch, me, self.broker_addr, self.ha_addr)
        sss = SyncStateSet(epoch, [me], (state.sync_state_set.version if state.sync_state_set else 0) + 1)
        result = await self.etcd.txn(
            [
                created(k.master, 0),
                modified(k.epoch, state.epoch_revision),
                modified(k.sync_state_set, state.sync_state_set_revision),
            ],
            [
                put_op(k.epoch, encode(EpochRecord(epoch, me, start))),
                put_op(k.master, rec.stored(), self.lease.lease_id),
                put_op(k.sync_state_set, encode(sss)),
            ],
        )
        if not result.succeeded:
            log.info("controller: another replica won epoch %d", epoch)
            return
        self._master_rev = self._epoch_rev = self._sss_rev = result.revision
        self._sss_version = sss.version
        await self._become_master(epoch, start, {me}, "elected")

    async def _take_over(self, state: GroupState, m: MasterRecord) -> None:
        """The old master handed the group over to this broker (a switchover)."""
        await self._stop_following()
        start = await self._cut_torn_tail()
        if state.epoch is not None and state.epoch.startOffset != start:
            log.warning(
                "controller: switchover to epoch %d expected start offset %d, this log ends at %d",
                m.epoch,
                state.epoch.startOffset,
                start,
            )
        self._master_rev, self._epoch_rev = m.create_revision, state.epoch_revision
        self._sss_rev = state.sync_state_set_revision
        sss = state.sync_state_set
        self._sss_version = sss.version if sss else 0
        await self._become_master(
            m.epoch, start, set(sss.members) if sss else {self.broker_id}, "handed over"
        )

    async def _cut_torn_tail(self) -> int:
        """Drop a record the old master sent only in part; returns where this log's valid bytes end."""
        end = self.store.confirm_offset
        if self.store.max_physical_offset > end:
            await self.store.truncate(end)
        self.store.reset_replica()  # puts write this log from here on
        self.epochs.cut(end)
        return end

    async def _follow(self, m: MasterRecord) -> None:
        await self._stop_following()
        try:
            theirs, their_end = await self._fetch_epochs(m.addr)
        except (RemotingConnectError, RemotingTimeoutError, ValueError, KeyError) as e:
            self._once(
                f"fetch-{m.epoch}",
                logging.WARNING,
                f"controller: cannot read the epochs of master {m.addr} (epoch {m.epoch}): {e}; retrying",
            )
            return
        end = self.store.confirm_offset
        point = consistent_point(self.epochs.entries, end, theirs, their_end)
        if point is None:
            self._once(
                f"diverged-{m.epoch}",
                logging.ERROR,
                f"controller: this log shares no epoch with master {m.brokerId} (mine {self.epochs.entries}, "
                f"its {theirs}): it diverged; move this store aside and start it empty",
            )
            return
        if point < self.store.max_physical_offset:
            log.warning(
                "controller: rejoining as follower of epoch %d: truncating this log from %d to %d "
                "(bytes past the end the master confirms for epoch %d)",
                m.epoch,
                self.store.max_physical_offset,
                point,
                self._epoch_at(point),
            )
            await self.store.truncate(point)
        self.epochs.adopt(theirs)
        await asyncio.to_thread(self.epochs.save)
        self.store.reset_replica()  # replication continues from this log's end
        self.replication.follow(self.broker_id, m.addr, m.haAddr)
        self.following, self.role = (m.epoch, m.brokerId), Role.FOLLOWER
        log.info(
            "controller: following master %d at %s (epoch %d) from offset %d",
            m.brokerId,
            m.addr,
            m.epoch,
            self.store.max_physical_offset,
        )
        await self._register_as(self.broker_id)

    def _epoch_at(self, offset: int) -> int:
        older = [e for e, s in self.epochs.entries if s <= offset]
        return older[-1] if older else 0

    async def _fetch_epochs(self, addr: str) -> tuple[list[tuple[int, int]], int]:
        request = RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE)
        response = await self.remoting.invoke(addr, request, CALL_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise ValueError(f"GET_BROKER_EPOCH_CACHE answered {response.code}: {response.remark}")
        doc = decode_map(response, "GET_BROKER_EPOCH_CACHE")
        return [(int(e), int(s)) for e, s in doc["entries"]], int(doc["maxOffset"])

    async def _stop_following(self) -> None:
        if self.following is not None or self.replication.client is not None:
            await self.replication.stop_following()
        self.following = None
        if self.role is Role.FOLLOWER:
            self.role = Role.NONE

    async def _register_as(self, broker_id: int) -> None:
        if self.registered_as is not None:
            await self.registered_as(broker_id)

    def _once(self, key: str, level: int, msg: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.log(level, msg)

    # -- master side ----------------------------------------------------------------------------
    async def _become_master(self, epoch: int, start: int, members: set[int], how: str) -> None:
        if epoch != self.epochs.last_epoch:  # else: this broker's own epoch, resumed (a lost txn answer)
            self.epochs.begin(epoch, start)
            await asyncio.to_thread(self.epochs.save)
        sc = self.store_config
        self.isr = InSyncReplicas(
            self.broker_id,
            self.all_ack,
            sc.ha_max_gap_not_in_sync,
            sc.ha_max_time_slave_not_catchup / 1000.0,
            boot_clock,
        )
        self.isr.reset(members, start)
        self.replication.serve_as_master()
        self.epoch, self.role, self._candidate_since = epoch, Role.MASTER, None
        self.elections_won += 1
        log.warning(
            "EPOCH-BEGIN name=%s id=%d epoch=%d at_ms=%d start=%d how=%s",
            self.broker_config.broker_name,
            self.broker_id,
            epoch,
            wall_ms(),
            start,
            how,
        )
        self._isr_task = asyncio.get_running_loop().create_task(
            self._isr_routine(), name="rocketpy-controller-isr"
        )
        await self.services.start_all()
        await self._register_as(0)

    async def _master_tick(self, state: GroupState) -> None:
        m = state.master
        if (
            m is None
            or m.brokerId != self.broker_id
            or m.lease != self.lease.lease_id
            or m.epoch != self.epoch
        ):
            seen = f"epoch {m.epoch} master {m.brokerId}" if m else "no master"
            await self._demote(f"etcd shows {seen}")

    async def _demote(self, reason: str) -> None:
        if self.role is Role.MASTER:
            await self._step_down(reason)

    async def _step_down(self, reason: str, register: bool = True) -> None:
        self.role = Role.NONE  # acknowledgements stop here, before anything else
        log.warning(
            "EPOCH-END name=%s id=%d epoch=%d at_ms=%d last_ack_ms=%d reason=%s",
            self.broker_config.broker_name,
            self.broker_id,
            self.epoch,
            wall_ms(),
            self.last_ack_ms,
            reason,
        )
        if self.isr is not None:
            self.isr.end_waits()
        isr_task, self._isr_task = self._isr_task, None
        if isr_task is not None and isr_task is not asyncio.current_task():  # else it ends by itself
            isr_task.cancel()
            await asyncio.gather(isr_task, return_exceptions=True)
        self.replication.stop_serving()
        await self.services.stop_all()
        if register:  # else it registers with its own id once it follows the new master
            await self._register_as(self.broker_id)

    def _on_ha_event(self, broker_id: int, acked: int | None) -> None:
        isr = self.isr
        if isr is None or self.role is not Role.MASTER:
            return
        if acked is None:
            isr.on_disconnect(broker_id)
            self._isr_wake.set()
            return
        isr.on_report(broker_id, acked, self.store.max_physical_offset)
        if broker_id not in isr.members:
            self._isr_wake.set()

    async def _isr_routine(self) -> None:
        while self.role is Role.MASTER:
            self._isr_wake.clear()
            try:
                async with asyncio.timeout(ISR_CHECK_S):
                    await self._isr_wake.wait()
            except TimeoutError:
                pass
            try:
                async with self._role_lock:
                    await self._maintain_isr()
            except (EtcdUnavailable, EtcdError) as e:
                self._warn_etcd(e)

    async def _maintain_isr(self) -> None:
        isr = self.isr
        if isr is None or self.role is not Role.MASTER or self.switching_to is not None:
            return
        max_off = self.store.max_physical_offset
        want = isr.plan(max_off)
        if want == isr.members:
            return
        smaller = want < isr.members or not (want >= isr.members)
        target = (want & isr.members) if smaller else want
        if not smaller:
            isr.apply(target, max_off)  # waiting for more replicas is safe at once
        if not await self._write_sss(target):
            return
        if smaller:
            isr.apply(target, self.store.max_physical_offset)
        log.info("controller: SyncStateSet of epoch %d is now %s", self.epoch, sorted(target))

    async def _write_sss(self, members: set[int]) -> bool:
        k = self.keys
        sss = SyncStateSet(self.epoch, sorted(members), self._sss_version + 1)
        result = await self.etcd.txn(
            [created(k.master, self._master_rev), modified(k.sync_state_set, self._sss_rev)],
            [put_op(k.sync_state_set, encode(sss))],
            [range_op(k.master), range_op(k.sync_state_set)],
        )
        if result.succeeded:
            self._sss_rev, self._sss_version = result.revision, sss.version
            return True
        master = next((kv for kv in result.kvs if kv.key == k.master), None)
        if master is None or master.create_revision != self._master_rev:
            await self._demote("the master key changed under this master (SyncStateSet write refused)")
            return False
        current = next((kv for kv in result.kvs if kv.key == k.sync_state_set), None)
        if current is not None:
            self._sss_rev = current.mod_revision
            self._sss_version = SyncStateSet.from_raw(current.value).version
        return False

    def route_broker_id(self) -> int:
        """The id to register with the NameServers now: 0 only while this broker is master with a
        valid lease (a master that wakes up from a stop past its lease must not take the route back
        from its successor before its role routine notices), else its own id."""
        return 0 if self.role is Role.MASTER and self.lease.valid() else self.broker_id

    # -- the send path's gates --------------------------------------------------------------------
    def write_refusal(self) -> tuple[int, str] | None:
        """Why a send is refused before it is stored (None: it may be stored)."""
        name = self.broker_config.broker_name
        if self.role is not Role.MASTER:
            m = self.last_state.master if self.last_state else None
            where = f"; its master is brokerId {m.brokerId} at {m.addr}" if m else "; it has no master now"
            return ResponseCode.SERVICE_NOT_AVAILABLE, f"the broker[{name}] is not its group's master{where}"
        if self.switching_to is not None:
            return (  # not SYSTEM_BUSY: producers retry this until their timeout (send_path.py)
                ResponseCode.SERVICE_NOT_AVAILABLE,
                f"the broker[{name}] is handing over to brokerId {self.switching_to}; retry",
            )
        if not self.lease.valid():
            self._once(
                f"fenced-{self.epoch}-{self.lease.lease_id}",
                logging.ERROR,
                f"controller: fenced: the lease of epoch {self.epoch} may end in etcd within "
                f"{self.lease.margin_s:.1f}s and was not renewed; no write is accepted or "
                f"acknowledged (last acknowledgement at {self.last_ack_ms} ms)",
            )
            return ResponseCode.SYSTEM_BUSY, (
                f"the broker[{name}] cannot reach etcd and stopped accepting writes "
                f"(epoch {self.epoch} fenced); retry on another broker"
            )
        isr = self.isr
        need = self.broker_config.min_in_sync_replicas
        if isr is not None and len(isr.members) < need:
            return ResponseCode.SERVICE_NOT_AVAILABLE, (
                f"the broker[{name}] has {len(isr.members)} in-sync replicas, minInSyncReplicas={need}"
            )
        return None

    def ack_refusal(self) -> str | None:
        """Why a stored send is not acknowledged now (None: acknowledged; the moment is recorded)."""
        if self.role is Role.MASTER and self.lease.valid():
            self.last_ack_ms = wall_ms()
            return None
        return (
            f"the broker[{self.broker_config.broker_name}] is no longer the acknowledged master of epoch "
            f"{self.epoch} (lease or role lost); the message was not acknowledged: retry"
        )

    def ack_future(self, result: PutMessageResult, wait: bool) -> asyncio.Future[bool] | None:
        """SYNC semantics: a future of every SyncStateSet member holding a stored send (False: timed
        out), or None when there is nothing to wait for."""
        isr = self.isr
        if isr is None or not wait or result.status is not PutMessageStatus.PUT_OK:
            return None
        end = result.wrote_offset + result.wrote_bytes
        timeout_s = self.store_config.sync_flush_timeout / 1000.0
        return isr.future(end, self.store.max_physical_offset, timeout_s)

    async def _notify_role_changed(self, addr: str) -> None:
        """Tell the new master to read etcd now (NOTIFY_BROKER_ROLE_CHANGED) instead of at its next
        watch notice or poll; it is only a nudge, so a failure is logged and nothing more."""
        request = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED)
        try:
            await self.remoting.invoke(addr, request, NUDGE_TIMEOUT_S)
        except (RemotingConnectError, RemotingTimeoutError) as e:
            log.info("controller: could not nudge the new master at %s: %s", addr, e)

    def role_changed(self) -> None:
        """Another broker says the group's roles changed: read etcd now."""
        self._wake.set()

    # -- operations -----------------------------------------------------------------------------
    def epoch_cache(self) -> dict[str, Any]:
        """This broker's epoch entries and log end (GET_BROKER_EPOCH_CACHE)."""
        return {
            "brokerName": self.broker_config.broker_name,
            "brokerId": self.broker_id,
            "role": self.role.value,
            "epoch": self.epoch if self.role is Role.MASTER else self.epochs.last_epoch,
            "entries": [list(e) for e in self.epochs.entries],
            "maxOffset": self.store.confirm_offset,
        }

    async def group_state(self, broker_name: str) -> dict[str, Any]:
        """A group's master, epoch, SyncStateSet and live replicas, read from etcd now."""
        keys = GroupKeys(
            self.broker_config.etcd_key_prefix, self.broker_config.broker_cluster_name, broker_name
        )
        kvs, revision = await self.etcd.range(keys.root, prefix=True)
        state = parse_group(keys, kvs, revision)
        m, e, s = state.master, state.epoch, state.sync_state_set
        return {
            "brokerName": broker_name,
            "masterId": m.brokerId if m else -1,
            "masterAddr": m.addr if m else "",
            "masterEpoch": e.epoch if e else 0,
            "epochStartOffset": e.startOffset if e else 0,
            "syncStateSet": s.members if s else [],
            "syncStateSetEpoch": s.epoch if s else 0,
            "replicas": {
                str(i): {"addr": a.addr, "maxOffset": a.maxOffset, "epoch": a.epoch}
                for i, a in sorted(state.alive.items())
            },
            "revision": revision,
        }

    async def controller_metadata(self) -> dict[str, Any]:
        """The etcd cluster behind controller mode (members, leader, version) and this broker's view."""
        status = await self.etcd.status()
        members = await self.etcd.members()
        leader = str(status.get("leader", ""))
        return {
            "controllerType": "etcd",
            "endpoints": self.etcd.endpoints,
            "keyPrefix": self.broker_config.etcd_key_prefix,
            "leaseTtlSeconds": self.broker_config.controller_lease_ttl_seconds,
            "etcdVersion": status.get("version", ""),
            "leaderId": leader,
            "raftTerm": status.get("raftTerm", ""),
            "members": [
                {
                    "id": str(mb.get("ID", "")),
                    "name": mb.get("name", ""),
                    "clientURLs": mb.get("clientURLs") or [],
                    "isLeader": str(mb.get("ID", "")) == leader,
                }
                for mb in members
            ],
        }

    def runtime_info(self) -> dict[str, str]:
        """Controller-mode fields of GET_BROKER_RUNTIME_INFO (clusterList)."""
        isr = self.isr
        sss = self.last_state.sync_state_set if self.last_state else None
        members = (
            sorted(isr.members)
            if isr is not None and self.role is Role.MASTER
            else (sss.members if sss else [])
        )
        return {
            "controllerMode": "true",
            "controllerRole": self.role.value,
            "controllerBrokerId": str(self.broker_id),
            "masterEpoch": str(self.epoch if self.role is Role.MASTER else self.epochs.last_epoch),
            "syncStateSet": ",".join(map(str, members)),
            "inSyncStateSet": "true" if self.broker_id in members else "false",
            "leaseValid": "true" if self.lease.valid() else "false",
        }

    async def switch_over(self, target: int) -> str:
        """Hand the group to ``target`` (electMaster): stop writes, let it catch up, then write the epoch.

        Returns:
            What happened (for the operator).

        Raises:
            ValueError: the switchover cannot happen (the message says why).
        """
        isr = self.isr
        if self.role is not Role.MASTER or isr is None:
            raise ValueError(f"brokerId {self.broker_id} is not the master; send electMaster to the master")
        if target == self.broker_id:
            return f"brokerId {target} is already the master of epoch {self.epoch}"
        kvs, revision = await self.etcd.range(self.keys.root, prefix=True)  # its lease now, not a tick ago
        alive = parse_group(self.keys, kvs, revision).alive.get(target)
        if target not in isr.members or alive is None:
            raise ValueError(
                f"brokerId {target} is not a live member of the SyncStateSet {sorted(isr.members)}; "
                "wait until it is in sync"
            )
        async with self._role_lock:
            if self.role is not Role.MASTER:
                raise ValueError("this broker stopped being master meanwhile")
            self.switching_to = target
            try:
                return await self._hand_over(target, alive.lease, alive.addr, alive.haAddr)
            finally:
                self.switching_to = None

    async def _hand_over(self, target: int, lease: int, addr: str, ha_addr: str) -> str:
        isr = self.isr
        assert isr is not None
        deadline = boot_clock() + SWITCH_TIMEOUT_S
        while isr.acked.get(target, -1) < self.store.max_physical_offset:
            if boot_clock() > deadline:
                raise ValueError(
                    f"brokerId {target} did not catch up within {SWITCH_TIMEOUT_S:g}s; "
                    "this broker stays master"
                )
            await asyncio.sleep(0.005)
        start, epoch, k = self.store.max_physical_offset, self.epoch + 1, self.keys
        rec = MasterRecord(epoch, target, addr, ha_addr)
        # The set restarts as {target} (RocketMQ's electMaster does the same): the others must first
        # follow the new master, and a set still naming them would hold its acknowledgements until
        # haMaxTimeSlaveNotCatchup dropped them. They hold everything acknowledged so far and rejoin
        # as soon as they replicate from it.
        sss = SyncStateSet(epoch, [target], self._sss_version + 1)
        self.role = Role.NONE  # no acknowledgement from here on (the new master may start any moment)
        try:
            result = await self.etcd.txn(
                [created(k.master, self._master_rev), modified(k.epoch, self._epoch_rev)],
                [
                    put_op(k.epoch, encode(EpochRecord(epoch, target, start))),
                    put_op(k.master, rec.stored(), lease),
                    put_op(k.sync_state_set, encode(sss)),
                ],
            )
        except (EtcdUnavailable, EtcdError) as e:  # it may have been applied: never resume acknowledging here
            await self._step_down(f"switchover to brokerId {target}: etcd's answer was lost ({e})")
            self._wake.set()
            raise ValueError(
                f"etcd did not confirm the switchover ({e}); the group settles at the next check"
            ) from e
        if not result.succeeded:
            self.role = Role.MASTER
            raise ValueError("the epoch changed meanwhile; no switchover")
        # the new master takes brokerId 0 in routes; registering as a replica now would leave the
        # group without a master in routes until it does
        await self._step_down(f"switched over to brokerId {target} (epoch {epoch})", register=False)
        await self._notify_role_changed(addr)
        self._wake.set()
        return f"brokerId {target} is the master of epoch {epoch} from offset {start}"
