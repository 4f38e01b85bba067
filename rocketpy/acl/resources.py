"""What a request needs: the resources and permissions of each request code (``PlainAccessValidator.parse``).

A need is ``(kind, name, perm)`` with kind ``"topic"`` or ``"group"``. A retry topic
``%RETRY%group`` stands for its group (RocketMQ keys groups by their retry topic). Codes not listed
need only a valid signature; ``ADMIN_CODES`` need an ``admin: true`` account. A field the request
lacks adds no need: the handler answers the malformed request itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketpy.acl.permission import PUB, SUB
from rocketpy.remoting.body import decode_body_map
from rocketpy.remoting.codes import RequestCode as C
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.headers import HeaderError
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX

Need = tuple[str, str, int]

#: The NameServer checks only these (its reads stay open, as RocketMQ's NameServer has no ACL).
NAMESRV_CHECKED_CODES = frozenset(
    int(c)
    for c in (
        C.REGISTER_BROKER,
        C.UNREGISTER_BROKER,
        C.DELETE_TOPIC_IN_NAMESRV,
        C.WIPE_WRITE_PERM_OF_BROKER,
        C.ADD_WRITE_PERM_OF_BROKER,
        C.PUT_KV_CONFIG,
        C.DELETE_KV_CONFIG,
        C.UPDATE_NAMESRV_CONFIG,
    )
)

#: Codes that change topics, groups, offsets of others or server config: admin accounts only.
#: RocketMQ 4.x's ``Permission.ADMIN_CODE`` plus offset resets, file cleaning and NameServer writes.
ADMIN_CODES = NAMESRV_CHECKED_CODES | frozenset(
    int(c)
    for c in (
        C.UPDATE_AND_CREATE_TOPIC,
        C.DELETE_TOPIC_IN_BROKER,
        C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        C.DELETE_SUBSCRIPTIONGROUP,
        C.UPDATE_BROKER_CONFIG,
        C.INVOKE_BROKER_TO_RESET_OFFSET,
        C.RESET_CONSUMER_OFFSET_IN_BROKER,
        C.CLONE_GROUP_OFFSET,
        C.CLEAN_EXPIRED_CONSUMEQUEUE,
        C.CLEAN_UNUSED_TOPIC,
        C.TRIGGER_DELETE_FILES,
        C.RESUME_CHECK_HALF_MESSAGE,
    )
)


def _text(ext: dict[str, Any], *names: str) -> str | None:
    for name in names:
        value = ext.get(name)
        if value is not None:
            return str(value)
    return None


def _topic(topic: str | None, perm: int) -> list[Need]:
    if not topic:
        return []
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return [("group", topic[len(RETRY_GROUP_TOPIC_PREFIX) :], SUB)]
    return [("topic", topic, perm)]


def _group(group: str | None) -> list[Need]:
    return [("group", group, SUB)] if group else []


def _send(ext: dict[str, Any], request: RemotingCommand) -> list[Need]:
    return _topic(_text(ext, "b", "topic"), PUB)


def _topic_and_group(ext: dict[str, Any], request: RemotingCommand) -> list[Need]:
    return _topic(_text(ext, "topic"), SUB) + _group(_text(ext, "consumerGroup"))


def _consumer_group(ext: dict[str, Any], request: RemotingCommand) -> list[Need]:
    return _group(_text(ext, "consumerGroup"))


def _send_back(ext: dict[str, Any], request: RemotingCommand) -> list[Need]:
    return _group(_text(ext, "group"))


def _query(ext: dict[str, Any], request: RemotingCommand) -> list[Need]:
    return _topic(_text(ext, "topic"), SUB)


def _heart_beat(ext: dict[str, Any], request: RemotingCommand) -> list[Need]:
    try:
        doc = decode_body_map(request.body, request.serialize_type, "HeartbeatData")
    except HeaderError:
        return []  # the handler answers the malformed body
    needs: list[Need] = []
    consumers = doc.get("consumerDataSet")
    for data in consumers if isinstance(consumers, list) else []:
        if not isinstance(data, dict):
            continue
        group = data.get("groupName")
        needs += _group(group if isinstance(group, str) else None)
        subs = data.get("subscriptionDataSet")
        for sub in subs if isinstance(subs, list) else []:
            topic = sub.get("topic") if isinstance(sub, dict) else None
            needs += _topic(topic if isinstance(topic, str) else None, SUB)
    return needs


_NEEDS: dict[int, Callable[[dict[str, Any], RemotingCommand], list[Need]]] = {
    C.SEND_MESSAGE: _send,
    C.SEND_MESSAGE_V2: _send,
    C.SEND_BATCH_MESSAGE: _send,
    C.CONSUMER_SEND_MSG_BACK: _send_back,
    C.PULL_MESSAGE: _topic_and_group,
    C.LITE_PULL_MESSAGE: _topic_and_group,
    C.QUERY_MESSAGE: _query,
    C.HEART_BEAT: _heart_beat,
    C.UNREGISTER_CLIENT: _consumer_group,
    C.GET_CONSUMER_LIST_BY_GROUP: _consumer_group,
    C.QUERY_CONSUMER_OFFSET: _topic_and_group,
    C.UPDATE_CONSUMER_OFFSET: _topic_and_group,
}


def request_needs(request: RemotingCommand) -> list[Need]:
    """The topic and group permissions ``request`` needs (empty for codes without resources)."""
    needs = _NEEDS.get(request.code)
    return needs(request.ext or {}, request) if needs is not None else []
