"""The broker's fast path for the plain single-message sends of one read (``handle_run`` of
``SendMessageProcessor``).

``run_plain`` is ``handle_run`` for a run whose requests are all such sends (a sequential
producer's lone send, a pipelining one's run): the steps below in one call, the group puts and
their answers included. Three steps of the common case, each with a compiled twin in
``_sendrun.pyx`` too:

- ``plain_messages``: which requests of a read are plain single SEND_MESSAGE_V2 sends the fast path
  takes as they are (a typical V2 header, a known writable topic with the queue in range, no batch,
  properties that ask for no later delivery and no transaction, a body and properties within the
  limits), and their ``BrokerMessage``. Every other request gets None and goes the general way
  (``SendMessageProcessor._run_one``), which holds the full semantics; so does every request when
  the processor's per-run conditions do not hold (``SendMessageProcessor._plain``).
- ``group_plain``: those messages added to their queue's open group of the run, in arrival order,
  up to the next request that is not plain (``handle_run`` answers that one the general way).
- ``stored_answers``: the SUCCESS answers of a group of such sends stored by one append (PUT_OK),
  each with its own record's offset msg id and queue offset, written in place into the run's
  answer list; returns the bodies' bytes for the put statistics.

Both give exactly what the general path gives for the same requests (``tests/unit/test_speedups.py``
compares the twins; ``tests/unit/test_broker_send_run.py`` the answers).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from rocketpy._accel import twin
from rocketpy.broker.stats import BrokerStats, _new_pair  # noqa: F401  # read by _sendrun.pyx (on_put)
from rocketpy.broker.store import BrokerMessage, PutMessageResult
from rocketpy.broker.store.message import WAIT_FALSE_MARK, _host8
from rocketpy.message_props import TRAN_MARK, UNIQ_SEP, get_property
from rocketpy.perm import PERM_WRITE
from rocketpy.protocol.codes import RequestCode
from rocketpy.record import MAX_PROPERTIES_BYTES
from rocketpy.remoting.command import FLAG_RESPONSE, RemotingCommand
from rocketpy.route import TopicConfig

if TYPE_CHECKING:
    from rocketpy.broker.processors.send import SendMessageProcessor
    from rocketpy.remoting.connection import Channel

__all__ = ["MAX_RUN_GROUP", "SHORT_PROPS", "group_plain", "plain_messages", "run_plain", "stored_answers"]

#: Most messages of one read stored by one append (a read holds a few hundred 1 KiB sends at most).
MAX_RUN_GROUP = 256

#: Properties of at most this many characters cannot exceed ``MAX_PROPERTIES_BYTES`` in UTF-8.
SHORT_PROPS = MAX_PROPERTIES_BYTES // 4
_V2 = int(RequestCode.SEND_MESSAGE_V2)
_INT32 = (-(1 << 31), (1 << 31) - 1)
_UNSEEN = ("unseen", "")


def _typical(ext: Any) -> tuple[str, int, str, int, int, int, int] | None:
    """(topic, queue id, properties, sys flag, born timestamp, flag, reconsume times) of a V2 header
    that ``read_typical_v2`` reads as it is with no batch flag, else None."""
    if type(ext) is not dict:
        return None
    get = ext.get
    topic, queue_id, props = get("b"), get("e"), get("i", "")
    sys_flag, born, flag, reconsume = get("f", 0), get("g", 0), get("h", 0), get("j", 0)
    if (
        type(topic) is not str or type(queue_id) is not int or type(props) is not str
        or type(sys_flag) is not int or type(born) is not int or type(flag) is not int
        or type(reconsume) is not int or get("m", False) is not False
        or type(get("a", "")) is not str or type(get("c", "")) is not str or type(get("d", 4)) is not int
        or type(get("k", False)) is not bool or type(get("n", "")) is not str
    ):  # fmt: skip
        return None
    lo, hi = _INT32
    if not (lo <= sys_flag <= hi and lo <= flag <= hi and lo <= reconsume <= hi):
        return None
    return topic, queue_id, props, sys_flag, born, flag, reconsume


@twin
def plain_messages(
    requests: list[RemotingCommand],
    topic_config: Callable[[str], TopicConfig | None],
    problems: dict[str, tuple[int, str] | None],
    born: tuple[str, int],
    max_body: int,
) -> list[BrokerMessage | None]:
    """For each request: its message when it is a plain single send the fast path takes, else None.

    ``topic_config`` looks a topic's config up; ``problems`` holds the topics already known to be
    sendable by name (None); ``born`` is the producer's stored address; ``max_body`` the broker's
    maxMessageSize. The broker's write permission, the send queue and the gates are the caller's.
    """
    out: list[BrokerMessage | None] = []
    host8 = _host8(born)
    for request in requests:
        fields = _typical(request.ext) if request.code == _V2 else None
        if fields is None:
            out.append(None)
            continue
        topic, queue_id, props, sys_flag, born_ts, flag, reconsume = fields
        body = request.body
        tc = topic_config(topic) if problems.get(topic, _UNSEEN) is None else None
        if (
            tc is None
            or not tc.perm & PERM_WRITE
            or queue_id < 0
            or not (queue_id < tc.write_queue_nums or queue_id < tc.read_queue_nums)
            or len(body) > max_body
            or len(props) > SHORT_PROPS
            or "DELAY" in props
            or "TIMER_" in props
            or TRAN_MARK in props
        ):
            out.append(None)
            continue
        m = BrokerMessage.__new__(BrokerMessage)
        m.topic, m.queue_id, m.properties = topic, queue_id, props
        m.body = body  # type: ignore[assignment]  # the request's body as it came, as _run_one stores it
        m.flag, m.sys_flag, m.born_timestamp, m.born_host8 = flag, sys_flag, born_ts, host8
        m.reconsume_times, m.prepared_transaction_offset, m.tags_code = reconsume, 0, None
        out.append(m)
    return out


#: An open group of a run: (topic, queue id, whether its producer waits for the flush) -> the
#: indexes of its members' entries in the run's answer list.
Groups = dict[tuple[str, int, bool], list[int]]


@twin
def group_plain(
    requests: list[RemotingCommand],
    plain: list[BrokerMessage | None],
    start: int,
    out: list[Any],
    groups: Groups,
    max_group: int,
    put_full: Callable[[list[int]], None],
) -> int:
    """Add the plain sends from ``requests[start]`` on to their open group in ``groups`` (an entry
    ``(request, message, queue id, properties)`` each, appended to ``out``), until a request that
    is not plain (``plain[i]`` None); returns its index (the requests' count when there is none). A
    group that reaches ``max_group`` members leaves ``groups`` for ``put_full`` at once."""
    i, n = start, len(requests)
    if start < 0 or len(plain) < n:
        raise IndexError("group_plain: a message (or None) for each request from start on")
    while i < n:
        msg = plain[i]
        if msg is None:
            return i
        key = (msg.topic, msg.queue_id, WAIT_FALSE_MARK not in msg.properties)
        members = groups.get(key)
        if members is None:
            members = groups[key] = []
        members.append(len(out))
        out.append((requests[i], msg, msg.queue_id, msg.properties))
        if len(members) >= max_group:
            put_full(groups.pop(key))
        i += 1
    return n


@twin
def stored_answers(out: list[Any], members: list[int], result: PutMessageResult, host_hex: str) -> int:
    """Answer the sends at ``members`` of ``out`` (each ``(request, message, queue id, properties)``)
    stored by the one append ``result`` (PUT_OK, a record per member, in order): each becomes its
    SUCCESS response in place. ``host_hex`` is the offset msg id's host part. Returns the bodies'
    bytes."""
    sizes = result.sizes
    assert sizes is not None and len(sizes) == len(members)
    offset, queue_offset = result.wrote_offset, result.queue_offset
    total = 0
    for k, i in enumerate(members):
        request, _msg, queue_id, props = out[i]
        ext = {"msgId": f"{host_hex}{offset:016X}", "queueOffset": queue_offset + k, "queueId": queue_id}
        uniq = get_property(props, UNIQ_SEP)
        if uniq:
            ext["transactionId"] = uniq
        out[i] = RemotingCommand(0, request.opaque, FLAG_RESPONSE, None, ext, b"", request.serialize_type)
        total += len(request.body)
        offset += sizes[k]
    return total


@twin
def run_plain(
    processor: SendMessageProcessor, channel: Channel, requests: list[RemotingCommand]
) -> list[Any] | None:
    """``processor.handle_run``'s answers to ``requests`` when every one is a plain send the fast
    path takes (``plain_messages``) and the run's conditions hold (``SendMessageProcessor._plain``):
    each queue's group stored by one append (``_put_group``) and answered; None, with nothing done,
    otherwise (``handle_run`` goes on the general way)."""
    for request in requests:
        if request.code != _V2:
            return None
    plain = processor._plain(channel, requests)
    if plain is None or any(m is None for m in plain):
        return None
    out: list[Any] = []
    groups: Groups = {}
    group_plain(requests, plain, 0, out, groups, MAX_RUN_GROUP, partial(processor._put_group, out))
    processor._put_groups(out, groups)
    return out


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.broker.processors import _sendrun

    same_signature(plain_messages)(_sendrun.plain_messages)
    same_signature(group_plain)(_sendrun.group_plain)
    same_signature(_sendrun.group_plain)(group_plain)
    same_signature(_sendrun.plain_messages)(plain_messages)
    same_signature(stored_answers)(_sendrun.stored_answers)
    same_signature(_sendrun.stored_answers)(stored_answers)
    same_signature(run_plain)(_sendrun.run_plain)
    same_signature(_sendrun.run_plain)(run_plain)
