"""The NameServer's Prometheus collector: route-table sizes and broker liveness, read at scrape time.

Families: registered broker addresses, broker names, clusters and topics (gauges), REGISTER_BROKER
calls and evictions by reason (counters, kept by ``RouteInfoManager``), plus the RPC server's
connections, requests and latency (``rocketpy.metrics.families``). ``collect`` runs on the loop.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from rocketpy.metrics.families import PREFIX, counter, gauge, remoting_families
from rocketpy.nameserver.route_info import RouteInfoManager
from rocketpy.remoting.server import RemotingServer


class NamesrvCollector(Collector):
    """Collects one NameServer's metrics."""

    def __init__(self, route_info: RouteInfoManager, server: RemotingServer) -> None:
        self.route_info = route_info
        self.server = server

    def collect(self) -> Iterator[Metric]:
        """Every family, read from the live route tables."""
        r = self.route_info
        yield gauge("namesrv_brokers", "Registered broker addresses (masters and slaves).",
                    len(r.broker_live_table))  # fmt: skip
        yield gauge(
            "namesrv_broker_names", "Broker names with at least one address.", len(r.broker_addr_table)
        )
        yield gauge("namesrv_clusters", "Clusters with at least one broker.", len(r.cluster_addr_table))
        yield gauge("namesrv_topics", "Topics with queues on at least one broker.", len(r.topic_queue_table))
        yield counter("namesrv_registrations", "REGISTER_BROKER calls recorded.", r.registrations_total)
        evictions = CounterMetricFamily(
            PREFIX + "namesrv_evictions",
            "Broker addresses evicted, by reason (silent too long, or connection closed).",
            labels=["reason"],
        )
        evictions.add_metric(["expired"], r.expired_total)
        evictions.add_metric(["closed"], r.closed_total)
        yield evictions
        yield from remoting_families(self.server)
