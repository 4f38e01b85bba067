"""Shared helpers of the store tests: tiny-file configs and message builders."""

from __future__ import annotations

from typing import Any

from rocketpy.broker.store import BrokerMessage, MessageStore
from rocketpy.config import StoreConfig
from rocketpy.message import properties_to_string
from rocketpy.record import decode_records


def tiny_config(root: str, **kw: Any) -> StoreConfig:
    """4 KiB commitlog files, 10-unit consume-queue files, a small index, fast intervals."""
    base: dict[str, Any] = dict(
        store_path_root_dir=root,
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=200,
        max_hash_slot_num=64,
        max_index_num=32,
        flush_interval_commit_log=20,
        flush_interval_consume_queue=50,
        clean_resource_interval=3_600_000,
        max_message_size=2048,
    )
    base.update(kw)
    return StoreConfig(**base)


def bmsg(topic: str, queue_id: int, body: bytes, tags: str | None = None, keys: str | None = None,
         uniq: str | None = None, **kw: Any) -> BrokerMessage:  # fmt: skip
    """A BrokerMessage with TAGS / KEYS / UNIQ_KEY properties."""
    props: dict[str, str] = {}
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = keys
    if uniq:
        props["UNIQ_KEY"] = uniq
    return BrokerMessage(topic, queue_id, body, properties=properties_to_string(props), **kw)


def read_all(store: MessageStore, topic: str, queue_id: int) -> list[bytes]:
    """Every body of a queue, from its min offset, in order."""
    out: list[bytes] = []
    off = store.get_min_offset_in_queue(topic, queue_id)
    while True:
        r = store.get_message("g", topic, queue_id, off, 32)
        if r.message_count == 0:
            return out
        out.extend(m.body for m in decode_records(r.join()))
        off = r.next_begin_offset
