"""A whole topic table in one large REGISTER_BROKER body is merged in steps, the loop free between."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgpack
import pytest

from rocketpy.config import NamesrvConfig
from rocketpy.errors import HeaderError
from rocketpy.nameserver.kv_config import KVConfigManager
from rocketpy.nameserver.processors import NamesrvProcessors
from rocketpy.nameserver.register_steps import register_parts, register_parts_of_doc
from rocketpy.nameserver.route_info import RouteInfoManager
from rocketpy.protocol.codes import RequestCode
from rocketpy.remoting.command import SERIALIZE_JSON, RemotingCommand
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


def test_register_parts_refuses_hostile_shapes_before_walking_them() -> None:
    many_keys = msgpack.packb({f"k{i}": i for i in range(200_000)})  # not a RegisterBrokerBody
    with pytest.raises(HeaderError, match="has 200000 keys; the limit is 16"):
        list(register_parts(many_keys, 500))
    huge_version = msgpack.packb({"topicConfigSerializeWrapper": {"dataVersion": [0] * 1_000_000}})
    with pytest.raises(HeaderError, match="exceeds max_array_len"):
        list(register_parts(huge_version, 500))
    huge_topic = msgpack.packb(
        {"topicConfigSerializeWrapper": {"topicConfigTable": {"t": {"x": [0] * 100_000}}}}
    )
    with pytest.raises(HeaderError, match="exceeds max_array_len"):
        list(register_parts(huge_topic, 500))


def test_register_parts_of_a_decoded_json_body() -> None:
    names = [f"t{i}" for i in range(1050)]
    doc = json.loads(
        json.dumps(msgpack.unpackb(body(names), raw=False))
    )  # as RocketMQ's JSON broker sends it
    parts = list(register_parts_of_doc(doc, 500))
    assert [(i, n, len(p.topic_config_table)) for i, n, p in parts] == [(0, 3, 500), (1, 3, 500), (2, 3, 50)]
    assert [t for _, _, p in parts for t in p.topic_config_table] == names
    assert [p.topic_config_table for _, _, p in register_parts_of_doc({}, 500)] == [{}]
    for bad in (
        [1, 2],
        {"topicConfigSerializeWrapper": [1]},
        {"topicConfigSerializeWrapper": {"topicConfigTable": 3}},
    ):
        with pytest.raises(HeaderError, match="not a valid RegisterBrokerBody"):
            list(register_parts_of_doc(bad, 500))


async def test_a_large_json_table_is_decoded_in_slices_and_merged_in_steps(tmp_path: Path) -> None:
    rim = RouteInfoManager(lambda: 1000)
    proc = NamesrvProcessors(rim, KVConfigManager(str(tmp_path / "kv.json")), NamesrvConfig())
    ext = {
        "clusterName": "C",
        "brokerAddr": "1.2.3.4:5",
        "brokerName": "b",
        "brokerId": "0",
        "haServerAddr": "",
    }
    names = [f"topic-{i:05d}" for i in range(3000)]
    text = json.dumps(msgpack.unpackb(body(names), raw=False)).encode()
    request = RemotingCommand(int(RequestCode.REGISTER_BROKER), 1, 0, None, ext, text, SERIALIZE_JSON)
    pending = proc.register_broker(object(), request)  # type: ignore[arg-type]
    assert not isinstance(pending, RemotingCommand)
    assert (await pending).code == 0  # type: ignore[misc]
    assert rim.topic_list() == names
