"""Which topics a ``topicPattern`` read subscribes to: the NameServer's topic list, filtered.

Pure: the pattern is matched against the whole name (``re.fullmatch``, as Kafka's
``subscribePattern`` matches whole names), and topics that are not user data never match: the
brokers' own topics (``TBW102``, ``SCHEDULE_TOPIC_XXXX``, ``RMQ_SYS_*``, ...), the retry and
dead-letter topics of consumer groups (``%RETRY%``, ``%DLQ%``), and the topics a broker registers
under its cluster's and its own name. The result is sorted, so offsets built from it are stable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rocketpy.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, is_system_topic


def is_user_topic(topic: str, reserved: frozenset[str] = frozenset()) -> bool:
    """False for system, retry and dead-letter topics and for ``reserved`` (cluster/broker names)."""
    return not (
        is_system_topic(topic)
        or topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
        or topic in reserved
    )


def match_topics(pattern: str, names: Iterable[str], reserved: Iterable[str] = ()) -> list[str]:
    """The user topics among ``names`` whose whole name matches ``pattern``, sorted."""
    compiled = re.compile(pattern)
    skip = frozenset(reserved)
    return sorted({t for t in names if is_user_topic(t, skip) and compiled.fullmatch(t)})


def reserved_names(cluster_info: dict[str, object]) -> set[str]:
    """Cluster and broker names from GET_BROKER_CLUSTER_INFO (brokers register topics named so)."""
    names: set[str] = set()
    clusters = cluster_info.get("clusterAddrTable") or {}
    if isinstance(clusters, dict):
        for cluster, brokers in clusters.items():
            names.add(str(cluster))
            names.update(str(b) for b in brokers or ())
    brokers = cluster_info.get("brokerAddrTable") or {}
    if isinstance(brokers, dict):
        names.update(str(b) for b in brokers)
    return names
