"""Prometheus metrics of the daemons (``metricsPort``): the HTTP endpoint and shared families.

``server.MetricsServer`` serves a per-daemon ``CollectorRegistry`` at ``GET /metrics``;
``families`` turns the counters the daemons already keep (``LatencyHistogram``, ``RequestStats``)
into metric families. The collectors that know a daemon's tables live beside the daemon
(``rocketpy.broker.metrics``, ``rocketpy.nameserver.metrics``); the store and the remoting layer
know nothing of Prometheus or HTTP.
"""

from rocketpy.metrics.server import METRICS_PATH, MetricsBindError, MetricsServer

__all__ = ["METRICS_PATH", "MetricsBindError", "MetricsServer"]
