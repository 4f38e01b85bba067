"""Filtering on the broker: the pull subscription of a read, its plan-time check, and tag pushdown.

Owns what a read asks the broker to filter: a TAG expression (option ``tags``) or an SQL92 property
expression (option ``sqlFilter``), sent as the subscription of every pull, so messages that do not
match never leave the broker. ``probe_reads`` pulls once per topic and broker at plan time, so an
SQL92 filter on a broker with ``enablePropertyFilter=false`` (or one the broker cannot parse), or an
account that may not read the topic, fails the plan naming the option instead of failing tasks.

``push_tag_filters`` is the batch reader's ``pushFilters``: Spark 4.1+ hands a Python data source
the conjuncts of a query's WHERE over its columns (batch reads only, when
``spark.sql.python.filterPushdown.enabled`` is true) and does **not** evaluate again the ones the
source accepts. Accepted: ``tags = 'x'``, ``tags <=> 'x'`` and ``tags IN ('x', ...)`` with plain tag
values; they narrow the read's tag set (the broker filters by tag hash, the reader re-checks tags
exactly, so the result is exact). Everything else goes back to Spark. Spark 4.3 keeps the read
planned with pushed filters on the DataFrame's data source and reuses it for a later query on that
DataFrame that pushes no filter (it calls ``pushFilters`` again only for queries with filters), so
such a query would read the pushed tags only: pushdown is opt-in (``register(spark, pushdown=True)``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Sequence
from typing import Any

from rocketpy.errors import MQBrokerError
from rocketpy.filter.tags import split_tag_expression
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.pull import PullMessageRequestHeader
from rocketpy.spark.brokers import MAX_CONCURRENT_CALLS, BrokerSession
from rocketpy.spark.offsets import Queue
from rocketpy.spark.options import ReadOptions, SparkOptionError
from rocketpy.subscription import ExpressionType
from rocketpy.subscription_group import TOOLS_CONSUMER
from rocketpy.sysflag import FLAG_SUBSCRIPTION

ALL = "*"


def subscription_of(opts: ReadOptions) -> tuple[str, str]:
    """``(expression, expressionType)`` of the read's pulls."""
    if opts.sql_filter is not None:
        return opts.sql_filter, ExpressionType.SQL92.value
    tags = opts.tags.strip()
    return (tags if tags else ALL), ExpressionType.TAG.value


def pull_header(opts: ReadOptions, q: Queue, offset: int, count: int) -> PullMessageRequestHeader:
    """The header of one pull of ``q`` with the read's subscription (a filtered one when set)."""
    expression, kind = subscription_of(opts)
    return PullMessageRequestHeader(
        opts.consumer_group or TOOLS_CONSUMER, q[0], q[2], offset, count,
        sys_flag=FLAG_SUBSCRIPTION, subscription=expression, expression_type=kind,
    )  # fmt: skip


def probe_reads(session: BrokerSession, opts: ReadOptions, queues: Sequence[Queue]) -> None:
    """One pull (of at most one message, at the queue's end) per topic and broker of the read, so
    what would fail every task fails the plan instead, naming the option: an account without SUB
    on the topic or the group (offset calls need only a valid signature), an SQL92 filter on a
    broker with ``enablePropertyFilter=false``, or one the broker cannot parse.

    Raises:
        SparkAccessError: the broker refused the account (names accessKey/secretKey).
        SparkOptionError: the broker refused the filter (names sqlFilter, the broker, its remark).
    """
    first: dict[tuple[str, str], Queue] = {}
    for q in queues:
        first.setdefault((q[0], q[1]), q)

    async def probe(addr: str, q: Queue) -> None:
        max_offset = await session.api.get_max_offset(addr, q[0], q[2], session.timeout_s)
        ext = pull_header(opts, q, max_offset, 1).to_ext()
        try:
            await session.api.pull_message(addr, ext, session.timeout_s, raw=True)
        except MQBrokerError as e:
            refused = (ResponseCode.SYSTEM_ERROR, ResponseCode.SUBSCRIPTION_PARSE_FAILED)
            if opts.sql_filter is not None and e.code in refused:
                raise SparkOptionError(
                    f"option sqlFilter: broker {q[1]} ({addr}) refused it: {e.remark}"
                ) from None
            raise

    async def go() -> None:
        limit = asyncio.Semaphore(MAX_CONCURRENT_CALLS)

        async def one(q: Queue) -> None:
            async with limit:
                await session.on_member(q, functools.partial(probe, q=q))

        await asyncio.gather(*(one(q) for q in first.values()))

    session.run(go)


def _tags_of(value: Any) -> frozenset[str] | None:
    """The tag set a pushed value stands for, or None when it cannot be a tag expression exactly."""
    values = value if isinstance(value, tuple | list) else (value,)
    out = set()
    for v in values:
        if not isinstance(v, str) or not v or v != v.strip() or "||" in v or v == ALL:
            return None
        out.add(v)
    return frozenset(out)


def push_tag_filters(opts: ReadOptions, filters: Iterable[Any]) -> tuple[frozenset[str] | None, list[Any]]:
    """Spark's pushed conjuncts -> ``(the tags a row must have, None: any; the filters Spark keeps)``.

    An empty set means no row can match.
    """
    from pyspark.sql.datasource import EqualNullSafe, EqualTo, In

    allowed: frozenset[str] | None = None
    if opts.tags.strip() not in ("", ALL):
        allowed = frozenset(split_tag_expression(opts.tags))
    kept: list[Any] = []
    for f in filters:
        tags = None
        on_tags = isinstance(f, EqualTo | EqualNullSafe | In) and f.attribute == ("tags",)
        if on_tags and opts.sql_filter is None:
            tags = _tags_of(f.value)
        if tags is None:
            kept.append(f)
        else:
            allowed = tags if allowed is None else allowed & tags
    return allowed, kept
