"""Options of the ``rocketpy`` Spark data source: names, defaults and strict parsing.

Owns the option tables of reads and writes (Spark passes every value as a ``str`` in a
case-insensitive mapping), the "did you mean" check of unknown names, and the two parsed forms,
``ReadOptions`` and ``WriteOptions``. Both are frozen dataclasses of plain values: they travel in
pickles to Spark's Python workers. Nothing here talks to a broker; offsets specs are parsed in
``rocketpy.spark.offsets`` (here only checked for shape and topics, so bad JSON fails at once).
Every error is a ``SparkOptionError`` whose message names the option and says what to write
instead; no message holds an option's value when that option is a secret.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocketpy.addresses import AddressError, parse_namesrv_addrs
from rocketpy.filter.sql92 import compile_sql92
from rocketpy.filter.sql92_parse import SqlParseError
from rocketpy.spark.auth import Credentials
from rocketpy.spark.errors import SparkOptionError
from rocketpy.topic import TOPIC_MAX_LENGTH, TOPIC_NAME_RE

__all__ = ["ReadOptions", "SparkOptionError", "WriteOptions", "parse_read_options", "parse_write_options"]

#: Options a read understands (lower case -> documented spelling).
READ_OPTIONS = {
    n.lower(): n
    for n in (
        "namesrvAddr", "topic", "topics", "topicPattern", "startingOffsets", "endingOffsets",
        "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
        "maxTriggerDelay", "minPartitions", "failOnDataLoss", "pullBatchSize", "tags", "sqlFilter",
        "consumerGroup", "requestTimeoutMs", "accessKey", "secretKey",
    )
}  # fmt: skip
#: Options a write understands; ``checkpointLocation`` belongs to Spark's writeStream.
WRITE_OPTIONS = {
    n.lower(): n
    for n in (
        "namesrvAddr", "topic", "producerGroup", "requestTimeoutMs", "checkpointLocation",
        "transactional", "transactionTimeoutMs", "accessKey", "secretKey",
    )
}  # fmt: skip
#: Default age (ms) before the broker may check an uncommitted half message of a write.
DEFAULT_TRANSACTION_TIMEOUT_MS = 3_600_000

DEFAULT_PULL_BATCH_SIZE = 256
MAX_PULL_BATCH_SIZE = 1024
DEFAULT_TIMEOUT_MS = 10_000
#: Where a read starts when no starting option is given (Spark's Kafka source defaults).
DEFAULT_BATCH_START = "earliest"
DEFAULT_STREAM_START = "latest"
#: ``maxTriggerDelay`` when not given (Kafka's default, 15 minutes).
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000
#: What ``startingOffsetsByTimestampStrategy`` may say (Kafka's words).
TIMESTAMP_STRATEGIES = ("error", "latest")
#: Options that fix where a read starts / ends; at most one of each group.
STARTING_OPTIONS = ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp")
ENDING_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")

_DURATION = re.compile(r"^(\d+)\s*(us|ms|s|sec|m|min|h|d)?$", re.IGNORECASE)
_UNIT_MS = {"us": 0.001, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
            "d": 86_400_000}  # fmt: skip


@dataclass(frozen=True)
class ReadOptions:
    """A read's parsed options (offset and timestamp specs stay text: they need the topics' queues).

    Attributes:
        namesrv_addr: NameServer address list as given.
        topics: subscribed topics, sorted (empty with ``topic_pattern``).
        topic_pattern: a regular expression over the NameServer's topic list (None: ``topics``).
        starting_offsets: "earliest", "latest" or per-queue JSON, unparsed (None: not given).
        starting_timestamp_ms: start every queue at the first message stored at or after it.
        starting_offsets_by_timestamp: per-queue start times as JSON (``{"T": {"broker-a:0": ms}}``).
        timestamp_strategy: a starting time with no message at or after it: "error" or "latest".
        ending_offsets: batch end, "latest" or per-queue JSON (None: not given, i.e. latest).
        ending_timestamp_ms / ending_offsets_by_timestamp: batch end by store time (exclusive).
        max_offsets_per_trigger: stream rows per micro-batch over all queues (None: no limit).
        min_offsets_per_trigger: a micro-batch waits for this many new rows (None: no wait) ...
        max_trigger_delay_ms: ... but no longer than this.
        min_partitions: split queue ranges until there are at least this many partitions.
        fail_on_data_loss: offsets removed by cleanup fail the read (else skipped and logged).
        pull_batch_size: messages asked for per pull.
        tags: the tag expression pushed to the broker ("*" for all).
        sql_filter: an SQL92 property expression pushed to the broker instead (None: tags).
        consumer_group: stream progress is also committed to this group (None: not committed).
        timeout_s: budget of one broker or NameServer call.
        credentials: the ACL account (options; the environment fills the rest where it is used).
    """

    namesrv_addr: str
    topics: tuple[str, ...]
    starting_offsets: str | None
    ending_offsets: str | None
    starting_timestamp_ms: int | None
    max_offsets_per_trigger: int | None
    min_partitions: int
    fail_on_data_loss: bool
    pull_batch_size: int
    tags: str
    consumer_group: str | None
    timeout_s: float
    topic_pattern: str | None = None
    starting_offsets_by_timestamp: str | None = None
    timestamp_strategy: str = "error"
    ending_timestamp_ms: int | None = None
    ending_offsets_by_timestamp: str | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    sql_filter: str | None = None
    credentials: Credentials = field(default_factory=Credentials)

    def reads_topic(self, topic: str) -> bool:
        """True when ``topic`` is one this read subscribes to (named, or matching the pattern)."""
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return topic in self.topics

    @property
    def ending_given(self) -> bool:
        """True when one of the ending options was given (batch reads only)."""
        return not (
            self.ending_offsets is None
            and self.ending_timestamp_ms is None
            and self.ending_offsets_by_timestamp is None
        )

    @property
    def filtered(self) -> bool:
        """True when the broker filters the messages (tags or sqlFilter): queue offsets are sparse."""
        return self.sql_filter is not None or self.tags.strip() not in ("", "*")


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
        credentials: the ACL account (options; the environment fills the rest where it is used).
    """

    namesrv_addr: str
    topic: str | None
    producer_group: str
    timeout_s: float
    transactional: bool = True
    transaction_timeout_s: int = DEFAULT_TRANSACTION_TIMEOUT_MS // 1000
    credentials: Credentials = field(default_factory=Credentials)


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


def _duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    """A time span such as ``15m``, ``30s``, ``500ms`` or ``1h`` (a bare number is milliseconds)."""
    raw = _get(options, name)
    if raw is None or raw == "":
        return default
    m = _DURATION.match(raw)
    if m is None:
        raise SparkOptionError(f"option {name}={raw!r} must be a duration such as 15m, 30s or 500ms")
    return int(int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()])


def _one_of(options: Mapping[str, str], names: tuple[str, ...]) -> None:
    given = [n for n in names if _get(options, n) not in (None, "")]
    if len(given) > 1:
        raise SparkOptionError(
            f"give at most one of the options {', '.join(names)} (given: {', '.join(given)})"
        )


def _subscription(options: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    """``(topics, topicPattern)``: exactly one of topic, topics and topicPattern."""
    topic, topics, pattern = (_get(options, n) for n in ("topic", "topics", "topicPattern"))
    if sum(v is not None for v in (topic, topics, pattern)) != 1:
        raise SparkOptionError(
            "give exactly one of the options topic (one name), topics (a comma list) and topicPattern"
            " (a regular expression over the topic names)"
        )
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as e:
            raise SparkOptionError(
                f"option topicPattern: {pattern!r} is not a regular expression ({e})"
            ) from None
        return (), pattern
    return (_topic_names(topic, "topic") if topic is not None else _topic_names(topics or "", "topics")), None


def _check_json_topics(options: Mapping[str, str], opts: ReadOptions) -> None:
    """Per-queue JSON options are well-formed and name only topics the read subscribes to."""
    from rocketpy.spark.offsets import parse_offsets_json

    for name, minimum in (
        ("startingOffsets", -2),
        ("endingOffsets", -2),
        ("startingOffsetsByTimestamp", 0),
        ("endingOffsetsByTimestamp", 0),
    ):
        raw = _get(options, name)
        if raw is None or raw.lower() in ("earliest", "latest") or (minimum == 0 and raw == ""):
            continue
        queues = parse_offsets_json(raw, name, minimum)
        unknown = sorted({q[0] for q in queues if not opts.reads_topic(q[0])})
        if unknown:
            read = f"topicPattern {opts.topic_pattern!r}" if opts.topic_pattern else "the read's topics"
            raise SparkOptionError(
                f"option {name} names topics that {read} does not cover: {', '.join(unknown)}"
            )


def _filter(options: Mapping[str, str]) -> tuple[str, str | None]:
    """``(tags, sqlFilter)``: a tag expression, or an SQL92 one checked here (not both)."""
    tags = _get(options, "tags") or "*"
    sql = _get(options, "sqlFilter") or None
    if sql is not None:
        if tags.strip() not in ("", "*"):
            raise SparkOptionError(
                "give the option tags or sqlFilter, not both"
                " (an SQL92 filter can test tags: TAGS IN ('a', 'b'))"
            )
        try:
            compile_sql92(sql)
        except SqlParseError as e:
            raise SparkOptionError(f"option sqlFilter: {e}") from None
    return tags, sql


def _pacing(options: Mapping[str, str]) -> tuple[int | None, int | None, int]:
    """``(maxOffsetsPerTrigger, minOffsetsPerTrigger, maxTriggerDelay ms)``."""
    high = _int(options, "maxOffsetsPerTrigger", None, 1, 2**63 - 1)
    low = _int(options, "minOffsetsPerTrigger", None, 1, 2**63 - 1)
    delay = _duration_ms(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS)
    if low is None and _get(options, "maxTriggerDelay"):
        raise SparkOptionError(
            "option maxTriggerDelay bounds the wait of minOffsetsPerTrigger: give that too"
        )
    if low is not None and high is not None and low > high:
        raise SparkOptionError(f"option minOffsetsPerTrigger={low} is above maxOffsetsPerTrigger={high}")
    return high, low, delay


def _strategy(options: Mapping[str, str]) -> str:
    raw = (_get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
    if raw not in TIMESTAMP_STRATEGIES:
        raise SparkOptionError(
            f"option startingOffsetsByTimestampStrategy={raw!r} must be one of"
            f" {', '.join(TIMESTAMP_STRATEGIES)}"
        )
    return raw


def _credentials(options: Mapping[str, str]) -> Credentials:
    """The options' ACL account as given (values unstripped; never formatted into a message)."""
    low = {str(k).lower(): v for k, v in options.items()}
    access, secret = low.get("accesskey") or None, low.get("secretkey") or None
    return Credentials(None if access is None else str(access), None if secret is None else str(secret))


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Check and parse the options of ``spark.read`` / ``spark.readStream``.

    Raises:
        SparkOptionError: an unknown name, a missing topic or address, a malformed value, options
            that exclude each other.
    """
    check_names(options, READ_OPTIONS, "read")
    topics, pattern = _subscription(options)
    _one_of(options, STARTING_OPTIONS)
    _one_of(options, ENDING_OPTIONS)
    pull_batch = _int(options, "pullBatchSize", DEFAULT_PULL_BATCH_SIZE, 1, MAX_PULL_BATCH_SIZE)
    min_parts = _int(options, "minPartitions", 1, 1, 100_000)
    assert pull_batch is not None and min_parts is not None
    tags, sql = _filter(options)
    high, low, delay = _pacing(options)
    opts = ReadOptions(
        namesrv_addr=_namesrv(options),
        topics=topics,
        topic_pattern=pattern,
        starting_offsets=_get(options, "startingOffsets") or None,
        starting_timestamp_ms=_int(options, "startingTimestamp", None, 0, 2**63 - 1),
        starting_offsets_by_timestamp=_get(options, "startingOffsetsByTimestamp") or None,
        timestamp_strategy=_strategy(options),
        ending_offsets=_get(options, "endingOffsets") or None,
        ending_timestamp_ms=_int(options, "endingTimestamp", None, 0, 2**63 - 1),
        ending_offsets_by_timestamp=_get(options, "endingOffsetsByTimestamp") or None,
        max_offsets_per_trigger=high,
        min_offsets_per_trigger=low,
        max_trigger_delay_ms=delay,
        min_partitions=min_parts,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        pull_batch_size=pull_batch,
        tags=tags,
        sql_filter=sql,
        consumer_group=_get(options, "consumerGroup") or None,
        timeout_s=_timeout_s(options),
        credentials=_credentials(options),
    )
    _check_json_topics(options, opts)
    return opts


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
        credentials=_credentials(options),
    )
