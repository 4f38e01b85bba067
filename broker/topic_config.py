"""Topic configuration table of one broker (``config/topics.json``).

Owns: the topic -> ``TopicConfig`` table, its ``dataVersion`` (bumped on every change, sent with
REGISTER_BROKER), topic-name validation, the system topics every broker has (``TBW102`` when
auto-create is on, ``SCHEDULE_TOPIC_XXXX``, the cluster and broker name topics ...), and
auto-creation of topics on first send. Listeners are told about every change so the controller
can re-register with the NameServers at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from rocketpy.broker.persistence import JsonTable
from rocketpy.config import BrokerConfig
from rocketpy.errors import RocketpyError
from rocketpy.perm import PERM_INHERIT, PERM_RW
from rocketpy.route import TopicConfig
from rocketpy.topic import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    MAX_QUEUE_NUMS,
    OFFSET_MOVED_EVENT,
    RMQ_SYS_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TOPIC_MAX_LENGTH,
    TOPIC_NAME_RE,
    TRACE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

log = logging.getLogger("rocketpy.broker.topic")

#: Topics one broker keeps; auto-creation beyond this is refused (every topic is in each registration).
MAX_TOPICS = 100_000


class TopicLimitError(RocketpyError):
    """The broker already holds ``MAX_TOPICS`` topics."""


def _topic(name: str, queue_nums: int, perm: int) -> TopicConfig:
    """A topic with ``queue_nums`` read and write queues."""
    return TopicConfig(topic_name=name, read_queue_nums=queue_nums, write_queue_nums=queue_nums, perm=perm)


def validate_topic_name(topic: str) -> str | None:
    """Return why ``topic`` is not a valid topic name, or None when it is."""
    if not topic:
        return "the topic name is empty; give a topic name"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"the topic name is {len(topic)} chars long; the limit is {TOPIC_MAX_LENGTH}"
    if not TOPIC_NAME_RE.match(topic):
        return (
            f"the topic name {topic!r} has illegal characters; use only letters, digits, '%', '|', '_', '-'"
        )
    return None


def is_send_forbidden_topic(topic: str) -> bool:
    """True for system topics clients may not send to (TBW102, SCHEDULE_TOPIC_XXXX, RMQ_SYS_* but the
    trace topic, which traced clients write)."""
    if topic == TRACE_TOPIC:
        return False
    return topic in (AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC) or topic.startswith(RMQ_SYS_PREFIX)


class TopicConfigManager:
    """The broker's topic table, persisted to ``topics.json``.

    Args:
        broker_config: read for cluster/broker names, auto-create and default queue numbers.
        path: the topics.json path.
        clock_ms: milliseconds clock (injected for tests).
    """

    def __init__(
        self, broker_config: BrokerConfig, path: str, clock_ms: Callable[[], int] | None = None
    ) -> None:
        self._config = broker_config
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.table: dict[str, TopicConfig] = {}
        self.data_version: dict[str, int] = {"timestamp": self._clock_ms(), "counter": 0}
        self._listeners: list[Callable[[], None]] = []
        self.file = JsonTable(path, self.snapshot)
        self._add_system_topics()

    def add_change_listener(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` after every change of the table (on the event loop)."""
        self._listeners.append(fn)

    def _add_system_topics(self) -> None:
        c = self._config
        n = c.default_topic_queue_nums
        if c.auto_create_topic_enable:
            self._put(_topic(AUTO_CREATE_TOPIC_KEY_TOPIC, n, PERM_RW | PERM_INHERIT))
        for name, queues in (
            (SELF_TEST_TOPIC, 1),
            (BENCHMARK_TOPIC, 1024),
            (c.broker_cluster_name, 16),
            (c.broker_name, 1),
            (OFFSET_MOVED_EVENT, 1),
            (TRANS_HALF_TOPIC, 1),
            (TRANS_OP_HALF_TOPIC, 1),
        ):
            perm = PERM_RW
            if name in (c.broker_cluster_name, c.broker_name):
                perm = PERM_RW | PERM_INHERIT if c.auto_create_topic_enable else PERM_RW
            self._put(_topic(name, queues, perm))
        self._put(_topic(SCHEDULE_TOPIC, 18, PERM_RW))

    def _put(self, tc: TopicConfig) -> None:
        self.table[tc.topic_name] = tc

    def load(self) -> None:
        """Load topics.json (sync; call before serving or from a thread); merges over system topics."""
        doc = self.file.load()
        if not doc:
            return
        for name, d in (doc.get("topicConfigTable") or {}).items():
            tc = TopicConfig.from_wire(d)
            tc.topic_name = name
            self.table[name] = tc
        dv = doc.get("dataVersion") or {}
        self.data_version = {"timestamp": int(dv.get("timestamp", 0)), "counter": int(dv.get("counter", 0))}

    def snapshot(self) -> dict[str, Any]:
        """The topics.json / TopicConfigSerializeWrapper document (fresh dicts)."""
        return {
            "topicConfigTable": {name: tc.to_wire() for name, tc in self.table.items()},
            "dataVersion": dict(self.data_version),
        }

    def get(self, topic: str) -> TopicConfig | None:
        """The config of ``topic`` or None."""
        return self.table.get(topic)

    def _changed(self) -> None:
        self.data_version = {"timestamp": self._clock_ms(), "counter": self.data_version["counter"] + 1}
        self.file.mark_dirty()
        for fn in self._listeners:
            fn()

    def update(self, tc: TopicConfig) -> None:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC); callers validate first.

        Raises:
            TopicLimitError: a new topic while the broker holds ``MAX_TOPICS`` topics already.
        """
        old = self.table.get(tc.topic_name)
        if old is None:
            self._check_room()
        self.table[tc.topic_name] = tc
        log.info("topic %s: %s -> %s", tc.topic_name, old, tc)
        self._changed()

    def delete(self, topic: str) -> bool:
        """Remove ``topic``; True when it existed."""
        if self.table.pop(topic, None) is None:
            return False
        log.info("topic %s deleted", topic)
        self._changed()
        return True

    def create_on_send(
        self, topic: str, default_topic: str | None, client_queue_nums: int
    ) -> TopicConfig | None:
        """Auto-create ``topic`` on first send, RocketMQ style; None when auto-create is not allowed.

        The new topic gets ``min(client_queue_nums, template queues)`` queues, where the template is
        ``default_topic`` (normally TBW102), whose perm must carry the inherit bit.

        Raises:
            TopicLimitError: the broker holds ``MAX_TOPICS`` topics already.
        """
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        if not self._config.auto_create_topic_enable:
            return None
        self._check_room()
        template = self.table.get(default_topic or AUTO_CREATE_TOPIC_KEY_TOPIC)
        if template is None:  # auto-create switched on while running: TBW102 was never made
            n = self._config.default_topic_queue_nums
            template = _topic(AUTO_CREATE_TOPIC_KEY_TOPIC, n, PERM_RW | PERM_INHERIT)
        if not template.perm & PERM_INHERIT:
            return None
        queues = max(1, min(client_queue_nums if client_queue_nums > 0 else 4, template.write_queue_nums))
        queues = min(queues, MAX_QUEUE_NUMS)
        tc = _topic(topic, queues, template.perm & ~PERM_INHERIT & PERM_RW)
        self.table[topic] = tc
        log.info("auto-created topic %s with %d queues", topic, queues)
        self._changed()
        return tc

    def _check_room(self) -> None:
        if len(self.table) >= MAX_TOPICS:
            raise TopicLimitError(
                f"this broker already has {len(self.table)} topics, its limit; delete unused topics "
                "(mqadmin deleteTopic) before creating more"
            )

    def create_system_group_topic(self, topic: str, queue_nums: int, perm: int = PERM_RW) -> TopicConfig:
        """Create (if absent) an internal topic such as ``%RETRY%group`` and return it.

        Raises:
            TopicLimitError: the broker holds ``MAX_TOPICS`` topics already.
        """
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        self._check_room()
        tc = _topic(topic, queue_nums, perm)
        self.table[topic] = tc
        self._changed()
        return tc
