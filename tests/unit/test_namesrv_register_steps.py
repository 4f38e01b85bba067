"""A whole topic table in one large REGISTER_BROKER body is merged in steps, the loop free between."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgpack
import pytest

from rocketpy.config import NamesrvConfig
from rocketpy.errors import HeaderError
from rocketpy.nameserver.kv_config import KVConfigManager
from rocketpy.nameserver.processors import NamesrvProcessors
from rocketpy.nameserver.register_steps import register_parts
from rocketpy.nameserver.route_info import RouteInfoManager
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.route import TopicConfig


def body(names: list[str], counter: int = 3, version_first: bool = False) -> bytes:
    table = {n: TopicConfig(topic_name=n).to_wire() for n in names}
    version = {"timestamp": 5, "counter": counter}
    wrapper: dict[str, Any] = {"dataVersion": version, "topicConfigTable": table} if version_first else {
        "topicConfigTable": table, "dataVersion": version,
    }  # fmt: skip
    return msgpack.packb({"topicConfigSerializeWrapper": wrapper, "filterServerList": []})


@pytest.mark.parametrize("version_first", [False, True])
def test_register_parts_reads_the_table_step_by_step(version_first: bool) -> None:
    names = [f"t{i}" for i in range(1050)]
    parts = list(register_parts(body(names, version_first=version_first), 500))
    assert [(i, n, len(p.topic_config_table)) for i, n, p in parts] == [(0, 3, 500), (1, 3, 500), (2, 3, 50)]
    assert [t for _, _, p in parts for t in p.topic_config_table] == names
    assert all(p.data_version.counter == 3 for _, _, p in parts)


def test_register_parts_refuses_a_bad_body() -> None:
    bad = msgpack.packb({"topicConfigSerializeWrapper": {"topicConfigTable": {"t": {"perm": "x"}}}})
    with pytest.raises(HeaderError, match="not a valid RegisterBrokerBody"):
        list(register_parts(bad, 500))
    with pytest.raises(HeaderError, match="not a valid RegisterBrokerBody"):
        list(register_parts(b"\x93\x01", 500))


async def test_large_whole_table_is_merged_in_steps(tmp_path: Path) -> None:
    rim = RouteInfoManager(lambda: 1000)
    proc = NamesrvProcessors(rim, KVConfigManager(str(tmp_path / "kv.json")), NamesrvConfig())
    ext = {
        "clusterName": "C",
        "brokerAddr": "1.2.3.4:5",
        "brokerName": "b",
        "brokerId": 0,
        "haServerAddr": "",
    }
    names = [f"topic-{i:05d}" for i in range(4000)]
    request = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext=ext, body=body(names))
    pending = proc.register_broker(object(), request)  # type: ignore[arg-type]
    assert not isinstance(pending, RemotingCommand)  # an awaitable: merged in steps
    task = asyncio.ensure_future(pending)  # type: ignore[arg-type]
    seen = []
    while not task.done():  # the loop runs between steps: routes appear part by part
        seen.append(len(rim.topic_list()))
        await asyncio.sleep(0)
    assert (await task).code == 0
    assert rim.topic_list() == names and 500 in seen and 3500 in seen
    # the next registration without one of them drops it, as a whole table does
    again = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext=ext, body=body(names[1:], counter=4))
    answer = proc.register_broker(object(), again)  # type: ignore[arg-type]
    assert not isinstance(answer, RemotingCommand)
    await answer
    assert rim.topic_list() == names[1:]
