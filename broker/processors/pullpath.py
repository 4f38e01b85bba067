"""The broker's fast path for a pull answered at once: ``pull_now`` (compiled twin in ``_pullpath.pyx``).

``PullMessageProcessor.handle`` first hands the request to ``pull_now``. It answers the common case
in one step, with exactly the response and the changes ``PullMessageProcessor.process`` makes for
it: a header whose fields already have their wire types and lie in their ranges; the broker, the
group (already known) and the topic readable and the queue id in range; a filter that is none, a
match-all or a TAG one (the request's own, ``expressionType`` ``TAG``, already in the processor's
filter cache, or the group's heartbeat subscription of the topic); and the store's one-view read
(``reads.get_now``) finding messages whose tag codes all match. Anything else returns None with
nothing changed and goes through ``process``, which holds the full semantics: header errors,
refusals, SQL92 and parse failures, a filter seen for the first time, an empty or missing queue,
long polling, offsets out of range, records split over files, filtered scans.

The answer's parts and side effects, in ``process``'s order: the store's read count, the commit
offset (``FLAG_COMMIT_OFFSET``), the suggested broker id, the body (the records back to back), the
view released, the get statistics, the tracer.

``tests/unit/test_pull_fast.py`` runs both twins and ``process`` on the same store and tables and
compares the answers and every change they made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from rocketpy._accel import twin

# The compiled twin counts a pull as BrokerStats.on_get does and reads these from here (_pullpath.pyx).
from rocketpy.broker.stats import MAX_GROUP_COUNTERS, BrokerStats, _new_pair  # noqa: F401
from rocketpy.broker.store import MessageStore, reads
from rocketpy.broker.store.consume_queue import units_struct
from rocketpy.broker.subscription import TagMessageFilter
from rocketpy.perm import PERM_READ
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.offset import INT64_MAX
from rocketpy.remoting.command import FLAG_RESPONSE, RemotingCommand
from rocketpy.subscription import ExpressionType
from rocketpy.sysflag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION

if TYPE_CHECKING:
    from rocketpy.broker.processors.pull import PullMessageProcessor
    from rocketpy.remoting.connection import Channel

__all__ = ["MAX_PULL_MSGS", "pull_now"]

#: The most messages one pull answers, whatever it asks.
MAX_PULL_MSGS = 1024
_MASK32 = 0xFFFFFFFF
_TAG = ExpressionType.TAG.value
_SUCCESS = ResponseCode.SUCCESS


def _codes(
    processor: PullMessageProcessor, group: str, topic: str, sys_flag: int, sub: str, kind: str
) -> frozenset[int] | Literal[False] | None:
    """The 32-bit tag codes the pull's filter matches (None: every message), or False when the
    filter is not one the fast path takes as it is. Both twins of ``pull_now`` call it."""
    if sys_flag & FLAG_SUBSCRIPTION:
        if kind != _TAG:
            return False
        cached = processor._filters.get((topic, sub, kind))
        if type(cached) is not TagMessageFilter:  # unseen, a parse error
            return False
        return None if cached.matches_all else cached.tag_codes
    heartbeat = processor.consumer_manager.find_subscription(group, topic)
    if heartbeat is None or heartbeat.expression_type is not ExpressionType.TAG:
        return False
    flt = TagMessageFilter(heartbeat)  # what ``process`` filters by (``message_filter_of``)
    return None if flt.matches_all else flt.tag_codes


@twin
def pull_now(
    processor: PullMessageProcessor, channel: Channel, request: RemotingCommand
) -> RemotingCommand | None:
    """``processor.process(channel, request, allow_suspend=True)`` of a pull the fast path takes
    (see the module docstring), else None with nothing changed."""
    ext = request.ext
    if type(ext) is not dict:
        return None
    get = ext.get
    group, topic, queue_id = get("consumerGroup"), get("topic"), get("queueId")
    offset, max_msgs, sys_flag = get("queueOffset"), get("maxMsgNums"), get("sysFlag", 0)
    commit, suspend, max_msg_bytes = (
        get("commitOffset", 0),
        get("suspendTimeoutMillis", 0),
        get("maxMsgBytes"),
    )
    sub, sub_version, kind = get("subscription", "*"), get("subVersion", 0), get("expressionType", _TAG)
    if (
        type(group) is not str or type(topic) is not str or type(queue_id) is not int
        or type(offset) is not int or type(max_msgs) is not int or type(sys_flag) is not int
        or type(commit) is not int or type(suspend) is not int or type(sub) is not str
        or type(sub_version) is not int or type(kind) is not str
        or (max_msg_bytes is not None and type(max_msg_bytes) is not int)
        or not (0 <= offset <= INT64_MAX and 1 <= max_msgs <= 1 << 31)
        or not (commit <= INT64_MAX and 0 <= suspend <= INT64_MAX)
    ):  # fmt: skip
        return None
    guard = processor.guard
    if not processor.broker_config.broker_permission & PERM_READ:
        return None
    group_config = guard.subscription_groups.table.get(group)
    if group_config is None or not group_config.consume_enable:
        return None
    tc = guard.topic_config.table.get(topic)
    if tc is None or not tc.perm & PERM_READ or not 0 <= queue_id < tc.read_queue_nums:
        return None
    codes = _codes(processor, group, topic, sys_flag, sub, kind)
    store = processor.store
    if codes is False or type(store) is not MessageStore:
        return None
    sc = processor.store_config
    count = min(max_msgs, MAX_PULL_MSGS, sc.max_transfer_count_on_message_in_memory)
    max_bytes = sc.max_transfer_bytes_on_message_in_memory
    if max_msg_bytes and max_msg_bytes > 0:
        max_bytes = min(max_bytes, max_msg_bytes)
    cq = store.dispatcher.cqs.get((topic, queue_id))
    result = reads.get_now(store.commitlog, cq, offset, count, max_bytes)
    if result is None:
        return None
    n = result.message_count
    if codes is not None:  # every unit read must match (as get_message's run of a tag filter)
        assert cq is not None
        raw, read = cq.read_units(offset, n)
        if read != n or not all(c & _MASK32 in codes for c in units_struct(n).unpack_from(raw)[2::3]):
            result.release()
            return None
    store.stats.get_total += n
    if sys_flag & FLAG_COMMIT_OFFSET and commit >= 0:
        processor.offsets.commit_offset(group, topic, queue_id, commit)
    following = result.next_begin_offset
    suggest = processor.suggest_broker_id
    answer = {
        "suggestWhichBrokerId": suggest(topic, queue_id, following) if suggest is not None else 0,
        "nextBeginOffset": following,
        "minOffset": result.min_offset,
        "maxOffset": result.max_offset,
    }
    body = bytes(result.buffers[0])
    result.release()
    processor.stats.on_get(group, topic, n, len(body))
    if processor.tracer is not None:
        processor.tracer.on_delivered(group, topic, body, channel.remote_addr)
    return RemotingCommand(
        _SUCCESS, request.opaque, FLAG_RESPONSE, None, answer, body, request.serialize_type
    )


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.processors import _pullpath

    same_signature(pull_now)(_pullpath.pull_now)
    same_signature(_pullpath.pull_now)(pull_now)
