"""Options of the ``rocketpy`` Spark data source: names, defaults and strict parsing.

Owns the option tables of reads and writes (Spark passes every value as a ``str`` in a
case-insensitive mapping), the "did you mean" check of unknown names, and the two parsed forms,
``ReadOptions`` and ``WriteOptions``. Both are frozen dataclasses of plain values: they travel in
pickles to Spark's Python workers. Nothing here talks to a broker; offsets specs are parsed in
``rocketpy.spark.offsets``. Every error is a ``SparkOptionError`` whose message names the option
and says what to write instead.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from rocketpy.addresses import AddressError, parse_namesrv_addrs
from rocketpy.errors import MQClientError
from rocketpy.topic import TOPIC_MAX_LENGTH, TOPIC_NAME_RE

#: Options a read understands (lower case -> documented spelling).
READ_OPTIONS = {
    n.lower(): n
    for n in (
        "namesrvAddr", "topic", "topics", "startingOffsets", "endingOffsets", "startingTimestamp",
        "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss", "pullBatchSize", "tags",
        "consumerGroup", "requestTimeoutMs",
    )
}  # fmt: skip
#: Options a write understands; ``checkpointLocation`` belongs to Spark's writeStream.
WRITE_OPTIONS = {
    n.lower(): n
    for n in (
        "namesrvAddr",
        "topic",
        "producerGroup",
        "requestTimeoutMs",
        "checkpointLocation",
        "transactional",
        "transactionTimeoutMs",
    )
}
#: Default age (ms) before the broker may check an uncommitted half message of a write.
DEFAULT_TRANSACTION_TIMEOUT_MS = 3_600_000

DEFAULT_PULL_BATCH_SIZE = 32
MAX_PULL_BATCH_SIZE = 1024
DEFAULT_TIMEOUT_MS = 10_000
#: Where a read starts when ``startingOffsets`` is not given (Spark's Kafka source defaults).
DEFAULT_BATCH_START = "earliest"
DEFAULT_STREAM_START = "latest"


class SparkOptionError(MQClientError, ValueError):
    """A data-source option that is unknown, missing or malformed."""


@dataclass(frozen=True)
class ReadOptions:
    """A read's parsed options (offset specs stay text: they need the topic's queues).

    Attributes:
        namesrv_addr: NameServer address list as given.
        topics: subscribed topics, sorted.
        starting_offsets / ending_offsets: "earliest", "latest" or per-queue JSON, unparsed.
        starting_timestamp_ms: resolve start offsets by store time instead (None: not given).
        max_offsets_per_trigger: stream rows per micro-batch over all queues (None: no limit).
        min_partitions: split queue ranges until there are at least this many partitions.
        fail_on_data_loss: offsets removed by cleanup fail the read (else skipped and logged).
        pull_batch_size: messages asked for per pull.
        tags: the tag expression pushed to the broker ("*" for all).
        consumer_group: stream progress is also committed to this group (None: not committed).
        timeout_s: budget of one broker or NameServer call.
    """

    namesrv_addr: str
    topics: tuple[str, ...]
    starting_offsets: str | None
    ending_offsets: str
    starting_timestamp_ms: int | None
    max_offsets_per_trigger: int | None
    min_partitions: int
    fail_on_data_loss: bool
    pull_batch_size: int
    tags: str
    consumer_group: str | None
    timeout_s: float


@dataclass(frozen=True)
class WriteOptions:
    """A write's parsed options.

    Attributes:
        namesrv_addr: NameServer address list as given.
        topic: the topic of rows without a ``topic`` column value (None: every row must name one).
        producer_group: the producer group of the writers.
        timeout_s: budget of one send (retries included).
        transactional: rows go out as half messages committed by the driver (``transactional``).
        transaction_timeout_s: age before the broker checks a write's uncommitted half messages
            (``transactionTimeoutMs``, sent as CHECK_IMMUNITY_TIME_IN_SECONDS): longer than the job.
    """

    namesrv_addr: str
    topic: str | None
    producer_group: str
    timeout_s: float
    transactional: bool = True
    transaction_timeout_s: int = DEFAULT_TRANSACTION_TIMEOUT_MS // 1000


def check_names(options: Mapping[str, str], known: Mapping[str, str], what: str) -> None:
    """Raise SparkOptionError for the first option name not in ``known``, suggesting the nearest."""
    for name in options:
        low = name.lower()
        if low in known or (low == "path" and what == "write"):
            continue
        near = difflib.get_close_matches(low, list(known), n=1, cutoff=0.6)
        hint = f"; did you mean {known[near[0]]!r}?" if near else ""
        raise SparkOptionError(
            f"unknown option {name!r} for a rocketpy {what}{hint}"
            f" (known: {', '.join(sorted(known.values()))})"
        )


def _get(options: Mapping[str, str], name: str) -> str | None:
    """The value of ``name`` whatever its case (Spark's mapping is case-insensitive; dicts are not)."""
    low = name.lower()
    for k, v in options.items():
        if k.lower() == low:
            return None if v is None else str(v).strip()
    return None


def _int(options: Mapping[str, str], name: str, default: int | None, low: int, high: int) -> int | None:
    raw = _get(options, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SparkOptionError(f"option {name}={raw!r} must be an integer") from None
    if not low <= value <= high:
        raise SparkOptionError(f"option {name}={value} must be between {low} and {high}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None or raw == "":
        return default
    if raw.lower() not in ("true", "false"):
        raise SparkOptionError(f"option {name}={raw!r} must be true or false")
    return raw.lower() == "true"


def _namesrv(options: Mapping[str, str]) -> str:
    addr = _get(options, "namesrvAddr") or os.environ.get("NAMESRV_ADDR", "")
    try:
        parse_namesrv_addrs(addr)
    except AddressError as e:
        raise SparkOptionError(f"option namesrvAddr: {e}") from None
    return addr


def _topic_names(raw: str, name: str) -> tuple[str, ...]:
    topics = sorted({t.strip() for t in raw.split(",") if t.strip()})
    if not topics:
        raise SparkOptionError(f"option {name} is empty: give a topic name (topics: a comma list)")
    for t in topics:
        if len(t.encode()) > TOPIC_MAX_LENGTH or not TOPIC_NAME_RE.match(t):
            raise SparkOptionError(
                f"option {name}: {t!r} is not a topic name (at most {TOPIC_MAX_LENGTH} bytes of letters,"
                " digits, '%', '|', '_' and '-')"
            )
    return tuple(topics)


def _timeout_s(options: Mapping[str, str]) -> float:
    ms = _int(options, "requestTimeoutMs", DEFAULT_TIMEOUT_MS, 100, 600_000)
    assert ms is not None
    return ms / 1000.0


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Check and parse the options of ``spark.read`` / ``spark.readStream``.

    Raises:
        SparkOptionError: an unknown name, a missing topic or address, a malformed value.
    """
    check_names(options, READ_OPTIONS, "read")
    topic, topics = _get(options, "topic"), _get(options, "topics")
    if (topic is None) == (topics is None):
        raise SparkOptionError("give exactly one of the options topic (one name) and topics (a comma list)")
    names = _topic_names(topic, "topic") if topic is not None else _topic_names(topics or "", "topics")
    starting = _get(options, "startingOffsets")
    starting_ts = _int(options, "startingTimestamp", None, 0, 2**63 - 1)
    if starting is not None and starting_ts is not None:
        raise SparkOptionError("give startingOffsets or startingTimestamp, not both")
    pull_batch = _int(options, "pullBatchSize", DEFAULT_PULL_BATCH_SIZE, 1, MAX_PULL_BATCH_SIZE)
    min_parts = _int(options, "minPartitions", 1, 1, 100_000)
    assert pull_batch is not None and min_parts is not None
    tags = _get(options, "tags") or "*"
    return ReadOptions(
        namesrv_addr=_namesrv(options),
        topics=names,
        starting_offsets=starting,
        ending_offsets=_get(options, "endingOffsets") or "latest",
        starting_timestamp_ms=starting_ts,
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", None, 1, 2**63 - 1),
        min_partitions=min_parts,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        pull_batch_size=pull_batch,
        tags=tags,
        consumer_group=_get(options, "consumerGroup") or None,
        timeout_s=_timeout_s(options),
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check and parse the options of ``df.write`` / ``df.writeStream``.

    Raises:
        SparkOptionError: an unknown name, a missing address, a malformed topic.
    """
    check_names(options, WRITE_OPTIONS, "write")
    if _get(options, "path"):
        raise SparkOptionError("a rocketpy write takes no path: use .option('topic', ...) and .save()")
    topic = _get(options, "topic")
    txn_ms = _int(options, "transactionTimeoutMs", DEFAULT_TRANSACTION_TIMEOUT_MS, 1000, 7 * 86_400_000)
    assert txn_ms is not None
    return WriteOptions(
        namesrv_addr=_namesrv(options),
        topic=_topic_names(topic, "topic")[0] if topic else None,
        producer_group=_get(options, "producerGroup") or "SPARK_WRITER",
        timeout_s=_timeout_s(options),
        transactional=_bool(options, "transactional", True),
        transaction_timeout_s=-(-txn_ms // 1000),  # whole seconds, rounded up
    )
