"""Conformance: RocketMQ's official 5.x Python client with ACL 2.0 credentials against a rocketpy
broker whose gRPC endpoint authenticates and authorizes calls (``rocketpy/grpc_api/auth.py``):
the client's own ``authorization`` signature is accepted, a wrong password and a denied topic are
refused. Skipped with the reason when the client cannot be installed (``rmq5.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.compat import rmq5
from tests.conftest import DaemonPool
from tests.integration.test_grpc_acl2 import ALICE, PROPS, _setup

HERE = Path(__file__).parent
TIMEOUT_S = 120.0


def _send(python: str, endpoint: str, topic: str, keys: tuple[str, str]) -> dict[str, object]:
    argv = [python, str(HERE / "rmq5_python_auth.py"), endpoint, topic]
    return rmq5.run_worker(argv, TIMEOUT_S, {"RMQ5_ACCESS_KEY": keys[0], "RMQ5_SECRET_KEY": keys[1]})


def test_python_client_signs_as_an_acl2_user(daemons: DaemonPool, request: pytest.FixtureRequest) -> None:
    python, why = rmq5.python_client(request.config)
    if python is None:
        pytest.skip(why)
    ns = daemons.namesrv().addr
    broker = daemons.broker(ns, **PROPS)
    asyncio.run(_setup(ns, broker.addr))
    endpoint = str(broker.grpc_addr)
    allowed = _send(python, endpoint, "GrpcOrders", ALICE)
    assert allowed["error"] is None and allowed["id"], allowed
    # the literal Deny (Pub) is more specific than the prefix Allow: already QueryRoute (Pub or Sub)
    # is refused, which the client reports as a route it cannot fetch
    denied = _send(python, endpoint, "GrpcSecret", ALICE)
    assert denied["id"] is None and "GrpcSecret route" in str(denied["error"]), denied
    wrong = _send(python, endpoint, "GrpcOrders", (ALICE[0], "not-her-password"))
    assert wrong["id"] is None and wrong["error"], wrong
