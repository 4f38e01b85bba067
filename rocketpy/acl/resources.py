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


#: ACL 1.0 permission bits -> ACL 2.0 actions.
_ACTIONS = {PUB: "Pub", SUB: "Sub"}
#: ACL 2.0 resource types of ACL 1.0's kinds.
_TYPES = {"topic": "Topic", "group": "Group"}

NeedV2 = tuple[str, str, str]


def request_needs_v2(request: RemotingCommand, cluster: str) -> list[NeedV2]:
    """ACL 2.0: the ``(resource type, name, action)`` triples ``request`` needs (empty: a valid
    user is enough). Topics and groups as for ACL 1.0 (Pub / Sub); an admin code, or a code with an
    ``action``, needs that action (Update by default) on ``Cluster:cluster`` or on its ``target``."""
    spec = SPECS.get(request.code)
    if spec is None or not spec.access.checked:
        return []
    needs = [(_TYPES[kind], name, _ACTIONS[perm]) for kind, name, perm in request_needs(request)]
    access = spec.access
    if access.admin or access.action is not None:
        action = access.action or "Update"
        target = spec.target_field
        name = _text((request.ext or {}).get(target)) if target is not None else None
        if access.target is not None and name:
            needs.append((access.target[0], name, action))
        else:
            needs.append(("Cluster", cluster, action))
    return needs
