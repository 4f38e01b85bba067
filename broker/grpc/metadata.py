"""What a 5.x client says about itself in every call's metadata, read once per call.

The official clients send ``x-mq-client-id``, ``x-mq-language``, ``x-mq-protocol``,
``x-mq-client-version``, ``x-mq-date-time``, ``x-mq-request-id``, ``x-mq-namespace`` and, with
credentials (the Python client: always, possibly with an empty access key), ``authorization:
MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=HEX``. Values are bounded
(``MAX_VALUE_CHARS``) before they are kept anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: Longest metadata value kept (client ids, versions); longer ones are cut.
MAX_VALUE_CHARS = 256
AUTH_SCHEME = "MQv2-HMAC-SHA1"


@dataclass(slots=True, frozen=True)
class CallMeta:
    """One call's client metadata.

    Attributes:
        client_id: ``x-mq-client-id`` ("" when absent).
        language: ``x-mq-language`` (PYTHON, JAVA, HTTP for Node.js, ...).
        protocol: ``x-mq-protocol`` (GRPC_V2, v2).
        version: ``x-mq-client-version``.
        date_time: ``x-mq-date-time``, the text the signature covers.
        access_key: the authorization's ``Credential`` (None: no authorization; "" for an empty one).
        signature: the authorization's ``Signature`` (hex), None when absent.
    """

    client_id: str = ""
    language: str = ""
    protocol: str = ""
    version: str = ""
    date_time: str = ""
    access_key: str | None = None
    signature: str | None = None


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


def read_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> CallMeta:
    """The ``CallMeta`` of a call's invocation metadata (binary values are ignored)."""
    values: dict[str, str] = {}
    for key, value in metadata or ():
        if isinstance(value, str) and key not in values:
            values[key] = value[:MAX_VALUE_CHARS] if key != "authorization" else value[: 4 * MAX_VALUE_CHARS]
    access_key, signature = (None, None)
    if "authorization" in values:
        access_key, signature = parse_authorization(values["authorization"])
    return CallMeta(
        client_id=values.get("x-mq-client-id", ""),
        language=values.get("x-mq-language", ""),
        protocol=values.get("x-mq-protocol", ""),
        version=values.get("x-mq-client-version", ""),
        date_time=values.get("x-mq-date-time", ""),
        access_key=access_key,
        signature=signature,
    )


def peer_host_port(peer: str) -> tuple[str, int] | None:
    """``(ip, port)`` of a grpc peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``); None otherwise."""
    kind, _, rest = peer.partition(":")
    host, _, port = rest.rpartition(":")
    if kind not in ("ipv4", "ipv6") or not port.isdigit():
        return None
    return host.strip("[]"), int(port)
