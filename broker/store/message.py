"""BrokerMessage: what the broker hands to ``MessageStore.put_message`` (one message to append).

Owns the per-message input fields (``__slots__``, no validation beyond what the store checks).
"""

from __future__ import annotations

from rocketpy.record import pack_host

#: The properties' mark of a message whose producer does not wait for its flush (``WAIT=false``).
WAIT_FALSE_MARK = "WAIT\x01false"


class BrokerMessage:
    """One message to store.

    Every argument may be passed by position, in this order (the send path does: no keyword
    matching per message) or by keyword.

    Args:
        topic: the topic.
        queue_id: the queue of the topic.
        body: the body as stored (already compressed when sys_flag has 0x1).
        properties: the RocketMQ-encoded properties string as received on the wire; the store derives
            the tag code (TAGS), index keys (KEYS, UNIQ_KEY) and delay (DELAY) from it.
        flag: user flag.
        sys_flag: RocketMQ sys flag bits.
        born_timestamp: producer time in ms.
        born_host: producer ``(ipv4, port)``.
        reconsume_times: delivery attempts so far (retry messages).
        prepared_transaction_offset: for transaction records.
        tags_code: the consume-queue tag field, when the broker decides it (else derived).
    """

    __slots__ = (
        "body",
        "born_host8",
        "born_timestamp",
        "flag",
        "prepared_transaction_offset",
        "properties",
        "queue_id",
        "reconsume_times",
        "sys_flag",
        "tags_code",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: str = "",
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        tags_code: int | None = None,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.body = body
        self.properties = properties
        self.flag = flag
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host8 = _host_cache.get(born_host) or _host8(born_host)
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.tags_code = tags_code

    @property
    def born_host(self) -> tuple[str, int]:
        """The producer address."""
        from rocketpy.record import unpack_host

        return unpack_host(self.born_host8)

    @property
    def wait_store_msg_ok(self) -> bool:
        """False when the producer set ``WAIT=false`` (do not wait for the flush)."""
        return WAIT_FALSE_MARK not in self.properties


_host_cache: dict[tuple[str, int], bytes] = {}


def _host8(host: tuple[str, int]) -> bytes:
    b = _host_cache.get(host)
    if b is None:
        b = pack_host(host)
        if len(_host_cache) < 4096:
            _host_cache[host] = b
    return b
