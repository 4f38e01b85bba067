"""Server addresses: one ``HOST:PORT``, and NameServer lists such as ``"a:9876;b:9876"``.

Owns the one set of rules every caller checks an address by: the broker's ``namesrvAddr`` (config
file, ``-n``), the SDK's ``namesrv_addr``, the dashboard's ``-n``, the Spark options, and the remoting
client before it connects. An address is a non-empty host (a name, an IPv4 address, or an IPv6
address with or without brackets), a colon and a port from 1 to 65535 written in ASCII digits. A
list separates addresses with ``;`` (RocketMQ's separator) or ``,``; blanks around an address and
empty entries (``"a:1;"``) are ignored, and a list must hold at least one address.

A bad address raises ``AddressError``, an ``MQClientError`` (the SDK's error for a bad argument),
whose message names the bad entry and says what to write instead. The config reader turns it into
its ``FILE:LINE: key=...`` error. This module imports nothing from the network layer, the broker or
the client.
"""

from __future__ import annotations

import re

from rocketpy.errors import MQClientError

__all__ = ["AddressError", "parse_addr", "parse_namesrv_addrs"]

#: What separates the addresses of a list (``;`` as RocketMQ writes them; ``,`` is accepted too).
_SEPARATORS = re.compile("[;,]")
_PORT = re.compile("[0-9]{1,5}")
MAX_PORT = 65535


class AddressError(MQClientError):
    """An address that is not ``HOST:PORT``, or an empty address list."""


def parse_addr(addr: str) -> tuple[str, int]:
    """Split one ``"host:port"`` into its host (brackets of an IPv6 host dropped) and port.

    Raises:
        AddressError: no host, no port, or a port that is not an integer from 1 to 65535.
    """
    host, sep, port = addr.strip().rpartition(":")
    host = host.strip("[]")
    if sep and host and not any(c.isspace() for c in host) and _PORT.fullmatch(port):
        number = int(port)
        if 0 < number <= MAX_PORT:
            return host, number
    raise AddressError(
        f"'{addr.strip()}' is not HOST:PORT: use a host name or IP and a port from 1 to {MAX_PORT}"
        " (several separated by ';')"
    )


def parse_namesrv_addrs(value: str | None) -> list[str]:
    """The ``HOST:PORT`` addresses of a NameServer list (``"a:9876;b:9876"``), each checked.

    Raises:
        AddressError: the list holds no address, or an entry that ``parse_addr`` refuses.
    """
    addrs = [a.strip() for a in _SEPARATORS.split(value or "") if a.strip()]
    if not addrs:
        raise AddressError(
            "no NameServer address given: use HOST:PORT, several separated by ';' (or set NAMESRV_ADDR)"
        )
    for addr in addrs:
        parse_addr(addr)
    return addrs
