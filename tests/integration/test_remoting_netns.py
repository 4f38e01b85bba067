"""A client connection across a partition that heals: the first requests after the heal are answered.

Requests written while a link is down stay unacknowledged in the kernel, which retransmits them with
exponential backoff (0.2, 0.4, 0.8, 1.6, 3.2 s ...). After the link comes back, anything written on
that connection waits behind them until the next retransmission, seconds later, though the peer is
reachable again. The client must not keep such a connection (the graceful switchover after a
partition in ``test_controller_netns`` lost sends to exactly this). Needs root and ``ip netns``.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketpy.errors import RemotingConnectError, RemotingTimeoutError
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.command import RemotingCommand
from tests.conftest import DaemonPool
from tests.integration.test_ha_netns import NetLab

pytestmark = [pytest.mark.netns]

ATTEMPT_S = 0.3


async def _ask(client: RemotingClient, addr: str) -> bool:
    request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    try:
        await client.invoke(addr, request, ATTEMPT_S)
        return True
    except (RemotingTimeoutError, RemotingConnectError):
        return False


async def test_requests_after_a_healed_partition_are_answered_at_once(
    daemons: DaemonPool, netlab: NetLab
) -> None:
    space, host_ip = netlab.host("n")
    netlab.host("o")  # another port keeps the bridge up: the cut link's packets are lost, not refused
    ns = daemons.namesrv(netns=space, bindAddress=host_ip)
    client = RemotingClient(connect_timeout=ATTEMPT_S)
    try:
        assert await _ask(client, ns.addr)
        netlab.set_link(space, up=False)
        cut_until = time.monotonic() + 3.5  # long enough for the backoff to reach seconds
        while time.monotonic() < cut_until:
            assert not await _ask(client, ns.addr)
        netlab.set_link(space, up=True)
        healed = time.monotonic()
        # a request or two may still be lost to the link coming up; nothing may wait for a backoff
        answered = False
        while not answered and time.monotonic() - healed < 1.0:
            answered = await _ask(client, ns.addr)
        took = time.monotonic() - healed
        assert answered, f"no request answered within {took:.2f}s of the link coming back"
    finally:
        await client.close()
        await asyncio.sleep(0)
