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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

#: What a topic needs: publish or subscribe (``rocketpy.acl.permission`` gives them their bits).
Perm = Literal["PUB", "SUB"]
#: A resource a body names: ``("topic", name)`` or ``("group", name)``.
Resource = tuple[Literal["topic", "group"], str]


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
    """

    topic: str | None = None
    topic_perm: Perm = "SUB"
    group: str | None = None
    body: Callable[[Any], list[Resource]] | None = None
    admin: bool = False
    checked: bool = True


SIGNED = Access()
ADMIN = Access(admin=True)
OPEN = Access(checked=False)
