"""An etcd v3 client over etcd's JSON gateway (``/v3/...``) with aiohttp: the controller mode's link
to its coordinator.

Owns the few calls leader election needs: ``range`` (one key or a prefix), ``put``, ``txn``
(compare-and-swap), leases (``grant``, ``keepalive``, ``revoke``), ``watch`` (a stream of change
notices) and the cluster's ``status`` / ``members`` for operators. Keys and values are bytes on the
wire (base64 in the gateway's JSON); callers pass ``str`` keys and ``bytes`` values.

Every call has a deadline (``request_timeout_s``; a watch's connect has one, its stream is read by
the caller under its own). Endpoints are tried in turn from the last one that answered: a member
that is down, partitioned from the majority (it answers nothing, or "no leader") or too slow costs
one timeout, then the next member is asked. ``EtcdUnavailable`` means no member answered in time;
``EtcdError`` is an answer that refused the call (its gRPC code and message). Nothing here blocks
the event loop: aiohttp does the I/O, responses are small JSON documents (``MAX_RESPONSE_BYTES``).

The gateway, not a gRPC client: etcd 3.4 (Debian's ``etcd-server``) serves ``/v3/`` itself, the
calls above are a handful of JSON posts, and aiohttp is a maintained asyncio HTTP client the
project already knows (the dashboard's); docs/design.md §6.5 says why in full.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

from rocketpy.addresses import parse_addr
from rocketpy.errors import RocketpyError

try:  # the controller extra (pip install 'rocketpy[controller]')
    import aiohttp
except ImportError:  # pragma: no cover - checked at start with a clear message
    aiohttp = None  # type: ignore[assignment]

log = logging.getLogger("rocketpy.broker.failover")

#: The largest JSON answer read (a group's keys are a few hundred bytes each).
MAX_RESPONSE_BYTES = 4 << 20
#: The longest line of a watch stream read (one batch of events).
MAX_WATCH_LINE_BYTES = 1 << 20
#: gRPC codes that mean "this member cannot serve now": the next endpoint is asked.
_RETRY_ELSEWHERE = {4, 13, 14}  # DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE


class EtcdUnavailable(RocketpyError):
    """No etcd endpoint answered within the deadline (down, partitioned, or without a leader)."""


class EtcdError(RocketpyError):
    """etcd refused a call (its gRPC ``code`` and message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd error {code}: {message}")
        self.code = code


def aiohttp_missing() -> str | None:
    """Why the controller mode cannot talk to etcd here (None: it can)."""
    if aiohttp is None:
        return "controller mode needs aiohttp: pip install 'rocketpy[controller]'"
    return None


def _b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: str) -> bytes:
    """The ``range_end`` that makes a range cover every key starting with ``prefix``."""
    raw = bytearray(prefix.encode())
    for i in range(len(raw) - 1, -1, -1):
        if raw[i] < 0xFF:
            raw[i] += 1
            return bytes(raw[: i + 1])
    return b"\0"


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One stored key (a range or txn answer)."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KeyValue:
        """From the gateway's JSON (int64 fields arrive as strings)."""
        return cls(
            _unb64(d.get("key")).decode(errors="replace"),
            _unb64(d.get("value")),
            int(d.get("create_revision", 0)),
            int(d.get("mod_revision", 0)),
            int(d.get("version", 0)),
            int(d.get("lease", 0)),
        )


@dataclass(frozen=True, slots=True)
class Compare:
    """One comparison of a txn: ``target`` of ``key`` compared with ``value`` (``result`` EQUAL...)."""

    key: str
    target: str  # VERSION, CREATE, MOD, VALUE, LEASE
    value: int | bytes
    result: str = "EQUAL"

    def to_json(self) -> dict[str, Any]:
        """The gateway's JSON for this comparison."""
        field = {
            "VERSION": "version",
            "CREATE": "create_revision",
            "MOD": "mod_revision",
            "VALUE": "value",
            "LEASE": "lease",
        }[self.target]
        value = _b64(self.value) if isinstance(self.value, bytes) else str(self.value)
        return {"key": _b64(self.key), "target": self.target, "result": self.result, field: value}


def created(key: str, revision: int) -> Compare:
    """``key`` was created at ``revision`` (0: ``key`` does not exist)."""
    return Compare(key, "CREATE", revision)


def modified(key: str, revision: int) -> Compare:
    """``key`` was last changed at ``revision`` (0: ``key`` does not exist)."""
    return Compare(key, "MOD", revision)


def put_op(key: str, value: bytes, lease: int = 0) -> dict[str, Any]:
    """A txn operation writing ``key`` (bound to ``lease`` when not 0)."""
    op: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
    if lease:
        op["lease"] = str(lease)
    return {"request_put": op}


def delete_op(key: str) -> dict[str, Any]:
    """A txn operation deleting ``key``."""
    return {"request_delete_range": {"key": _b64(key)}}


def range_op(key: str, prefix: bool = False) -> dict[str, Any]:
    """A txn operation reading ``key`` (every key under it with ``prefix``)."""
    op: dict[str, Any] = {"key": _b64(key)}
    if prefix:
        op["range_end"] = _b64(prefix_end(key))
    return {"request_range": op}


@dataclass(frozen=True, slots=True)
class TxnResult:
    """A txn's outcome: whether the comparisons held, the keys its range operations read, the revision."""

    succeeded: bool
    kvs: list[KeyValue]
    revision: int


class EtcdClient:
    """Calls to one etcd cluster.

    Args:
        endpoints: ``host:port`` of the members' client URLs (http).
        request_timeout_s: the deadline of each call on one member.
    """

    def __init__(self, endpoints: Sequence[str], request_timeout_s: float = 1.0) -> None:
        assert endpoints, "at least one etcd endpoint"
        for ep in endpoints:
            parse_addr(ep)  # raises AddressError for a malformed one
        self.endpoints = list(endpoints)
        self.request_timeout_s = request_timeout_s
        self._current = 0
        self._session: aiohttp.ClientSession | None = None
        self.last_error = ""

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            reason = aiohttp_missing()
            if reason:
                raise EtcdUnavailable(reason)
            connector = aiohttp.TCPConnector(limit=16, limit_per_host=8, force_close=False)
            self._session = aiohttp.ClientSession(connector=connector, raise_for_status=False)
        return self._session

    async def close(self) -> None:
        """Close the HTTP connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, path: str, body: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """POST ``body`` to ``/v3/{path}`` on the first member that answers; its JSON answer.

        Raises:
            EtcdUnavailable: every member failed or timed out.
            EtcdError: a member refused the call (an answer carrying ``error``).
        """
        timeout_s = timeout_s or self.request_timeout_s
        errors: list[str] = []
        n = len(self.endpoints)
        for i in range(n):
            idx = (self._current + i) % n
            ep = self.endpoints[idx]
            try:
                doc = await self._post(ep, path, body, timeout_s)
            except (aiohttp.ClientError, TimeoutError, ValueError, OSError) as e:
                errors.append(f"{ep}: {type(e).__name__}: {e}".rstrip(": "))
                continue
            err = doc.get("error")
            if err is not None:
                code = int(doc.get("code", 2))
                if code in _RETRY_ELSEWHERE:
                    errors.append(f"{ep}: {err}")
                    continue
                raise EtcdError(code, str(doc.get("message") or err))
            self._current = idx
            self.last_error = ""
            return doc
        self._current = (self._current + 1) % n
        self.last_error = "; ".join(errors)
        raise EtcdUnavailable(f"no etcd member answered /v3/{path} within {timeout_s:g}s ({self.last_error})")

    async def _post(self, ep: str, path: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        async with asyncio.timeout(timeout_s):
            async with self._http().post(f"http://{ep}/v3/{path}", json=body) as resp:
                raw = await resp.content.read(MAX_RESPONSE_BYTES + 1)
        if len(raw) > MAX_RESPONSE_BYTES:
            raise ValueError(f"answer larger than {MAX_RESPONSE_BYTES} bytes")
        doc = json.loads(raw or b"{}")
        if not isinstance(doc, dict):
            raise ValueError(f"answer is not a JSON object: {raw[:80]!r}")
        return doc

    # -- keys -----------------------------------------------------------------------------------
    async def range(self, key: str, prefix: bool = False) -> tuple[list[KeyValue], int]:
        """The value of ``key`` (or of every key under it with ``prefix``) and the store's revision."""
        body: dict[str, Any] = range_op(key, prefix)["request_range"]
        doc = await self.call("kv/range", body)
        kvs = [KeyValue.from_json(d) for d in doc.get("kvs") or []]
        return kvs, int((doc.get("header") or {}).get("revision", 0))

    async def put(self, key: str, value: bytes, lease: int = 0) -> int:
        """Write ``key``; returns the new revision."""
        doc = await self.call("kv/put", put_op(key, value, lease)["request_put"])
        return int((doc.get("header") or {}).get("revision", 0))

    async def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[dict[str, Any]],
        failure: Sequence[dict[str, Any]] = (),
    ) -> TxnResult:
        """Apply ``success`` if every comparison holds, else ``failure``, atomically."""
        body = {"compare": [c.to_json() for c in compare], "success": list(success), "failure": list(failure)}
        doc = await self.call("kv/txn", body)
        kvs: list[KeyValue] = []
        for r in doc.get("responses") or []:
            rng = r.get("response_range")
            if rng:
                kvs.extend(KeyValue.from_json(d) for d in rng.get("kvs") or [])
        revision = int((doc.get("header") or {}).get("revision", 0))
        return TxnResult(bool(doc.get("succeeded")), kvs, revision)

    # -- leases ---------------------------------------------------------------------------------
    async def grant(self, ttl_s: int) -> tuple[int, int]:
        """A new lease of ``ttl_s`` seconds: (its id, the TTL etcd granted)."""
        doc = await self.call("lease/grant", {"TTL": str(ttl_s)})
        return int(doc["ID"]), int(doc.get("TTL", ttl_s))

    async def keepalive(self, lease_id: int) -> int:
        """Renew ``lease_id``; the TTL it now has (0: the lease is gone)."""
        doc = await self.call("lease/keepalive", {"ID": str(lease_id)})
        return int((doc.get("result") or doc).get("TTL", 0))

    async def revoke(self, lease_id: int) -> None:
        """End ``lease_id`` now (its keys are deleted); a lease already gone is no error."""
        try:
            await self.call("lease/revoke", {"ID": str(lease_id)})
        except EtcdError as e:
            if e.code != 5:  # NOT_FOUND
                raise

    # -- operators ------------------------------------------------------------------------------
    async def status(self) -> dict[str, Any]:
        """The answering member's status (version, leader, raft term, db size)."""
        return await self.call("maintenance/status", {})

    async def members(self) -> list[dict[str, Any]]:
        """The cluster's members (id, name, peer and client URLs)."""
        return list((await self.call("cluster/member/list", {})).get("members") or [])

    # -- watch ----------------------------------------------------------------------------------
    async def watch(self, prefix: str, start_revision: int = 0) -> AsyncGenerator[list[dict[str, Any]], None]:
        """Change notices for every key under ``prefix`` (one list of events per notice).

        The caller reads under its own deadline (a quiet key sends nothing) and closes the iterator.

        Raises:
            EtcdUnavailable: no member accepted the watch.
        """
        create: dict[str, Any] = {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))}
        if start_revision:
            create["start_revision"] = str(start_revision)
        ep = self.endpoints[self._current]
        try:
            async with asyncio.timeout(self.request_timeout_s):
                resp = await self._http().post(
                    f"http://{ep}/v3/watch", json={"create_request": create}, timeout=aiohttp.ClientTimeout()
                )
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            self._current = (self._current + 1) % len(self.endpoints)
            raise EtcdUnavailable(f"watch on {ep}: {type(e).__name__}: {e}") from e
        try:
            while True:
                line = await resp.content.readuntil(b"\n")  # aiohttp bounds a line by its buffer size
                if len(line) > MAX_WATCH_LINE_BYTES:
                    raise EtcdUnavailable(f"a watch notice of {len(line)} bytes from {ep}")
                if not line:
                    raise EtcdUnavailable(f"the watch stream of {ep} ended")
                doc = json.loads(line)
                result = doc.get("result") or {}
                if doc.get("error") or result.get("canceled"):
                    raise EtcdUnavailable(f"the watch on {ep} was cancelled: {doc}")
                yield list(result.get("events") or [])
        finally:
            resp.close()
