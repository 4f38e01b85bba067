"""The blocking twins (rocketpy.sync) against real daemons: same names, blocking methods.

Runs on the session cluster of rocketpy's own pytest plugin (``rocketpy_cluster``, a fresh
``rocketpy_topic`` with 4 queues): the same fixtures a user's test suite gets.
"""

from __future__ import annotations

import threading
from typing import Any

from rocketpy.sync import (
    Admin,
    ConsumeFromWhere,
    ConsumeStatus,
    LitePullConsumer,
    Message,
    Producer,
    PushConsumer,
)
from rocketpy.testing import RocketpyCluster
from tests.waiting import wait_until


def test_blocking_producer_consumers_and_admin(
    rocketpy_cluster: RocketpyCluster, rocketpy_topic: str
) -> None:
    ns = rocketpy_cluster.namesrv_addr
    topic = rocketpy_topic
    admin = Admin(ns)
    admin.start()
    assert topic in admin.topic_list()
    admin.shutdown()

    with Producer("pg_sync", namesrv_addr=ns) as producer:
        results = [producer.send(Message(topic, b"s%d" % i)) for i in range(20)]
        assert all(r.status.name == "SEND_OK" for r in results)
        fut = producer.send_async(Message(topic, b"s20"))
        assert fut.result(10).status.name == "SEND_OK"  # a concurrent.futures.Future

    got: set[bytes] = set()
    lock = threading.Lock()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        with lock:
            got.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "g_sync",
        ns,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval=1.0,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    consumer.start()
    try:
        wait_until(lambda: len(got) == 21, 20, message="blocking consumer got everything")
        assert len(consumer.assigned_queues()) == 4
    finally:
        consumer.shutdown()

    pull = LitePullConsumer("g_sync_lite", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    pull.subscribe(topic, "*")
    pull.start()
    try:
        polled: list[Any] = []
        wait_until(lambda: polled.extend(pull.poll(timeout=0.2)) or len(polled) >= 21, 20)
    finally:
        pull.shutdown()
