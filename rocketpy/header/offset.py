"""Consumer offset headers: QUERY_CONSUMER_OFFSET and UPDATE_CONSUMER_OFFSET (RocketMQ names).

Owns both headers' fields, the client's maps (``to_ext``) and the broker's reading (``from_ext``,
which also checks the queue id and offset ranges).
"""

from __future__ import annotations

from typing import Any

from rocketpy.remoting.headers import HeaderError, ext_bool, ext_int, ext_str

INT64_MAX = (1 << 63) - 1
#: Queue ids are 16-bit in the stored record's key space.
MAX_QUEUE_ID = 65535


def _queue(ext: dict[str, Any] | None) -> tuple[str, str, int]:
    """(consumerGroup, topic, queueId) of an offset header."""
    group = ext_str(ext, "consumerGroup")
    topic = ext_str(ext, "topic")
    queue_id = ext_int(ext, "queueId")
    if not 0 <= queue_id <= MAX_QUEUE_ID:
        raise HeaderError(
            f"request header field 'queueId' must be between 0 and {MAX_QUEUE_ID}, got {queue_id}"
        )
    return group, topic, queue_id


class QueryConsumerOffsetRequestHeader:
    """A group's committed offset of one queue.

    Attributes:
        group, topic, queue_id: whose offset of which queue.
        set_zero_if_not_found: answer 0 (not QUERY_NOT_FOUND) while the queue still starts at 0.
    """

    __slots__ = ("group", "queue_id", "set_zero_if_not_found", "topic")

    def __init__(self, group: str, topic: str, queue_id: int, set_zero_if_not_found: bool = True) -> None:
        self.group, self.topic, self.queue_id = group, topic, queue_id
        self.set_zero_if_not_found = set_zero_if_not_found

    def to_ext(self) -> dict[str, Any]:
        """The ``ext`` map."""
        return {
            "consumerGroup": self.group,
            "topic": self.topic,
            "queueId": self.queue_id,
            "setZeroIfNotFound": self.set_zero_if_not_found,
        }

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None) -> QueryConsumerOffsetRequestHeader:
        """Read the header (``setZeroIfNotFound`` defaults to true: RocketMQ's clients omit it).

        Raises:
            HeaderError: a missing or malformed field, a queue id out of range.
        """
        group, topic, queue_id = _queue(ext)
        return cls(group, topic, queue_id, ext_bool(ext, "setZeroIfNotFound", True))


class UpdateConsumerOffsetRequestHeader:
    """A group's new committed offset (the next one to consume) of one queue."""

    __slots__ = ("commit_offset", "group", "queue_id", "topic")

    def __init__(self, group: str, topic: str, queue_id: int, commit_offset: int) -> None:
        self.group, self.topic, self.queue_id, self.commit_offset = group, topic, queue_id, commit_offset

    def to_ext(self) -> dict[str, Any]:
        """The ``ext`` map."""
        return {
            "consumerGroup": self.group,
            "topic": self.topic,
            "queueId": self.queue_id,
            "commitOffset": self.commit_offset,
        }

    @classmethod
    def from_ext(cls, ext: dict[str, Any] | None) -> UpdateConsumerOffsetRequestHeader:
        """Read the header.

        Raises:
            HeaderError: a missing or malformed field, a queue id or offset out of range.
        """
        group, topic, queue_id = _queue(ext)
        offset = ext_int(ext, "commitOffset")
        if not 0 <= offset <= INT64_MAX:
            raise HeaderError(
                f"request header field 'commitOffset' must be between 0 and {INT64_MAX}, got {offset}"
            )
        return cls(group, topic, queue_id, offset)
