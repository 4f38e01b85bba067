"""The broker's fast path for a plain pop: ``pop_now`` (compiled twin in ``_poppath.pyx``), and the
POP_MESSAGE answer both paths build (``pop_request``, ``pop_response``).

``PopMessageProcessor.pop`` first hands the request to ``pop_now``. It takes the common pop (every
SimpleConsumer's and POP-mode push consumer's) in one step, with exactly the answer and the changes
the full path (the header, ``PopService.pop_first``, ``pop_response``) makes for it: a header whose
fields already have their wire types and lie in their ranges; the broker and the topic readable,
the queue id in range, the group already known and allowed to consume, the POP retry topic's name
within bounds; no filter (no expression, or TAG ``*``) and no order flag. Anything else returns
None with nothing changed and goes through the full path, which holds the full semantics: header
errors, refusals, a group to auto-create, filters, orderly pops.

A pop it takes reads as ``PopService.pop_first`` does (``PopReader.read``, then the queues' commits,
the cks held back, the counts). One that found messages with no record to write first is answered
here; any other (records to write, or nothing found with a ``pollTime`` to wait) goes on with
``PopMessageProcessor.rest``, as the full path does after its first step (its wait starts after
this read, a few microseconds later than the full path's).

``tests/unit/test_pop_fast.py`` runs both twins and the full path on brokers fed the same requests
and compares the answers and every change they made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketpy._accel import twin
from rocketpy.broker.pop.checks import retry_topic_too_long
from rocketpy.broker.pop.types import PopRequest, PopResult, PopStatus

# The compiled twin counts a pop as BrokerStats.on_get does and reads these from here (_poppath.pyx).
from rocketpy.broker.stats import MAX_GROUP_COUNTERS, BrokerStats, _new_pair  # noqa: F401
from rocketpy.perm import PERM_READ
from rocketpy.protocol.codes import ResponseCode
from rocketpy.protocol.headers.offset import INT64_MAX, MAX_QUEUE_ID
from rocketpy.protocol.headers.pop import MAX_INVISIBLE_TIME_MS, MAX_POP_MSGS, PopMessageRequestHeader
from rocketpy.remoting.command import FLAG_RESPONSE, RemotingCommand  # noqa: F401  (the C twin reads it)
from rocketpy.remoting.processor import HandlerResult
from rocketpy.subscription import ExpressionType
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX, pop_retry_topic

if TYPE_CHECKING:
    from rocketpy.broker.processors.pop import PopMessageProcessor

__all__ = ["pop_now", "pop_request", "pop_response"]

_TAG = ExpressionType.TAG.value


def pop_request(h: PopMessageRequestHeader) -> PopRequest:
    """The service's request for a POP_MESSAGE header (any negative queue id is -1: any queue)."""
    return PopRequest(
        h.group,
        h.topic,
        max(h.queue_id, -1),
        h.max_msgs,
        h.invisible_time_ms,
        h.poll_time_ms,
        h.exp_type or _TAG,
        h.exp,
        h.order,
        h.init_mode,
    )


def _answer_header(result: PopResult) -> dict[str, object]:
    """``PopMessageResponseHeader(...).to_ext()`` of ``result``, built as a map directly (one per pop)."""
    ext: dict[str, object] = {
        "popTime": result.pop_time,
        "invisibleTime": result.invisible_ms,
        "reviveQid": result.revive_qid,
        "restNum": result.rest_num,
        "startOffsetInfo": result.start_offset_info(),
        "msgOffsetInfo": result.msg_offset_info(),
    }
    if result.order:
        ext["orderCountInfo"] = result.order_count_info()
    return ext


def pop_response(request: RemotingCommand, req: PopRequest, result: PopResult) -> RemotingCommand:
    """The POP_MESSAGE answer of ``result``."""
    ext = _answer_header(result)
    if result.status is PopStatus.FOUND:
        return RemotingCommand.response(request, ResponseCode.SUCCESS, "FOUND", ext, result.body())
    if result.status is PopStatus.POLLING_FULL:
        remark = (
            f"the broker holds its maximum of waiting POP requests (popPollingSize / maxPopPollingSize) "
            f"for group {req.group} on {req.topic}; retry later"
        )
        return RemotingCommand.response(request, ResponseCode.POLLING_FULL, remark, ext)
    remark = f"no message for group {req.group} in topic {req.topic} within its pollTime of {req.poll_ms} ms"
    return RemotingCommand.response(request, ResponseCode.POLLING_TIMEOUT, remark, ext)


def retry_topic_fits(group: str, topic: str) -> str | None:
    """The POP retry topic of ``group`` on ``topic`` when a pop may use it as it is (None: the
    topic is a retry topic itself, or the name would be too long: the full path's checks)."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    retry = pop_retry_topic(group, topic)
    return None if retry_topic_too_long(retry) else retry


@twin
def pop_now(processor: PopMessageProcessor, request: RemotingCommand) -> HandlerResult | None:
    """``processor.pop``'s answer to a pop the fast path takes (see the module docstring), else
    None with nothing changed."""
    ext = request.ext
    if type(ext) is not dict:
        return None
    get = ext.get
    group, topic, queue_id = get("consumerGroup"), get("topic"), get("queueId")
    max_msgs, invisible, poll = get("maxMsgNums"), get("invisibleTime"), get("pollTime", 0)
    born, init_mode, order = get("bornTime", 0), get("initMode", 0), get("order", False)
    exp_type, exp, attempt = get("expType"), get("exp"), get("attemptId")
    if (
        type(group) is not str or not group or type(topic) is not str or not topic
        or type(queue_id) is not int or type(max_msgs) is not int or type(invisible) is not int
        or type(poll) is not int or type(born) is not int or type(init_mode) is not int
        or order is not False
        or (exp_type is not None and type(exp_type) is not str)
        or (exp is not None and type(exp) is not str)
        or (attempt is not None and type(attempt) is not str)
        or not (queue_id <= MAX_QUEUE_ID and 1 <= max_msgs <= MAX_POP_MSGS)
        or not (1 <= invisible <= MAX_INVISIBLE_TIME_MS and 0 <= poll <= INT64_MAX and 0 <= init_mode <= 1)
    ):  # fmt: skip
        return None
    if exp and (exp != "*" or (exp_type and exp_type != _TAG)):
        return None  # a filter (or a TAG spelled otherwise): the full path
    service = processor.service
    checks = service.checks
    if not checks.broker_config.broker_permission & PERM_READ:
        return None
    tc = checks.topics.table.get(topic)
    if tc is None or not tc.perm & PERM_READ or queue_id >= tc.read_queue_nums:
        return None
    group_config = checks.groups.table.get(group)
    if group_config is None or not group_config.consume_enable or retry_topic_fits(group, topic) is None:
        return None
    req = PopRequest(group, topic, max(queue_id, -1), max_msgs, invisible, poll, exp_type or _TAG, exp,
                     False, init_mode)  # fmt: skip
    result, writes = service.read_once(req, None)
    if not writes and (result.status is PopStatus.FOUND or poll <= 0):
        return pop_response(request, req, result)
    return processor.rest(request, req, result, writes)


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.processors import _poppath

    same_signature(pop_now)(_poppath.pop_now)
    same_signature(_poppath.pop_now)(pop_now)
