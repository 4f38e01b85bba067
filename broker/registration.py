"""Registration of this broker with every NameServer.

Owns REGISTER_BROKER / UNREGISTER_BROKER calls: sent to all NameServers concurrently, each with
its own timeout (``registerBrokerTimeoutMills``), so one dead NameServer never delays the others.
The periodic routine (``registerNameServerPeriod``) lives in the controller; topic changes call
``register_all`` at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from rocketpy.errors import HeaderError, RemotingConnectError, RemotingTimeoutError
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.protocol.headers.namesrv import (
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
)
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand

log = logging.getLogger("rocketpy.broker.registration")

#: Parts of a split registration in flight to one NameServer at once: each is some tens of ms of
#: the NameServer's loop, and parts that arrive together may be handled in one turn of it.
SPLIT_WINDOW = 2


@dataclass(slots=True)
class BrokerIdentity:
    """What a broker tells NameServers about itself."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str = ""
    grpc_server_addr: str = ""  # the gRPC endpoint (grpcServerPort), "" when off


class BrokerRegistrar:
    """Registers a broker with a set of NameServers.

    Args:
        client: the RemotingClient used for NameServer calls.
        namesrv_addrs: the NameServer addresses.
        identity: this broker's names and address.
        topic_wrapper: returns ``{"topicConfigTable", "dataVersion"}`` (TopicConfigSerializeWrapper).
        timeout_ms: per-call timeout.
        on_answer: called with each successful REGISTER_BROKER answer's header (``masterAddr``,
            ``haServerAddr``: how a slave finds its master).
        split_size: topics per REGISTER_BROKER request (0: the whole table in one request).
        table_info: the table's size and DataVersion, cheaply (default: from ``topic_wrapper``).

    A table larger than ``split_size`` travels in parts (RocketMQ 5's split registration: one
    request for 100,000 topics passes the 16 MiB frame limit and stalls the NameServer for
    seconds): REGISTER_BROKER with ext ``splitIndex`` / ``splitTotal``, one NameServer's parts in
    order, each with the same DataVersion; the NameServer applies the topic set when the last part
    arrives. Such a broker first asks QUERY_DATA_VERSION and, when the NameServer already holds
    its version, registers without a body (liveness only) instead of sending every topic again.
    """

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: list[str],
        identity: BrokerIdentity,
        topic_wrapper: Callable[[], dict[str, Any]],
        timeout_ms: int,
        on_answer: Callable[[RegisterBrokerResponseHeader], None] | None = None,
        split_size: int = 0,
        table_info: Callable[[], tuple[int, dict[str, int]]] | None = None,
    ) -> None:
        self._client = client
        self.split_size = split_size
        self._table_info = table_info or self._info_from_wrapper
        self.namesrv_addrs = list(namesrv_addrs)
        self.identity = identity
        self._topic_wrapper = topic_wrapper
        self.timeout_s = timeout_ms / 1000.0
        self.registered: set[str] = set()
        self._on_answer = on_answer
        self._lock = asyncio.Lock()

    def _info_from_wrapper(self) -> tuple[int, dict[str, int]]:
        wrapper = self._topic_wrapper()
        return len(wrapper["topicConfigTable"]), wrapper["dataVersion"]

    def _ext(self, split: tuple[int, int] | None = None) -> dict[str, Any]:
        """The broker's identity (REGISTER_BROKER / UNREGISTER_BROKER / QUERY_DATA_VERSION), with the
        part's ``(index, total)`` of a split registration."""
        i = self.identity
        index, total = split if split is not None else (None, None)
        return RegisterBrokerRequestHeader(
            cluster_name=i.cluster_name, broker_addr=i.broker_addr, broker_name=i.broker_name,
            broker_id=i.broker_id, ha_server_addr=i.ha_server_addr, split_index=index, split_total=total,
            grpc_server_addr=i.grpc_server_addr,
        ).to_ext()  # fmt: skip

    async def register_all(self) -> list[str]:
        """Register with every NameServer concurrently; returns the addresses that accepted.

        A broker id below 0 (controller mode before etcd assigned one) registers nowhere yet.
        """
        if self.identity.broker_id < 0:
            return []
        async with self._lock:
            ext = self._ext()
            count, version = self._table_info()
            if self.split_size and count > self.split_size:
                results = await self._register_large(ext, version)
            else:
                body = _pack_body(self._topic_wrapper())
                results = await asyncio.gather(
                    *(self._call(addr, RequestCode.REGISTER_BROKER, ext, body) for addr in self.namesrv_addrs)
                )
            ok = [addr for addr, good in zip(self.namesrv_addrs, results, strict=True) if good]
            self.registered = set(ok)
            return ok

    async def _register_large(self, ext: dict[str, Any], version: dict[str, int]) -> list[bool]:
        """A table past ``split_size``: liveness only to NameServers holding ``version``; the parts
        (packed in a thread, once) to the others. One result per NameServer, in order."""
        addrs = self.namesrv_addrs
        changed = await asyncio.gather(*(self._version_changed(addr, ext, version) for addr in addrs))
        bodies: list[bytes] = []
        if any(changed):
            bodies = await asyncio.to_thread(split_bodies, self._topic_wrapper(), self.split_size)
        return list(
            await asyncio.gather(
                *(
                    self._register_split(addr, bodies)
                    if need
                    else self._call(addr, RequestCode.REGISTER_BROKER, ext, b"")
                    for addr, need in zip(addrs, changed, strict=True)
                )
            )
        )

    async def _register_split(self, addr: str, bodies: list[bytes]) -> bool:
        """Every part to one NameServer, in order (a failed part stops; the next round resends)."""
        # A few parts in flight: one connection carries them in order and the NameServer answers
        # them in order, so a window keeps the order and saves a round trip per part.
        for start in range(0, len(bodies), SPLIT_WINDOW):
            window = [
                self._call(addr, RequestCode.REGISTER_BROKER, self._ext((i, len(bodies))), body)
                for i, body in enumerate(bodies[start : start + SPLIT_WINDOW], start)
            ]
            if not all(await asyncio.gather(*window)):
                return False
        return True

    async def _version_changed(self, addr: str, ext: dict[str, Any], version: dict[str, int]) -> bool:
        """QUERY_DATA_VERSION: False when the NameServer holds ``version`` (True on any doubt)."""
        request = RemotingCommand.request(
            RequestCode.QUERY_DATA_VERSION, ext=dict(ext), body=msgpack.packb(version, use_bin_type=True)
        )
        try:
            response = await self._client.invoke(addr, request, self.timeout_s)
        except (RemotingTimeoutError, RemotingConnectError):
            return True
        if response.code != ResponseCode.SUCCESS:
            return True
        try:
            return QueryDataVersionResponseHeader.from_ext(response.ext).changed
        except HeaderError:
            return True

    async def unregister_all(self) -> list[str]:
        """Unregister from every NameServer concurrently; returns the addresses that answered."""
        if self.identity.broker_id < 0:
            return []
        ext = self._ext()
        results = await asyncio.gather(
            *(self._call(addr, RequestCode.UNREGISTER_BROKER, ext, b"") for addr in self.namesrv_addrs)
        )
        return [addr for addr, good in zip(self.namesrv_addrs, results, strict=True) if good]

    async def _call(self, addr: str, code: int, ext: dict[str, Any], body: bytes) -> bool:
        request = RemotingCommand.request(code, ext=dict(ext), body=body)
        try:
            response = await self._client.invoke(addr, request, self.timeout_s)
        except (RemotingTimeoutError, RemotingConnectError) as e:
            log.warning("%s with NameServer %s failed: %s", RequestCode(code).name, addr, e)
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning(
                "%s with NameServer %s refused: code %s, %s",
                RequestCode(code).name,
                addr,
                response.code,
                response.remark,
            )
            return False
        if code == RequestCode.REGISTER_BROKER and self._on_answer is not None:
            try:
                answer = RegisterBrokerResponseHeader.from_ext(response.ext)
            except HeaderError as e:
                log.warning("REGISTER_BROKER answer of NameServer %s is malformed: %s", addr, e)
                return True
            self._on_answer(answer)
        return True


def _pack_body(wrapper: dict[str, Any]) -> bytes:
    return msgpack.packb({"topicConfigSerializeWrapper": wrapper, "filterServerList": []}, use_bin_type=True)


def split_bodies(wrapper: dict[str, Any], split_size: int) -> list[bytes]:
    """REGISTER_BROKER bodies of at most ``split_size`` topics each, all with the table's version."""
    items = list(wrapper["topicConfigTable"].items())
    version = wrapper["dataVersion"]
    return [
        _pack_body({"topicConfigTable": dict(items[i : i + split_size]), "dataVersion": version})
        for i in range(0, len(items), split_size)
    ]
