"""``serialize_type=`` on every client class: the wire encoding per client, the environment as default.

Runs on the session cluster of rocketpy's pytest plugin (``rocketpy_cluster``, ``rocketpy_topic``).
"""

from __future__ import annotations

import pytest

from rocketpy import Admin, LitePullConsumer, Message, Producer, PushConsumer
from rocketpy.client.instance import ClientSettings
from rocketpy.errors import MQClientError
from rocketpy.remoting.command import SERIALIZE_JSON, SERIALIZE_MSGPACK
from rocketpy.testing import RocketpyCluster
from tests.waiting import wait_until_async


@pytest.mark.parametrize("make", [
    lambda **kw: Producer("pg", "127.0.0.1:1", **kw),
    lambda **kw: PushConsumer("cg", "127.0.0.1:1", **kw),
    lambda **kw: LitePullConsumer("cg", "127.0.0.1:1", **kw),
    lambda **kw: Admin("127.0.0.1:1", **kw),
])  # fmt: skip
def test_option_wins_over_the_environment(make: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETPY_SERIALIZE_TYPE", "msgpack")
    assert make(serialize_type="json").settings.serialize_code == SERIALIZE_JSON  # type: ignore[operator]
    assert make().settings.serialize_code == SERIALIZE_MSGPACK  # type: ignore[operator]
    monkeypatch.setenv("ROCKETPY_SERIALIZE_TYPE", "json")
    assert make().settings.serialize_code == SERIALIZE_JSON  # type: ignore[operator]
    assert make(serialize_type="msgpack").settings.serialize_code == SERIALIZE_MSGPACK  # type: ignore[operator]


def test_unknown_encoding_says_which_to_use() -> None:
    with pytest.raises(MQClientError, match="serialize_type='xml' is not valid: use 'msgpack' or 'json'"):
        ClientSettings(serialize_type="xml").check()
    with pytest.raises(MQClientError, match="use 'msgpack' or 'json'"):
        PushConsumer("cg", "127.0.0.1:1", serialize_type="xml")


async def test_json_producer_and_msgpack_consumer_share_a_broker(
    rocketpy_cluster: RocketpyCluster, rocketpy_topic: str
) -> None:
    ns = rocketpy_cluster.namesrv_addr
    async with Producer("pg_json_option", ns, serialize_type="json") as producer:
        assert producer._instance is not None and producer._instance.remoting.serialize_type == SERIALIZE_JSON
        sent = [await producer.send(Message(rocketpy_topic, b"j%d" % i, keys=[f"k{i}"])) for i in range(10)]
    consumer = LitePullConsumer(
        "cg_msgpack_option", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET", serialize_type="msgpack"
    )
    consumer.subscribe(rocketpy_topic, "*")
    await consumer.start()
    try:
        got: list[object] = []

        async def all_polled() -> bool:
            got.extend(await consumer.poll(timeout=0.2))
            return len(got) >= 10

        await wait_until_async(all_polled, 20.0, message="the msgpack consumer reads what JSON sent")
    finally:
        await consumer.shutdown()
    assert sorted(m.msg_id for m in got) == sorted(r.msg_id for r in sent)  # type: ignore[attr-defined]
