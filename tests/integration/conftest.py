"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from rocketpy.remoting.client import RemotingClient
from tests.conftest import DaemonPool
from tests.integration.test_ha_netns import NetLab, netns_unavailable


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    """A raw RPC client, closed at teardown."""
    c = RemotingClient(name="test")
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture(params=["msgpack", "json"])
def sdk_encoding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the SDK speaking msgpack and again speaking RocketMQ's JSON remoting."""
    monkeypatch.setenv("ROCKETPY_SERIALIZE_TYPE", request.param)
    return str(request.param)


@pytest.fixture
def netlab(daemons: DaemonPool) -> Iterator[NetLab]:
    """A bridge and network namespaces (``NetLab``); skipped where namespaces cannot be made. The
    test's daemons are stopped before their namespaces go."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    lab = NetLab()
    try:
        yield lab
    finally:
        daemons.stop_all()
        lab.close()
