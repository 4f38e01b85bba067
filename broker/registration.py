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

from rocketpy.errors import RemotingConnectError, RemotingTimeoutError
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import RemotingCommand

log = logging.getLogger("rocketpy.broker.registration")


@dataclass(slots=True)
class BrokerIdentity:
    """What a broker tells NameServers about itself."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str = ""


def parse_namesrv_list(addr: str | None) -> list[str]:
    """Split a ``namesrvAddr`` value (``host:port;host:port``) into addresses."""
    if not addr:
        return []
    return [a.strip() for a in addr.replace(",", ";").split(";") if a.strip()]


class BrokerRegistrar:
    """Registers a broker with a set of NameServers.

    Args:
        client: the RemotingClient used for NameServer calls.
        namesrv_addrs: the NameServer addresses.
        identity: this broker's names and address.
        topic_wrapper: returns ``{"topicConfigTable", "dataVersion"}`` (TopicConfigSerializeWrapper).
        timeout_ms: per-call timeout.
        on_answer: called with each successful REGISTER_BROKER answer's ext (``masterAddr``,
            ``haServerAddr``: how a slave finds its master).
    """

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: list[str],
        identity: BrokerIdentity,
        topic_wrapper: Callable[[], dict[str, Any]],
        timeout_ms: int,
        on_answer: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._client = client
        self.namesrv_addrs = list(namesrv_addrs)
        self.identity = identity
        self._topic_wrapper = topic_wrapper
        self.timeout_s = timeout_ms / 1000.0
        self.registered: set[str] = set()
        self._on_answer = on_answer
        self._lock = asyncio.Lock()

    def _ext(self) -> dict[str, Any]:
        i = self.identity
        return {
            "brokerName": i.broker_name,
            "brokerAddr": i.broker_addr,
            "clusterName": i.cluster_name,
            "haServerAddr": i.ha_server_addr,
            "brokerId": i.broker_id,
        }

    async def register_all(self) -> list[str]:
        """Register with every NameServer concurrently; returns the addresses that accepted."""
        async with self._lock:
            body = msgpack.packb(
                {"topicConfigSerializeWrapper": self._topic_wrapper(), "filterServerList": []},
                use_bin_type=True,
            )
            ext = self._ext()
            results = await asyncio.gather(
                *(self._call(addr, RequestCode.REGISTER_BROKER, ext, body) for addr in self.namesrv_addrs)
            )
            ok = [addr for addr, good in zip(self.namesrv_addrs, results, strict=True) if good]
            self.registered = set(ok)
            return ok

    async def unregister_all(self) -> list[str]:
        """Unregister from every NameServer concurrently; returns the addresses that answered."""
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
            self._on_answer(response.ext or {})
        return True
