"""What the ACL checks for a request code: the resources it names and the permission each needs.

An ``Access`` is declared in each code's spec (``rocketpy.protocol.specs``) and read by the ACL
(``rocketpy.acl.resources``); nothing else keeps a per-code table. It names the request header
*attributes* that hold the topic and the consumer group (the spec resolves them to wire names
through the header class), the permission the topic needs, and for structured bodies a function
that lists the resources the decoded body names (HEART_BEAT's groups and subscribed topics).

- ``SIGNED``: a valid signature is enough (no resource): reads of server state, queue offsets.
- ``ADMIN``: an account with ``admin: true`` (topic, group, broker and NameServer changes).
- ``OPEN``: not checked at all (the NameServer's reads, as RocketMQ's NameServer has no ACL;
  the SDK's handlers of broker -> client calls).

ACL 2.0 (``rocketpy.acl.auth_eval``) reads the same rule: a topic needs Pub or Sub on
``Topic:name``, a group Sub on ``Group:name``; an ``admin`` code, or one with an ``action``, needs
that action (Update by default) on ``Cluster:<cluster>``, or on the resource ``target`` names
(a resource type and the header attribute holding its name).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

#: What a topic needs: publish or subscribe (``rocketpy.acl.permission`` gives them their bits).
Perm = Literal["PUB", "SUB"]
#: A resource a body names: ``("topic", name)`` or ``("group", name)``.
Resource = tuple[Literal["topic", "group"], str]
#: ACL 2.0's actions of administration and reads (Pub and Sub come from ``topic_perm``).
Action = Literal["Create", "Update", "Delete", "Get", "List"]


@dataclass(frozen=True)
class Access:
    """The ACL rule of one request code.

    Attributes:
        topic: the request header attribute that names the topic (None: no topic).
        topic_perm: what the topic needs.
        group: the request header attribute that names the consumer group (None: no group).
        body: lists the resources the decoded body names (each topic needs ``topic_perm``).
        admin: only admin accounts may send it.
        checked: False: the ACL does not look at this code at all.
        action: ACL 2.0: the action this code needs (admin codes: Update when None).
        target: ACL 2.0: ``(resource type, header attribute)`` of the resource ``action`` is on
            (None: the broker's cluster).
    """

    topic: str | None = None
    topic_perm: Perm = "SUB"
    group: str | None = None
    body: Callable[[Any], list[Resource]] | None = None
    admin: bool = False
    checked: bool = True
    action: Action | None = None
    target: tuple[Literal["Topic", "Group"], str] | None = None


SIGNED = Access()
ADMIN = Access(admin=True)
OPEN = Access(checked=False)
#: Reads of broker state: any valid signature under ACL 1.0, Cluster Get / List under ACL 2.0.
GET = Access(action="Get")
LIST = Access(action="List")
