"""Runs RocketMQ's C++ client (PyPI ``rocketmq`` 0.4.4) in a child process for the conformance test.

Usage: ``python cpp_client_worker.py ROLE NAMESRV TOPIC [GROUP EXPRESSION COUNT DEADLINE_S]``.
Roles: ``produce`` (send_sync of 100 messages with keys, tags and properties, then 10 send_oneway),
``produce_orderly`` (40 send_orderly with arg i over 4 queues), ``consume`` / ``consume_orderly``
(a CLUSTERING push consumer that collects COUNT messages or stops at the deadline). The last stdout
line is one JSON document with the results; a crash of the native client kills this process, and
the test reports it with the client's log.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rocketmq.client import Message, Producer, PushConsumer  # type: ignore[import-not-found]

TAGS = ("TagA", "TagB", "TagC")
COLOR = "café ✓"


def _message(topic: str, i: int) -> Any:
    msg = Message(topic)
    msg.set_keys(f"key-{i} k{i % 7}")
    msg.set_tags(TAGS[i % 3])
    msg.set_property("color", COLOR)
    msg.set_property("seq", str(i))
    msg.set_body(f"body {i} {COLOR} {'x' * (i * 37 % 300)}")
    return msg


def produce(namesrv: str, topic: str) -> dict[str, Any]:
    producer = Producer("cpp_pg")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        sent = []
        for i in range(100):
            r = producer.send_sync(_message(topic, i))
            sent.append({"seq": i, "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset})
        for i in range(100, 110):
            producer.send_oneway(_message(topic, i))
        return {"sent": sent}
    finally:
        producer.shutdown()


def produce_orderly(namesrv: str, topic: str) -> dict[str, Any]:
    producer = Producer("cpp_pg_orderly")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        sent = []
        for i in range(40):
            r = producer.send_orderly(_message(topic, i), i)  # the default selector: queue arg % n
            sent.append({"seq": i, "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset})
        return {"sent": sent}
    finally:
        producer.shutdown()


def consume(
    namesrv: str, topic: str, group: str, expression: str, count: int, deadline_s: float, orderly: bool
) -> dict[str, Any]:
    got: list[dict[str, Any]] = []
    lock = threading.Lock()
    done = threading.Event()

    def on_message(msg: Any) -> None:
        item = {
            "id": msg.id,
            "body": msg.body.decode("utf-8"),
            "tags": msg.tags.decode(),
            "keys": msg.keys.decode(),
            "color": msg.get_property("color").decode("utf-8"),
            "seq": int(msg.get_property("seq")),
            "queue_id": msg.queue_id,
            "queue_offset": msg.queue_offset,
        }
        with lock:
            got.append(item)
            if len(got) >= count:
                done.set()

    consumer = PushConsumer(group, orderly=orderly)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message, expression)
    consumer.start()
    try:
        done.wait(deadline_s)
        time.sleep(0.5)  # a few more would be duplicates: let them show
    finally:
        consumer.shutdown()
    with lock:
        return {"got": list(got)}


def main(argv: list[str]) -> None:
    role, namesrv, topic = argv[:3]
    if role == "produce":
        out = produce(namesrv, topic)
    elif role == "produce_orderly":
        out = produce_orderly(namesrv, topic)
    else:
        group, expression, count, deadline = argv[3], argv[4], int(argv[5]), float(argv[6])
        out = consume(namesrv, topic, group, expression, count, deadline, role == "consume_orderly")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
