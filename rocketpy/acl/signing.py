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

import binascii
import hashlib
import hmac
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from rocketpy._accel import twin
from rocketpy.remoting.command import Body, RemotingCommand
from rocketpy.remoting.json_header import ext_text

#: Ext field names of the plain ACL (RocketMQ's ``SessionCredentials``).
ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
#: Left out of the signed content by RocketMQ's broker (``MixAll.UNIQUE_MSG_QUERY_FLAG``).
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
_UNSIGNED = (SIGNATURE, UNIQUE_KEY_QUERY)


#: Insertion-ordered key tuple -> getter of the signed values in sorted key order. A producer or
#: broker sees the same few key sets over and over (one per request kind): sorting is skipped and
#: the values are fetched in C. Bounded; cleared when full (the compiled twin keeps its own table
#: of sorted keys, as bounded).
_ORDERS: dict[tuple[str, ...], Callable[[Mapping[str, Any]], Any]] = {}
MAX_CACHED_KEY_SETS = 1024


def _values_getter(keys: tuple[str, ...]) -> Callable[[Mapping[str, Any]], Any]:
    order = sorted(k for k in keys if k not in _UNSIGNED)
    if len(order) >= 2:
        return itemgetter(*order)
    return lambda ext: tuple(ext[k] for k in order)  # itemgetter of one key returns no tuple


@twin
def signed_ext(ext: Mapping[str, Any] | None) -> bytes:
    """The signed ext part: values (minus Signature) sorted by key, as UTF-8 text (compiled twin in
    ``_speedups``).

    str values as they are, ints as ``str()`` (= ``ext_text`` for ints, the common case), the rest
    through ``ext_text``, the one canonical form; None is a field's absence (the JSON codec leaves
    it out too).
    """
    if not ext:
        return b""
    keys = tuple(ext)
    getter = _ORDERS.get(keys)
    if getter is None:
        if len(_ORDERS) >= MAX_CACHED_KEY_SETS:
            _ORDERS.clear()
        getter = _ORDERS[keys] = _values_getter(keys)
    return "".join([
        v if v.__class__ is str else str(v) if v.__class__ is int else ext_text(v)
        for v in getter(ext)
        if v is not None
    ]).encode()  # fmt: skip


def signed_content(ext: Mapping[str, Any] | None, body: Body) -> bytes:
    """The bytes a signature covers: sorted ext values (minus Signature) as text, then the body."""
    return signed_ext(ext) + bytes(body)


#: The compiled twin hashes a request itself up to this body size (SHA-1 over the key's pads: no
#: OpenSSL object copied, allocated and cleansed per request); larger bodies go to OpenSSL's HMAC.
OWN_SHA1_MAX_BODY = 512


@twin
def hmac_signature(key: HmacKey, ext: Mapping[str, Any] | None, body: Body) -> str:
    """``Base64(HmacSHA1)`` of ``signed_content(ext, body)`` under ``key`` (compiled twin in
    ``_speedups``: the signed text is written without a str per value and hashed there).

    The ext text and the body are fed to the key's MAC (copied, never changed) one after the other:
    the body is never copied.
    """
    mac = key._base.copy()
    mac.update(signed_ext(ext))
    if body:
        mac.update(body)
    return binascii.b2a_base64(mac.digest(), newline=False).decode("ascii")


def _new_hmac_sha1(key: bytes) -> Any:
    """An HMAC-SHA1 object; OpenSSL's own when available (its copy/update/digest are plain C
    calls, without ``hmac.HMAC``'s Python wrappers: about 2 µs less per signature)."""
    try:
        from _hashlib import hmac_new  # CPython built with OpenSSL (every Linux build we run on)
    except ImportError:  # pragma: no cover - other builds
        return hmac.new(key, digestmod=hashlib.sha1)
    return hmac_new(key, b"", "sha1")


_SHA1_BLOCK = 64


def hmac_pads(secret: bytes) -> bytes:
    """HMAC's two key blocks for SHA-1 (RFC 2104): the key (hashed first when longer than a block)
    padded to 64 bytes and XORed with 0x36 (ipad), then the same with 0x5C (opad)."""
    block = (hashlib.sha1(secret).digest() if len(secret) > _SHA1_BLOCK else secret).ljust(_SHA1_BLOCK, b"\0")
    return bytes(b ^ 0x36 for b in block) + bytes(b ^ 0x5C for b in block)


class HmacKey:
    """One secret's HmacSHA1: OpenSSL's state, keyed once and copied per signature (cheaper than
    re-keying), and the key's pads (``hmac_pads``) the compiled twin hashes from. Neither is shown."""

    __slots__ = ("_base", "pads")

    def __init__(self, secret_key: str) -> None:
        secret = secret_key.encode()
        self._base = _new_hmac_sha1(secret)
        self.pads = hmac_pads(secret)

    def sign(self, ext: Mapping[str, Any] | None, body: Body = b"") -> str:
        """``Base64(HmacSHA1(secret, signed_content(ext, body)))``."""
        return hmac_signature(self, ext, body)

    def verify(self, ext: Mapping[str, Any] | None, body: Body, signature: str) -> bool:
        """True when ``signature`` is this key's signature of the request (constant-time compare)."""
        return hmac.compare_digest(hmac_signature(self, ext, body), signature)

    def __repr__(self) -> str:  # never the secret
        return "HmacKey(...)"


def sign(secret_key: str, ext: Mapping[str, Any] | None, body: Body = b"") -> str:
    """The signature of a request with ``ext`` and ``body`` under ``secret_key``."""
    return HmacKey(secret_key).sign(ext, body)


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
        ext[SIGNATURE] = self._key.sign(ext, cmd.body)

    def __repr__(self) -> str:  # never the secret
        return f"RequestSigner(access_key={self.access_key!r})"


if TYPE_CHECKING:  # the compiled twins as their stub declares them: the same signatures, both ways
    from rocketpy._accel import same_signature
    from rocketpy.acl import _speedups

    same_signature(signed_ext)(_speedups.signed_ext)
    same_signature(_speedups.signed_ext)(signed_ext)
    same_signature(hmac_signature)(_speedups.hmac_signature)
    same_signature(_speedups.hmac_signature)(hmac_signature)
