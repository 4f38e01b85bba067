"""Runs RocketMQ's official 5.x Python client (PyPI ``rocketmq-python-client``) in its own venv.

Started by ``test_rocketmq5_clients.py`` with that venv's interpreter (never rocketpy's): prints
one JSON document on stdout. Credentials come from ``RMQ5_ACCESS_KEY`` / ``RMQ5_SECRET_KEY``
(empty: none, which this client still signs with). Modes (argv: MODE ENDPOINT TOPIC [tls]):

* ``normal``: 3 messages with tag, keys and a property;
* ``fifo``: 6 messages in message groups g0/g1, one after the other;
* ``delay``: 1 message delivered 3 s after its send (``delivery_timestamp`` in epoch seconds);
* ``transaction``: one half message committed by the producer, one rolled back, one left
  undecided that the broker's check resolves through the checker (COMMIT); waits for the check;
* ``wrong_type``: a FIFO message to the topic, whose type the test makes NORMAL (refused).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
    TransactionChecker,
    TransactionResolution,
)

CHECK_WAIT_S = 60.0


def _message(topic: str, body: str, tag: str = "TagA", **extra: Any) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body.encode()
    msg.tag = tag
    msg.keys = f"key-{body}"
    msg.add_property("color", "blue")
    for name, value in extra.items():
        setattr(msg, name, value)
    return msg


class Checker(TransactionChecker):
    """Commits whatever the broker asks about, and remembers it."""

    def __init__(self) -> None:
        self.checked: list[str] = []
        self.event = threading.Event()

    def check(self, message: Message) -> TransactionResolution:
        self.checked.append(message.message_id)
        self.event.set()
        return TransactionResolution.COMMIT


def run(mode: str, endpoint: str, topic: str, tls: bool) -> dict[str, Any]:
    credentials = Credentials(os.environ.get("RMQ5_ACCESS_KEY", ""), os.environ.get("RMQ5_SECRET_KEY", ""))
    config = ClientConfiguration(endpoint, credentials)
    checker = Checker() if mode == "transaction" else None
    producer = Producer(config, (topic,), checker, tls_enable=tls)
    producer.startup()
    out: dict[str, Any] = {"sent": []}
    try:
        if mode == "normal":
            for i in range(3):
                r = producer.send(_message(topic, f"n{i}"))
                out["sent"].append({"id": r.message_id, "offset": r.offset, "body": f"n{i}"})
        elif mode == "fifo":
            for i in range(6):
                r = producer.send(_message(topic, f"f{i}", message_group=f"g{i % 2}"))
                out["sent"].append({"id": r.message_id, "group": f"g{i % 2}", "body": f"f{i}"})
        elif mode == "delay":
            at = int(time.time()) + 3
            r = producer.send(_message(topic, "d0", delivery_timestamp=at))
            out["sent"].append({"id": r.message_id, "body": "d0", "deliver_at": at})
        elif mode == "transaction":
            out.update(_transactions(producer, topic, checker))
        elif mode == "wrong_type":
            try:
                producer.send(_message(topic, "w0", message_group="g0"))
                out["error"] = None
            except Exception as e:  # the refusal is what the test wants to see
                out["error"] = f"{type(e).__name__}: {e}"
    finally:
        producer.shutdown()
    return out


def _transactions(producer: Producer, topic: str, checker: Checker | None) -> dict[str, Any]:
    assert checker is not None
    sent = []
    for body, decide in (("t-commit", "commit"), ("t-rollback", "rollback"), ("t-check", None)):
        transaction = producer.begin_transaction()
        r = producer.send(_message(topic, body), transaction)
        if decide == "commit":
            transaction.commit()
        elif decide == "rollback":
            transaction.rollback()
        sent.append({"id": r.message_id, "body": body, "transaction_id": r.transaction_id})
    checked = checker.event.wait(CHECK_WAIT_S)
    time.sleep(1.0)  # the checker's EndTransaction goes out after check() returns
    return {"sent": sent, "checked": checker.checked if checked else []}


if __name__ == "__main__":
    mode, endpoint, topic = sys.argv[1:4]
    tls = len(sys.argv) > 4 and sys.argv[4] == "tls"
    print(json.dumps(run(mode, endpoint, topic, tls)), flush=True)
