"""Permission verdicts remembered for one version of the rules (ACL 1.0 and 2.0).

A pull or a send is checked on every request, and its permission part (which resources the code
names, then the account's or the ACL's rule for each) is the same for every request that names the
same resources: a consumer pulls one topic for one group thousands of times a second. So the
validator keeps each verdict by ``verdict_key`` — the subject (account or user), the code and the
values of the header fields the code's rule reads, and the client's address under ACL 2.0 (its
entries may name source addresses) — and decides only a key it has not seen.

Only codes whose resources come from header fields alone have a key (not HEART_BEAT, whose body
names them), and only requests whose fields are text or absent (any other type is decided each
time). The signature is never remembered: it is checked on every request before the verdict. The
cache belongs to one ``AccessValidator`` / ``AuthEvaluator``, which is built again whenever the rules
change, so a verdict never outlives its rules. Bounded: cleared when full.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rocketpy.protocol.specs import SPECS

if TYPE_CHECKING:
    from rocketpy.acl.validator import Refusal
    from rocketpy.remoting.command import RemotingCommand

#: Verdicts one validator keeps (about 200 bytes each); cleared when full.
MAX_VERDICTS = 4096


def _header_fields() -> dict[int, tuple[str, ...]]:
    """Code -> the wire names of the header fields its permission check reads, for codes whose
    resources are all in the header."""
    fields: dict[int, tuple[str, ...]] = {}
    for code, spec in SPECS.items():
        if spec.access.body is not None:
            continue
        names = (spec.topic_field, spec.group_field, spec.target_field)
        fields[code] = tuple(n for n in names if n is not None)
    return fields


#: Codes whose verdict can be remembered -> the header fields it depends on.
HEADER_FIELDS = _header_fields()


def verdict_key(
    subject: str, code: int, ext: dict[str, Any] | None, ip: str | None
) -> tuple[Any, ...] | None:
    """The key of a request's verdict, or None when it must be decided each time (a body that names
    resources, a field that is not text). ``ip``: the client's address when the rules read it."""
    fields = HEADER_FIELDS.get(code)
    if fields is None:
        return None
    values: list[Any] = [subject, code, ip]
    if ext:
        get = ext.get
        for name in fields:
            value = get(name)
            if value is not None and value.__class__ is not str:
                return None  # 1 and True are one key; their text is not
            values.append(value)
    return tuple(values)


class Verdicts:
    """The verdicts of one validator: key -> None (allowed) or the ``Refusal``."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[tuple[Any, ...], Refusal | None] = {}

    def decided(
        self,
        subject: str,
        request: RemotingCommand,
        ip: str | None,
        decide: Callable[..., Refusal | None],
        *before: Any,
    ) -> Refusal | None:
        """``decide(*before, request)``, kept by ``verdict_key`` (subject, code, fields, ``ip``) and
        returned again for a later request of the same key; decided each time when it has no key."""
        key = verdict_key(subject, request.code, request.ext, ip)
        if key is None:
            return decide(*before, request)
        memo = self._memo
        try:
            return memo[key]  # None is a verdict too (allowed): no .get()
        except KeyError:
            pass
        if len(memo) >= MAX_VERDICTS:
            memo.clear()
        verdict = memo[key] = decide(*before, request)
        return verdict

    def __len__(self) -> int:
        return len(self._memo)
