"""Topic names with a meaning on the wire, shared by client and daemons (RocketMQ's ``TopicValidator``
and ``MixAll`` names).

Owns the system topic names, the retry/DLQ topic prefixes and the topic-name syntax (legal
characters and length) that both the producer's checks and the broker's checks apply.
"""

from __future__ import annotations

import re

#: The template topic of auto-creation: a send names it as ``defaultTopic`` (V2 field ``c``).
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
#: Where delayed messages wait (one queue per delay level) until they are due.
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
RMQ_SYS_PREFIX = "RMQ_SYS_"
#: RocketMQ 5's prefix of system topics (``TopicValidator.SYSTEM_TOPIC_PREFIX``).
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
#: ``rmq_sys_REVIVE_LOG_<cluster>``: POP checkpoints and acks (``PopAckConstants.REVIVE_TOPIC``).
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: Where half messages checked ``transactionCheckMax`` times without an answer are kept for inspection.
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
#: ``%RETRY%<group>``: a consumer group's retry topic.
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
#: ``%DLQ%<group>``: a consumer group's dead-letter topic.
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

#: RocketMQ's ``TopicFilterType.SINGLE_TAG``: the only filter type of a topic (``topicFilterType``).
SINGLE_TAG = "SINGLE_TAG"

#: Longest topic name (its length is one byte in the stored record).
TOPIC_MAX_LENGTH = 127
#: Most read or write queues a topic may have.
MAX_QUEUE_NUMS = 1024
#: The characters a topic name may use.
TOPIC_NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")

#: The topics brokers make and use for themselves (besides ``RMQ_SYS_*`` and cluster/broker names).
SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        TRANS_CHECK_MAX_TIME_TOPIC,
    }
)


def is_system_topic(topic: str) -> bool:
    """True for the brokers' own topics (``SYSTEM_TOPICS``, ``RMQ_SYS_*`` and ``rmq_sys_*``)."""
    return topic in SYSTEM_TOPICS or topic.startswith((RMQ_SYS_PREFIX, SYSTEM_TOPIC_PREFIX))


def retry_topic(group: str) -> str:
    """``%RETRY%{group}``: where the group's failed messages wait for redelivery."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%{group}``: where the group's messages go after their last retry."""
    return DLQ_GROUP_TOPIC_PREFIX + group


#: RocketMQ 5's topic attributes rocketpy knows, with their allowed values.
TOPIC_ATTRIBUTES: dict[str, frozenset[str]] = {
    "message.type": frozenset({"NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"}),
}


def apply_attributes(current: dict[str, str], changes: str) -> dict[str, str]:
    """``current`` topic attributes after RocketMQ 5's change list (``+key=value`` sets, ``-key``
    removes; entries joined by ``,``). Values of known keys are upper-cased.

    Raises:
        ValueError: an entry is malformed, names an unknown key or an unknown value.
    """
    out = dict(current)
    for raw in changes.split(","):
        entry = raw.strip()
        if not entry:
            continue
        sign, body = entry[0], entry[1:]
        key, sep, value = body.partition("=")
        allowed = TOPIC_ATTRIBUTES.get(key)
        if sign not in "+-" or allowed is None:
            known = ", ".join(sorted(TOPIC_ATTRIBUTES))
            raise ValueError(f"topic attribute {entry!r}: use +KEY=VALUE or -KEY with a known key ({known})")
        if sign == "-":
            out.pop(key, None)
            continue
        value = value.strip().upper()
        if not sep or value not in allowed:
            raise ValueError(f"topic attribute {key}={value!r} is not one of {', '.join(sorted(allowed))}")
        out[key] = value
    return out


#: ``%RETRY%{group}_{topic}`` (RocketMQ's ``KeyBuilder.buildPopRetryTopicV1``, its default naming).
POP_RETRY_SEPARATOR = "_"


def pop_retry_topic(group: str, topic: str) -> str:
    """``%RETRY%{group}_{topic}``: where a POP group's messages of ``topic`` wait after their
    invisible time passed unacknowledged (RocketMQ's POP retry topic)."""
    return RETRY_GROUP_TOPIC_PREFIX + group + POP_RETRY_SEPARATOR + topic


def pop_retry_origin(retry: str, group: str) -> str | None:
    """The topic a POP retry topic of ``group`` stands for (None: ``retry`` is not one)."""
    prefix = RETRY_GROUP_TOPIC_PREFIX + group + POP_RETRY_SEPARATOR
    if retry.startswith(prefix) and len(retry) > len(prefix):
        return retry[len(prefix) :]
    return None


def revive_topic(cluster: str) -> str:
    """``rmq_sys_REVIVE_LOG_{cluster}``: the POP checkpoints and acks of a cluster's brokers."""
    return REVIVE_TOPIC_PREFIX + cluster
