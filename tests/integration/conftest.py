"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rocketpy.remoting.client import RemotingClient


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
