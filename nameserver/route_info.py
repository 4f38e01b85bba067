"""RouteInfoManager: the NameServer's route tables (pure: no I/O, clock injected).

Tables (RocketMQ's RouteInfoManager):

* ``topic_queue_table``: topic -> {brokerName: QueueData}
* ``broker_addr_table``: brokerName -> BrokerData{cluster, brokerName, brokerAddrs {brokerId: addr}}
* ``cluster_addr_table``: cluster -> {brokerName}
* ``broker_live_table``: broker addr -> BrokerLiveInfo (last update ms, data version, channel, ha addr)

Invariants: a broker name is in ``broker_addr_table`` iff it has at least one address, and then it is
in its cluster's set; a topic is in ``topic_queue_table`` iff at least one broker name holds queues
for it; an address appears under one (brokerName, brokerId) only. Topic queue data comes from
masters (brokerId 0) only, and only when their DataVersion changed or on first registration.
Everything runs on the event loop thread, so no locks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass

from rocketpy.perm import PERM_WRITE
from rocketpy.route import (
    MASTER_ID,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)

log = logging.getLogger("rocketpy.namesrv.route")


@dataclass(slots=True)
class BrokerLiveInfo:
    """What the NameServer knows about one registered broker address."""

    broker_addr: str
    cluster: str
    broker_name: str
    broker_id: int
    last_update_ms: int
    data_version: DataVersion
    channel: object
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """REGISTER_BROKER's answer: for a slave, its master's address and HA address (else None)."""

    master_addr: str | None = None
    ha_server_addr: str | None = None


class RouteInfoManager:
    """Owns the route tables; every mutation goes through its methods.

    Args:
        clock_ms: returns the current time in milliseconds (injected so tests control time).
    """

    def __init__(self, clock_ms: Callable[[], int]) -> None:
        self._clock_ms = clock_ms
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.registrations_total = 0  # REGISTER_BROKER calls recorded
        self.expired_total = 0  # addresses evicted for silence
        self.closed_total = 0  # addresses evicted because their connection closed
        # broker name -> the topics it holds queues for (so a re-registration finds what it dropped
        # without walking every topic: 100,000 of them take a NameServer's loop for a while)
        self._broker_topics: dict[str, set[str]] = {}
        # broker addr -> (version, topic names so far) of a split registration in progress
        self._split_seen: dict[str, tuple[DataVersion, set[str]]] = {}

    # ---------------------------------------------------------------- registration

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topics: TopicConfigSerializeWrapper | None,
        channel: object,
        split: tuple[int, int] | None = None,
        grpc_addr: str = "",
    ) -> RegisterResult:
        """Record (or refresh) a broker and, for a master, its topics.

        Args:
            cluster: brokerClusterName.
            broker_addr: the address clients use ("ip:port").
            broker_name: the broker name shared by a master and its slaves.
            grpc_addr: where the broker serves RocketMQ 5's gRPC API ("" when it does not).
            broker_id: 0 for the master, >= 1 for slaves.
            ha_server_addr: where slaves replicate from ("" when none).
            topics: the broker's topic table and its DataVersion (None: keep what is known).
            channel: the connection it registered on; closing it evicts the broker.
            split: ``(index, total)`` when ``topics`` is one part of a split registration.

        Returns:
            The master and HA addresses for a slave whose master is registered.
        """
        self.registrations_total += 1
        prev = self.broker_live_table.get(broker_addr)
        if prev is not None and (prev.broker_name, prev.cluster) != (broker_name, cluster):
            log.info("broker %s moved from %s/%s to %s/%s", broker_addr, prev.cluster, prev.broker_name,
                     cluster, broker_name)  # fmt: skip
            self._remove_addr(broker_addr)
            prev = None
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        data = self.broker_addr_table.get(broker_name)
        if data is None:
            data = BrokerData(cluster=cluster, broker_name=broker_name)
            self.broker_addr_table[broker_name] = data
        for other_id in [i for i, a in data.broker_addrs.items() if a == broker_addr and i != broker_id]:
            del data.broker_addrs[other_id]  # same ip:port switching role: one record per address
            data.grpc_addrs.pop(other_id, None)
        first = data.broker_addrs.get(broker_id) != broker_addr
        data.broker_addrs[broker_id] = broker_addr
        if grpc_addr:
            data.grpc_addrs[broker_id] = grpc_addr
        else:
            data.grpc_addrs.pop(broker_id, None)
        known = prev.data_version if prev is not None else DataVersion()
        version = topics.data_version if topics is not None else known  # no body: liveness only
        changed = prev is None or not prev.data_version.same_as(version)
        if topics is not None and broker_id == MASTER_ID:
            if split is not None:
                version = self._apply_part(broker_addr, broker_name, topics, split, changed or first, known)
            elif changed or first:
                self._replace_topics(broker_name, topics.topic_config_table)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            broker_addr, cluster, broker_name, broker_id, self._clock_ms(), version, channel, ha_server_addr
        )
        if first:
            log.info("new broker registered: %s %s[%d] %s", cluster, broker_name, broker_id, broker_addr)
        return self._slave_result(data, broker_id)

    def _slave_result(self, data: BrokerData, broker_id: int) -> RegisterResult:
        if broker_id == MASTER_ID:
            return RegisterResult()
        master_addr = data.broker_addrs.get(MASTER_ID)
        master = self.broker_live_table.get(master_addr) if master_addr else None
        if master is None:
            return RegisterResult()
        return RegisterResult(master_addr=master_addr, ha_server_addr=master.ha_server_addr or None)

    def _apply_part(
        self,
        broker_addr: str,
        broker_name: str,
        topics: TopicConfigSerializeWrapper,
        split: tuple[int, int],
        changed: bool,
        known: DataVersion,
    ) -> DataVersion:
        """Merge one part of a split registration; returns the version the broker is known at.

        Part 0 of a changed table starts collecting names; every part's topics are merged at once
        (routes appear part by part); the last part drops the broker's topics no part named and
        only then records the new version, so a sequence cut short is sent again in full.
        """
        index, total = split
        version = topics.data_version
        if index == 0:
            self._split_seen.pop(broker_addr, None)
            if changed:
                self._split_seen[broker_addr] = (version, set())
        pending = self._split_seen.get(broker_addr)
        if pending is None or not pending[0].same_as(version):
            if changed:  # a part out of sequence (e.g. this NameServer restarted): merge, keep nothing
                self._merge_topics(broker_name, topics.topic_config_table)
            return known
        pending[1].update(topics.topic_config_table)
        self._merge_topics(broker_name, topics.topic_config_table)
        if index + 1 < total:
            return known
        del self._split_seen[broker_addr]
        self._drop_topics_not_in(broker_name, pending[1])
        return version

    def _replace_topics(self, broker_name: str, table: dict[str, TopicConfig]) -> None:
        self._merge_topics(broker_name, table)
        self._drop_topics_not_in(broker_name, table)

    def _merge_topics(self, broker_name: str, table: dict[str, TopicConfig]) -> None:
        self._broker_topics.setdefault(broker_name, set()).update(table)
        for name, tc in table.items():
            self.topic_queue_table.setdefault(name, {})[broker_name] = QueueData(
                broker_name=broker_name,
                read_queue_nums=tc.read_queue_nums,
                write_queue_nums=tc.write_queue_nums,
                perm=tc.perm,
                topic_sys_flag=tc.topic_sys_flag,
            )

    def _drop_topics_not_in(self, broker_name: str, names: Collection[str]) -> None:
        held = self._broker_topics.get(broker_name, set())
        for topic in held.difference(names):
            self._remove_queue_data(topic, broker_name)

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> bool:
        """Forget a broker that is shutting down. Returns False when it was not registered."""
        data = self.broker_addr_table.get(broker_name)
        if data is not None and data.broker_addrs.get(broker_id) not in (None, broker_addr):
            log.warning(
                "unregister %s[%d] %s: that id has another address", broker_name, broker_id, broker_addr
            )
            return False
        removed = self._remove_addr(broker_addr, broker_name)
        log.info("broker unregistered: %s %s[%d] %s (%s)", cluster, broker_name, broker_id, broker_addr,
                 "removed" if removed else "was not registered")  # fmt: skip
        return removed

    # ---------------------------------------------------------------- liveness

    def query_data_version(self, broker_addr: str, version: DataVersion) -> tuple[bool, DataVersion | None]:
        """Compare a broker's DataVersion with the known one; an unchanged version refreshes liveness.

        Returns:
            (changed, the version the NameServer holds or None when the broker is unknown).
        """
        info = self.broker_live_table.get(broker_addr)
        if info is None:
            return True, None
        changed = not info.data_version.same_as(version)
        if not changed:
            info.last_update_ms = self._clock_ms()
        return changed, info.data_version

    def scan_not_active_brokers(self, expired_ms: int) -> list[BrokerLiveInfo]:
        """Evict every broker silent for more than ``expired_ms``; returns the evicted ones."""
        now = self._clock_ms()
        stale = [i for i in self.broker_live_table.values() if now - i.last_update_ms > expired_ms]
        for info in stale:
            log.warning("broker %s (%s) silent for %d ms, evicted", info.broker_addr, info.broker_name,
                        now - info.last_update_ms)  # fmt: skip
            self._remove_addr(info.broker_addr)
        self.expired_total += len(stale)
        return stale

    def on_channel_closed(self, channel: object) -> list[str]:
        """Evict at once every broker that registered on ``channel``; returns their addresses."""
        addrs = [a for a, i in self.broker_live_table.items() if i.channel is channel]
        for addr in addrs:
            log.info("connection of broker %s closed, evicted", addr)
            self._remove_addr(addr)
        self.closed_total += len(addrs)
        return addrs

    def _remove_addr(self, broker_addr: str, broker_name: str | None = None) -> bool:
        info = self.broker_live_table.pop(broker_addr, None)
        self._split_seen.pop(broker_addr, None)
        removed = info is not None
        name = info.broker_name if info is not None else broker_name
        names = [name] if name in self.broker_addr_table else list(self.broker_addr_table)
        for n in names:
            data = self.broker_addr_table[n]
            for bid in [i for i, a in data.broker_addrs.items() if a == broker_addr]:
                del data.broker_addrs[bid]
                data.grpc_addrs.pop(bid, None)
                removed = True
            if not data.broker_addrs:
                self._remove_broker_name(n, data.cluster)
        return removed

    def _remove_broker_name(self, broker_name: str, cluster: str) -> None:
        del self.broker_addr_table[broker_name]
        names = self.cluster_addr_table.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster]
        held = list(self._broker_topics.get(broker_name, ()))
        for topic in held:
            self._remove_queue_data(topic, broker_name)
        self._broker_topics.pop(broker_name, None)
        if held:
            log.info(
                "broker %s left: its queues of %d topics are gone from the routes", broker_name, len(held)
            )

    def _remove_queue_data(self, topic: str, broker_name: str) -> None:
        held = self._broker_topics.get(broker_name)
        if held is not None:
            held.discard(topic)
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return
        queues.pop(broker_name, None)
        if not queues:
            del self.topic_queue_table[topic]
            # debug: a broker leaving with 100,000 topics must not write 100,000 lines
            log.debug("topic %s has no broker left, removed from routes", topic)

    # ---------------------------------------------------------------- queries

    def topic_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route (copies), or None when no live broker holds it."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        brokers = [self.broker_addr_table[n] for n in sorted(queues) if n in self.broker_addr_table]
        if not brokers:
            return None
        return TopicRouteData(
            queue_datas=[queues[n].model_copy() for n in sorted(queues)],
            broker_datas=[b.model_copy(deep=True) for b in brokers],
        )

    def cluster_info(self) -> ClusterInfo:
        """Every broker name with its addresses, and the broker names of each cluster (copies)."""
        return ClusterInfo(
            broker_addr_table={n: b.model_copy(deep=True) for n, b in sorted(self.broker_addr_table.items())},
            cluster_addr_table={c: sorted(names) for c, names in sorted(self.cluster_addr_table.items())},
        )

    def topic_list(self) -> list[str]:
        """Every topic some live broker holds, sorted."""
        return sorted(self.topic_queue_table)

    # ---------------------------------------------------------------- admin

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Remove a topic from the routes (only the brokers of ``cluster`` when given).

        Returns:
            False when the topic was not known (or not on that cluster).
        """
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return False
        if cluster is None:
            for name in list(queues):
                self._remove_queue_data(topic, name)
            return True
        names = [n for n in self.cluster_addr_table.get(cluster, ()) if n in queues]
        for n in names:
            self._remove_queue_data(topic, n)
        return bool(names)

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear the write bit of every topic on ``broker_name``; returns how many topics changed."""
        return self._change_write_perm(broker_name, add=False)

    def add_write_perm(self, broker_name: str) -> int:
        """Set the write bit of every topic on ``broker_name``; returns how many topics changed."""
        return self._change_write_perm(broker_name, add=True)

    def _change_write_perm(self, broker_name: str, add: bool) -> int:
        count = 0
        for queues in self.topic_queue_table.values():
            qd = queues.get(broker_name)
            if qd is not None:
                qd.perm = (qd.perm | PERM_WRITE) if add else (qd.perm & ~PERM_WRITE)
                count += 1
        return count
