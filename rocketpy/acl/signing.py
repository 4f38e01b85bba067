"""Request signing as RocketMQ's plain ACL does it (``AclClientRPCHook``, ``AclUtils``, ``AclSigner``).

The signed content is the values of every ext field except ``Signature`` (and the
``_UNIQUE_KEY_QUERY`` flag, which the broker leaves out too), sorted by field name and concatenated
with no separators, as UTF-8, followed by the body bytes. The signature is
``Base64(HmacSHA1(secretKey, content))``. Ext values are turned to text by ``ext_text``, the one
canonical form the JSON header codec also writes, so a RocketMQ Java client's JSON request (all
strings) and the same request sent by rocketpy in msgpack (ints, bools) sign to the same bytes.

There is no timestamp or nonce in the signed content (RocketMQ 4.x has none): a captured request can
be replayed by whoever can reach the port. See README "Access control".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from rocketpy.remoting.command import Body, RemotingCommand
from rocketpy.remoting.json_header import ext_text

#: Ext field names of the plain ACL (RocketMQ's ``SessionCredentials``).
ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
#: Left out of the signed content by RocketMQ's broker (``MixAll.UNIQUE_MSG_QUERY_FLAG``).
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
_UNSIGNED = (SIGNATURE, UNIQUE_KEY_QUERY)


def signed_content(ext: Mapping[str, Any] | None, body: Body) -> bytes:
    """The bytes a signature covers: sorted ext values (minus Signature) as text, then the body."""
    text = "".join(
        ext_text(ext[k]) for k in sorted(ext) if k not in _UNSIGNED and ext[k] is not None
    ) if ext else ""  # fmt: skip
    data = text.encode()
    return data + bytes(body) if body else data


class HmacKey:
    """One secret's HmacSHA1 state, keyed once and copied per signature (cheaper than re-keying)."""

    __slots__ = ("_base",)

    def __init__(self, secret_key: str) -> None:
        self._base = hmac.new(secret_key.encode(), digestmod=hashlib.sha1)

    def sign(self, content: bytes) -> str:
        """``Base64(HmacSHA1(secret, content))``."""
        mac = self._base.copy()
        mac.update(content)
        return base64.b64encode(mac.digest()).decode("ascii")

    def verify(self, content: bytes, signature: str) -> bool:
        """True when ``signature`` is this key's signature of ``content`` (constant-time compare)."""
        return hmac.compare_digest(self.sign(content), signature)


def sign(secret_key: str, ext: Mapping[str, Any] | None, body: Body = b"") -> str:
    """The signature of a request with ``ext`` and ``body`` under ``secret_key``."""
    return HmacKey(secret_key).sign(signed_content(ext, body))


class RequestSigner:
    """Adds ``AccessKey`` and ``Signature`` to every request a client sends (the client RPC hook).

    Called by the remoting channel right before a request is written (``Channel.signer``), after
    its ext fields and body are final.
    """

    __slots__ = ("_key", "access_key")

    def __init__(self, access_key: str, secret_key: str) -> None:
        self.access_key = access_key
        self._key = HmacKey(secret_key)

    def __call__(self, cmd: RemotingCommand) -> None:
        ext = cmd.ext
        if ext is None:
            ext = cmd.ext = {}
        ext[ACCESS_KEY] = self.access_key
        ext[SIGNATURE] = self._key.sign(signed_content(ext, cmd.body))

    def __repr__(self) -> str:  # never the secret
        return f"RequestSigner(access_key={self.access_key!r})"
