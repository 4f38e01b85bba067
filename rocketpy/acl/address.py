"""White lists of remote addresses, in RocketMQ's plain ACL notation (``RemoteAddressStrategyFactory``).

One pattern is:

* ``*`` (or ``*.*.*.*``): every address; an empty pattern: none;
* an IPv4 address whose octets may each be ``*``, a range ``1-200`` or a set ``{1,2,3}``
  (``10.10.103.*``, ``192.168.1.1-200``, ``192.168.1.{1,2}``); trailing ``*`` octets may be left out
  (``192.168.*``);
* several such patterns separated by commas (``192.168.1.1,192.168.1.2``);
* an IPv6 address, matched exactly.
"""

from __future__ import annotations

import ipaddress
import re

_OCTET = re.compile(r"\*|[0-9]{1,3}(?:-[0-9]{1,3})?|\{[0-9]{1,3}(?:,[0-9]{1,3})*\}")
_ANY = (0, 255)


def _octet(text: str, pattern: str) -> tuple[int, int] | frozenset[int]:
    if not _OCTET.fullmatch(text):
        raise ValueError(
            f"address pattern {pattern!r}: {text!r} is not a number, *, a range a-b or a set {{a,b}}"
        )
    if text == "*":
        return _ANY
    if text.startswith("{"):
        values = frozenset(int(v) for v in text[1:-1].split(","))
        if max(values) > 255:
            raise ValueError(f"address pattern {pattern!r}: {text!r} has a value over 255")
        return values
    lo, _, hi = text.partition("-")
    low, high = int(lo), int(hi or lo)
    if high > 255 or low > high:
        raise ValueError(f"address pattern {pattern!r}: {text!r} is not a range within 0-255")
    return (low, high)


def _split_top(text: str) -> list[str]:
    """Split at commas outside braces."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


class WhiteList:
    """Compiled address patterns; ``matches(ip)`` is true when any pattern covers ``ip``.

    Raises:
        ValueError: (constructor) a pattern that is not one of the forms above.
    """

    __slots__ = ("_all", "_exact", "_ipv4", "patterns")

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = list(patterns)
        self._all = False
        self._exact: set[str] = set()
        self._ipv4: list[tuple[tuple[int, int] | frozenset[int], ...]] = []
        for pattern in patterns:
            for part in _split_top(pattern.strip()) if pattern.strip() else []:
                self._add(part, pattern)

    def _add(self, part: str, pattern: str) -> None:
        if not part:
            raise ValueError(f"address pattern {pattern!r} has an empty entry between commas")
        if part in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
            self._all = True
            return
        if ":" in part:
            try:
                self._exact.add(str(ipaddress.IPv6Address(part)))
            except ValueError:
                raise ValueError(f"address pattern {pattern!r}: {part!r} is not an IPv6 address") from None
            return
        octets = part.split(".")
        if len(octets) > 4 or (len(octets) < 4 and octets[-1] != "*"):
            raise ValueError(
                f"address pattern {pattern!r}: {part!r} needs 4 octets (or end in * as in 10.10.*)"
            )
        compiled = tuple(_octet(o, pattern) for o in octets) + (_ANY,) * (4 - len(octets))
        self._ipv4.append(compiled)

    @property
    def empty(self) -> bool:
        """True when no address matches."""
        return not (self._all or self._exact or self._ipv4)

    def matches(self, ip: str) -> bool:
        """True when ``ip`` (text of an IPv4 or IPv6 address) is covered."""
        if self._all:
            return True
        if not self._ipv4 and not self._exact:
            return False
        if ip.startswith("::ffff:") and "." in ip:  # an IPv4 client of a dual-stack listener
            ip = ip[7:]
        parts = ip.split(".")
        if len(parts) != 4:
            return bool(self._exact) and _norm6(ip) in self._exact
        try:
            values = [int(p) for p in parts]
        except ValueError:
            return False
        for compiled in self._ipv4:
            for value, rule in zip(values, compiled, strict=True):
                if type(rule) is tuple:
                    if not rule[0] <= value <= rule[1]:
                        break
                elif value not in rule:
                    break
            else:
                return True
        return False


def _norm6(ip: str) -> str:
    try:
        return str(ipaddress.IPv6Address(ip.split("%", 1)[0]))
    except ValueError:
        return ip
