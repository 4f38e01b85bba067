"""The broker's Prometheus collector: reads the broker's counters and tables at scrape time.

Names follow rocketmq-exporter's subjects under ``rocketpy_``: messages and bytes put per topic and
got per (group, topic), send/pull/flush latency, held pulls, consume-queue max offsets, committed
offsets, lag in messages and in seconds (the oldest unconsumed message's age) per (group, topic,
queue), commitlog size, disk ratio, connections, requests by
code and response code, replication lag, and controller mode's elections, epoch and SyncStateSet.
Nothing here runs on the message path: the hot path only bumps counters the broker already keeps
(``BrokerStats``, ``RequestStats``, ``LatencyHistogram``); ``collect`` runs on the loop (the tables
are loop-owned) and does no I/O.
Series per group and queue are bounded by the offset table's own bound (``MAX_OFFSET_KEYS``).
POP consumption (``pop_families``): messages popped, acked, made invisible longer and revived per
(group, topic), dead letters, messages in flight and the age of the oldest, waiting pops.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rocketpy.broker.failover.replicas import ReplicasManager
from rocketpy.broker.ha.role import Replication
from rocketpy.broker.lag import LagClock
from rocketpy.broker.long_polling import PullRequestHoldService
from rocketpy.broker.offsets import TOPIC_GROUP_SEPARATOR, ConsumerOffsetManager
from rocketpy.broker.pop.service import PopService
from rocketpy.broker.processors.admin_stats import VERSION_DESC
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store import Store
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.latency import LatencyHistogram
from rocketpy.metrics.families import PREFIX, counter, gauge, histogram, merged, remoting_families
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.server import RemotingServer

if TYPE_CHECKING:
    from rocketpy.broker.grpc.server import GrpcEndpoint

SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
PULL_CODES = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)


class BrokerCollector(Collector):
    """Collects one broker's metrics (see the module docstring for what)."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_config: StoreConfig,
        server: RemotingServer,
        stats: BrokerStats,
        store: Store,
        topic_config: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        holds: PullRequestHoldService,
        replication: Replication,
        grpc: GrpcEndpoint | None = None,
        pop: PopService | None = None,
        failover: ReplicasManager | None = None,
    ) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.server = server
        self.stats = stats
        self.store = store
        self.topic_config = topic_config
        self.offsets = offsets
        self.holds = holds
        self.replication = replication
        self.grpc = grpc  # the gRPC endpoint (None when grpcServerPort is -1)
        self.pop = pop
        self.failover = failover
        self.lag = LagClock(store)

    def collect(self) -> Iterator[Metric]:
        """Every family, read from the live tables."""
        yield self._info()
        yield from self._traffic()
        yield from self._latency()
        yield from self._holds()
        yield from self._queues()
        yield from self._store()
        yield from remoting_families(self.server)
        yield from self._clients()
        yield from self._replication()
        if self.pop is not None:
            yield from pop_families(self.pop)
        if self.failover is not None:
            yield from self._controller(self.failover)

    def _clients(self) -> Iterator[Metric]:
        """Client connections by protocol (remoting TCP connections; gRPC client sessions by the
        language they report) and the gRPC calls answered by RPC and status code."""
        conns = GaugeMetricFamily(
            PREFIX + "client_connections",
            "Clients by protocol: remoting connections, gRPC client sessions (by x-mq-language).",
            labels=["protocol", "language"],
        )
        conns.add_metric(["remoting", ""], len(self.server.channels))
        calls = CounterMetricFamily(
            PREFIX + "grpc_requests", "gRPC calls answered, by RPC and status code.", labels=["rpc", "code"]
        )
        if self.grpc is not None:
            languages = Counter(c.channel.language or "UNKNOWN" for c in self.grpc.clients.table.values())
            for language, n in sorted(languages.items()):
                conns.add_metric(["grpc", language], n)
            for (rpc, code), n in sorted(self.grpc.calls_by_name().items()):
                calls.add_metric([rpc, code], n)
        yield conns
        yield calls

    def _info(self) -> Metric:
        bc = self.broker_config
        info = GaugeMetricFamily(
            PREFIX + "broker_info",
            "The broker's identity (always 1).",
            labels=["cluster", "broker", "broker_id", "role", "version"],
        )
        role = self.store_config.broker_role.value
        info.add_metric([bc.broker_cluster_name, bc.broker_name, str(bc.broker_id), role, VERSION_DESC], 1)
        return info

    def _traffic(self) -> Iterator[Metric]:
        s = self.stats
        put_msgs = CounterMetricFamily(
            PREFIX + "put_messages",
            "Messages stored by producers and send-backs, per topic.",
            labels=["topic"],
        )
        put_bytes = CounterMetricFamily(
            PREFIX + "put_bytes", "Bytes of message bodies stored, per topic.", labels=["topic"]
        )
        for topic, (msgs, size, _) in list(s.topic_puts.items()):
            put_msgs.add_metric([topic], msgs)
            put_bytes.add_metric([topic], size)
        get_msgs = CounterMetricFamily(
            PREFIX + "get_messages",
            "Messages handed out by pulls, per group and topic.",
            labels=["group", "topic"],
        )
        get_bytes = CounterMetricFamily(
            PREFIX + "get_bytes", "Bytes handed out by pulls, per group and topic.", labels=["group", "topic"]
        )
        for (group, topic), (msgs, size, _) in list(s.group_topic_gets.items()):
            get_msgs.add_metric([group, topic], msgs)
            get_bytes.add_metric([group, topic], size)
        yield from (put_msgs, put_bytes, get_msgs, get_bytes)

    def _latency(self) -> Iterator[Metric]:
        by_code = self.server.request_stats.latency
        yield histogram("send_latency_seconds", "Send requests, read to response.", [],
                        [([], merged(by_code, SEND_CODES))])  # fmt: skip
        yield histogram("pull_latency_seconds", "Pulls answered at once (held pulls excluded).", [],
                        [([], merged(by_code, PULL_CODES))])  # fmt: skip
        flush = self.store.flush_latency or LatencyHistogram()
        yield histogram("flush_latency_seconds", "Commitlog flushes (fdatasync) that wrote data.", [],
                        [([], flush)])  # fmt: skip

    def _holds(self) -> Iterator[Metric]:
        h = self.holds
        yield gauge("pull_holds", "Pulls held (long polling) now.", h.held_count)
        yield counter("pull_holds_started", "Pulls held since start.", h.held_total)
        ends = CounterMetricFamily(
            PREFIX + "pull_hold_ends", "Held pulls answered, by why they ended.", labels=["reason"]
        )
        ends.add_metric(["message"], h.woken_count)
        ends.add_metric(["timeout"], h.expired_count)
        yield ends

    def _queues(self) -> Iterator[Metric]:
        store = self.store
        max_offsets = GaugeMetricFamily(
            PREFIX + "consume_queue_max_offset",
            "Next offset of each consume queue (messages ever stored; queues never written are absent).",
            labels=["topic", "queue_id"],
        )
        for topic, qid, next_offset in store.queue_max_offsets():
            max_offsets.add_metric([topic, str(qid)], next_offset)
        yield max_offsets
        committed = GaugeMetricFamily(
            PREFIX + "consumer_offset",
            "Committed offset of each group in each queue.",
            labels=["group", "topic", "queue_id"],
        )
        lag = GaugeMetricFamily(
            PREFIX + "consumer_lag",
            "Messages not yet consumed: the queue's max offset minus the committed offset.",
            labels=["group", "topic", "queue_id"],
        )
        yield from self._lag_families(committed, lag)
        yield gauge("topics", "Topics in the broker's topic table.", len(self.topic_config.table))

    def _lag_families(self, committed: GaugeMetricFamily, lag: GaugeMetricFamily) -> Iterator[Metric]:
        """Per (group, topic, queue): the committed offset, the lag in messages and in seconds (the
        age of the oldest unconsumed message, ``broker/lag.py``; RocketMQ 5's consumer lag latency)."""
        store, clock = self.store, self.lag
        latency = GaugeMetricFamily(
            PREFIX + "consumer_lag_latency_seconds",
            "How long the oldest message a group has not consumed has waited in the queue (0: caught up).",
            labels=["group", "topic", "queue_id"],
        )
        now_ms = clock.clock_ms()
        clock.begin_pass()
        for key, queues in list(self.offsets.table.items()):
            topic, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
            for qid, offset in list(queues.items()):
                labels = [group, topic, str(qid)]
                max_offset = store.get_max_offset_in_queue(topic, qid)
                committed.add_metric(labels, offset)
                lag.add_metric(labels, max(0, max_offset - offset))
                ts = clock.oldest_store_time(group, topic, qid, offset, max_offset)
                latency.add_metric(labels, max(0, now_ms - ts) / 1000 if ts > 0 else 0.0)
        clock.end_pass()
        yield from (committed, lag, latency)

    def _store(self) -> Iterator[Metric]:
        store = self.store
        top = store.max_physical_offset
        yield gauge("commitlog_max_offset", "Commitlog offset past the last stored message.", top)
        yield gauge("commitlog_bytes", "Commitlog bytes still stored (max minus min offset).",
                    top - store.min_physical_offset)  # fmt: skip
        yield gauge("disk_used_ratio", "Used fraction of the commitlog's disk (0..1).", store.disk_ratio)

    def _replication(self) -> Iterator[Metric]:
        rep = self.replication
        if rep.service is not None:  # a master: one row per connected slave
            behind = GaugeMetricFamily(
                PREFIX + "ha_slave_lag_bytes",
                "Commitlog bytes a slave has not acknowledged.",
                labels=["slave_id", "addr"],
            )
            for row in rep.service.status():
                behind.add_metric([str(row["brokerId"]), str(row["addr"])], row["bytesBehind"])
            yield behind
        if rep.client is not None:  # a slave: how far behind its master it is
            status = rep.client.status()
            yield gauge(
                "ha_connected", "1 while the slave is connected to its master.", int(status["connected"])
            )
            yield gauge("ha_master_lag_bytes", "Bytes the master has that this slave has not stored.",
                        max(0, status["masterOffset"] - status["slaveMaxOffset"]))  # fmt: skip

    def _controller(self, f: ReplicasManager) -> Iterator[Metric]:
        """Controller mode: elections won, epoch, SyncStateSet, lease (broker/failover/)."""
        info = f.runtime_info()
        members = [m for m in info["syncStateSet"].split(",") if m]
        is_master, in_sync = info["controllerRole"] == "MASTER", info["inSyncStateSet"] == "true"
        yield counter("controller_elections", "Times this broker became its group's master.", f.elections_won)
        epoch_doc = "The master epoch this broker is in (its last one when not master)."
        yield gauge("controller_master_epoch", epoch_doc, int(info["masterEpoch"]))
        yield gauge("controller_is_master", "1 while this broker is its group's master.", int(is_master))
        yield gauge("controller_sync_state_set_size", "Members of the group's SyncStateSet.", len(members))
        yield gauge("controller_in_sync_state_set", "1 while in the SyncStateSet.", int(in_sync))
        lease_doc = "Seconds before this broker's fence deadline (its lease surely holds until then)."
        yield gauge("controller_lease_remaining_seconds", lease_doc, max(0.0, f.lease.remaining_s()))
        yield gauge("controller_etcd_reachable", "1 while etcd answers this broker.", int(f.etcd_reachable))


def pop_families(pop: PopService) -> Iterator[Metric]:
    """The POP families, read from the service's counters and ledger."""
    labels = ["group", "topic"]
    popped = CounterMetricFamily(PREFIX + "pop_messages", "Messages handed out by POP.", labels=labels)
    acks = CounterMetricFamily(PREFIX + "pop_acks", "POP messages acknowledged.", labels=labels)
    changes = CounterMetricFamily(
        PREFIX + "pop_invisible_changes", "Invisible-time changes of POP messages.", labels=labels
    )
    for (group, topic), (n_pop, n_ack, n_change) in list(pop.counts.items()):
        popped.add_metric([group, topic], n_pop)
        acks.add_metric([group, topic], n_ack)
        changes.add_metric([group, topic], n_change)
    revived = CounterMetricFamily(
        PREFIX + "pop_revived",
        "POP messages not acked within their invisible time, brought back (retry topic or DLQ).",
        labels=labels,
    )
    for (group, topic), n in list(pop.revive.revived_by.items()):
        revived.add_metric([group, topic], n)
    yield from (popped, acks, changes, revived)
    yield counter(
        "pop_dead_letters", "POP messages moved to %DLQ% by the revive.", pop.revive.dead_letter_count
    )
    yield from _pop_inflight(pop)
    yield gauge("pop_waiting", "POP and NOTIFICATION requests waiting for a message now.", pop.waiters.count)


def _pop_inflight(pop: PopService) -> Iterator[Metric]:
    labels = ["group", "topic"]
    inflight = GaugeMetricFamily(
        PREFIX + "pop_inflight", "POP messages popped, not yet acked.", labels=labels
    )
    oldest = GaugeMetricFamily(
        PREFIX + "pop_oldest_inflight_age_seconds",
        "Seconds since the longest-unacked POP message in flight was popped.",
        labels=labels,
    )
    counts: dict[tuple[str, str], int] = {}
    first: dict[tuple[str, str], int] = {}
    for q in list(pop.ledger.queues.values()):
        key = (q.group, q.topic)
        counts[key] = counts.get(key, 0) + len(q.inflight)
        t = q.oldest_pop_time()
        if t is not None:
            first[key] = min(first.get(key, t), t)
    now_ms = pop.clock_ms()
    for key, n in counts.items():
        inflight.add_metric(list(key), n)
        if key in first:
            oldest.add_metric(list(key), max(0, now_ms - first[key]) / 1000)
    yield from (inflight, oldest)
