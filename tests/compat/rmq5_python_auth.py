"""Runs RocketMQ's official 5.x Python client with ACL 2.0 credentials (``RMQ5_ACCESS_KEY`` /
``RMQ5_SECRET_KEY``): starts a producer for the topic and sends one message. Prints one JSON
document: the message id, or the error the client raised (a refusal is what some tests want).

argv: ENDPOINT TOPIC (run with the client's own venv, ``tests/compat/rmq5.py``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rocketmq import ClientConfiguration, Credentials, Message, Producer


def run(endpoint: str, topic: str) -> dict[str, Any]:
    credentials = Credentials(os.environ["RMQ5_ACCESS_KEY"], os.environ["RMQ5_SECRET_KEY"])
    producer = Producer(ClientConfiguration(endpoint, credentials), (topic,))
    out: dict[str, Any] = {"id": None, "error": None}
    try:
        producer.startup()
        msg = Message()
        msg.topic = topic
        msg.body = b"acl2 over grpc"
        out["id"] = producer.send(msg).message_id
    except Exception as e:  # the refusal is what some tests want to see
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        try:
            producer.shutdown()
        except Exception as e:  # a producer that never started may not shut down cleanly
            out["shutdown_error"] = f"{type(e).__name__}: {e}"
    return out


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2])), flush=True)
