"""What a 5.x client says about itself in every call's metadata, read once per call.

The official clients send ``x-mq-client-id``, ``x-mq-language``, ``x-mq-protocol``,
``x-mq-client-version``, ``x-mq-date-time``, ``x-mq-request-id``, ``x-mq-namespace`` and, with
credentials (the Python client: always, possibly with an empty access key), ``authorization:
MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=HEX``. Values are bounded
(``MAX_VALUE_CHARS``) before they are kept anywhere; the authorization is parsed only when ACL
checks it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

#: Longest metadata value kept (client ids, versions); longer ones are cut.
MAX_VALUE_CHARS = 256
AUTH_SCHEME = "MQv2-HMAC-SHA1"


class CallMeta(NamedTuple):
    """One call's client metadata (a tuple: read on every call, so built in one C call).

    Attributes:
        client_id: ``x-mq-client-id`` ("" when absent).
        language: ``x-mq-language`` (PYTHON, JAVA, HTTP for Node.js, ...).
        protocol: ``x-mq-protocol`` (GRPC_V2, v2).
        version: ``x-mq-client-version``.
        date_time: ``x-mq-date-time``, the text the signature covers.
        authorization: the ``authorization`` value, None when absent (read only when ACL is on).
    """

    client_id: str = ""
    language: str = ""
    protocol: str = ""
    version: str = ""
    date_time: str = ""
    authorization: str | None = None

    @property
    def access_key(self) -> str | None:
        """The authorization's ``Credential`` (None: no authorization; "" for an empty one)."""
        return parse_authorization(self.authorization)[0] if self.authorization is not None else None

    @property
    def signature(self) -> str | None:
        """The authorization's ``Signature`` (hex), None when absent."""
        return parse_authorization(self.authorization)[1] if self.authorization is not None else None


def parse_authorization(value: str) -> tuple[str | None, str | None]:
    """``(access key, signature)`` of an ``authorization`` value; ``(None, None)`` when it is not
    RocketMQ 5's scheme."""
    scheme, _, rest = value.strip().partition(" ")
    if scheme != AUTH_SCHEME:
        return None, None
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, val = part.strip().partition("=")
        if sep:
            fields[name.strip()] = val.strip()
    return fields.get("Credential", ""), fields.get("Signature")


#: The keys ``CallMeta`` keeps, by field index (``authorization`` apart: it is cut longer).
_FIELDS = {"x-mq-client-id": 0, "x-mq-language": 1, "x-mq-protocol": 2, "x-mq-client-version": 3,
           "x-mq-date-time": 4}  # fmt: skip


def read_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> CallMeta:
    """The ``CallMeta`` of a call's invocation metadata (binary values are ignored; of a key given
    twice the last counts). One pass over the pairs, no dict built (every call reads it)."""
    fields = ["", "", "", "", ""]
    auth: str | None = None
    if metadata:
        index = _FIELDS.get
        for key, value in metadata:
            i = index(key)
            if i is not None:
                fields[i] = value[:MAX_VALUE_CHARS] if isinstance(value, str) else ""
            elif key == "authorization":
                auth = value[: 4 * MAX_VALUE_CHARS] if isinstance(value, str) else None
    return CallMeta(fields[0], fields[1], fields[2], fields[3], fields[4], auth)


def peer_host_port(peer: str) -> tuple[str, int] | None:
    """``(ip, port)`` of a grpc peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``); None otherwise."""
    kind, _, rest = peer.partition(":")
    host, _, port = rest.rpartition(":")
    if kind not in ("ipv4", "ipv6") or not port.isdigit():
        return None
    return host.strip("[]"), int(port)
