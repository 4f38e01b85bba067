"""Runs RocketMQ's official 5.x Python client's consumers (PyPI ``rocketmq-python-client``) in its own venv.

Started by ``test_rocketmq5_clients.py`` with that venv's interpreter (never rocketpy's); prints one
JSON document on stdout. argv: MODE ENDPOINT TOPIC GROUP COUNT. Modes:

* ``simple``: a SimpleConsumer receives until COUNT messages came; it changes the first one's
  invisible duration (the client takes the new receipt handle from the answer) and acks every
  message, that one with its new handle;
* ``push``: a PushConsumer whose listener fails the message with body ``fail-once`` the first
  time (the client changes its invisible time to the retry policy's delay) and consumes the others;
  runs until COUNT messages were consumed;
* ``fifo``: a PushConsumer of a FIFO group; records the order each message group came in.

The time a message was consumed at is not reported: the checks are on ids, bodies, attempts and
order.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
    SimpleConsumer,
)

WAIT_S = 90.0
INVISIBLE_S = 15  # the broker's minInvisibleTimeMillsForRecv is 10 s
CHANGED_S = 20


def _view(msg: Any) -> dict[str, Any]:
    return {
        "id": msg.message_id,
        "body": msg.body.decode(),
        "attempt": msg.delivery_attempt,
        "tag": msg.tag,
        "group": msg.message_group,
        "props": dict(msg.properties),
    }


def simple(endpoint: str, topic: str, group: str, count: int) -> dict[str, Any]:
    config = ClientConfiguration(endpoint, Credentials())
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    received: list[dict[str, Any]] = []
    changed = None
    try:
        deadline = time.monotonic() + WAIT_S
        while len(received) < count and time.monotonic() < deadline:
            for msg in consumer.receive(32, INVISIBLE_S):
                if changed is None:
                    before = msg.receipt_handle
                    consumer.change_invisible_duration(msg, CHANGED_S)
                    changed = {"id": msg.message_id, "new_handle": msg.receipt_handle != before}
                consumer.ack(msg)
                received.append(_view(msg))
    finally:
        consumer.shutdown()
    return {"received": received, "changed": changed}


class Recorder(MessageListener):
    """Records each consumption; fails ``fail-once`` on its first delivery."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.lock = threading.Lock()
        self.seen: list[dict[str, Any]] = []
        self.done = threading.Event()

    def consume(self, message: Any) -> ConsumeResult:
        view = _view(message)
        with self.lock:
            failing = view["body"] == "fail-once" and not any(s["body"] == "fail-once" for s in self.seen)
            view["result"] = "FAILURE" if failing else "SUCCESS"
            self.seen.append(view)
            if sum(s["result"] == "SUCCESS" for s in self.seen) >= self.count:
                self.done.set()
        return ConsumeResult.FAILURE if failing else ConsumeResult.SUCCESS


def push(endpoint: str, topic: str, group: str, count: int) -> dict[str, Any]:
    config = ClientConfiguration(endpoint, Credentials())
    recorder = Recorder(count)
    consumer = PushConsumer(config, group, recorder, {topic: FilterExpression()})
    consumer.startup()
    try:
        finished = recorder.done.wait(WAIT_S)
        time.sleep(1.0)  # the last acks go out after consume() returns
    finally:
        consumer.shutdown()
    return {"consumed": recorder.seen, "finished": finished}


if __name__ == "__main__":
    mode, endpoint, topic, group, count = sys.argv[1:6]
    run = simple if mode == "simple" else push
    print(json.dumps(run(endpoint, topic, group, int(count))), flush=True)
