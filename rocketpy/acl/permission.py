"""Plain ACL permissions (RocketMQ's ``Permission``): DENY, PUB, SUB and their check.

A permission is a bit set; ``DENY`` wins over everything, ``ANY`` is satisfied by PUB or SUB.
"""

from __future__ import annotations

DENY = 1
ANY = 2
PUB = 4
SUB = 8

_BY_NAME = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
#: How a permission is named in remarks and in plain_acl.yml.
NAMES = {DENY: "DENY", ANY: "ANY", PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}


def parse_perm(text: str) -> int:
    """``DENY``, ``PUB``, ``SUB`` or ``PUB|SUB`` (any case, spaces around ``|`` allowed) as bits.

    Raises:
        ValueError: anything else (RocketMQ silently reads it as DENY; we refuse it).
    """
    key = "|".join(part.strip() for part in text.upper().split("|"))
    perm = _BY_NAME.get(key)
    if perm is None:
        raise ValueError(f"permission {text!r} is not one of DENY, PUB, SUB, PUB|SUB")
    return perm


def allows(needed: int, owned: int) -> bool:
    """True when ``owned`` grants ``needed`` (RocketMQ's ``Permission.checkPermission``)."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)
