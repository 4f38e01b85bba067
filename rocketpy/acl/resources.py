"""What a request needs: the resources and permissions its code's spec declares (RocketMQ's
``PlainAccessValidator.parse``).

A need is ``(kind, name, perm)`` with kind ``"topic"`` or ``"group"``. Each code's rule is its
spec's ``Access`` (``rocketpy.protocol.specs``): the wire fields naming its topic and group, the
permission the topic needs, and the resources its body names. A retry topic ``%RETRY%group``
stands for its group (RocketMQ keys groups by their retry topic); a POP retry topic
``%RETRY%{group}_{topic}`` of the request's group stands for ``topic``. A code without a spec, or with
no resource in its rule, needs only a valid signature; ``ADMIN_CODES`` need an ``admin: true``
account. A field the request lacks adds no need: the handler answers the malformed request itself.
"""

from __future__ import annotations

from rocketpy.acl.permission import PUB, SUB
from rocketpy.errors import HeaderError
from rocketpy.protocol.specs import SPECS, codes_served_by
from rocketpy.remoting.body import decode_body_map
from rocketpy.remoting.command import RemotingCommand
from rocketpy.topic import RETRY_GROUP_TOPIC_PREFIX, pop_retry_origin

Need = tuple[str, str, int]

_PERM_BITS = {"PUB": PUB, "SUB": SUB}

#: The NameServer checks only these (its reads stay open, as RocketMQ's NameServer has no ACL).
NAMESRV_CHECKED_CODES = frozenset(code for code in codes_served_by("namesrv") if SPECS[code].access.checked)

#: Codes that change topics, groups or server config: admin accounts only (RocketMQ's
#: ``Permission.ADMIN_CODE`` and the NameServer's writes).
ADMIN_CODES = frozenset(code for code, spec in SPECS.items() if spec.access.admin)


def _topic(topic: str | None, perm: int, group: str | None = None) -> list[Need]:
    if not topic:
        return []
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        origin = pop_retry_origin(topic, group) if group else None
        if origin is not None:  # a POP retry message: it needs what its topic needs
            return [("topic", origin, perm)]
        return [("group", topic[len(RETRY_GROUP_TOPIC_PREFIX) :], SUB)]
    return [("topic", topic, perm)]


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def request_needs(request: RemotingCommand) -> list[Need]:
    """The topic and group permissions ``request`` needs (empty for codes without resources)."""
    spec = SPECS.get(request.code)
    if spec is None:
        return []
    access = spec.access
    ext = request.ext or {}
    perm = _PERM_BITS[access.topic_perm]
    needs: list[Need] = []
    group = _text(ext.get(spec.group_field)) if spec.group_field is not None else None
    if (field := spec.topic_field) is not None:
        needs += _topic(_text(ext.get(field)), perm, group)
    if group:
        needs.append(("group", group, SUB))
    if access.body is not None:
        try:
            doc = decode_body_map(request.body, request.serialize_type, spec.code.name)
        except HeaderError:
            return needs  # the handler answers the malformed body
        for kind, name in access.body(doc):
            needs += _topic(name, perm) if kind == "topic" else [("group", name, SUB)]
    return needs
