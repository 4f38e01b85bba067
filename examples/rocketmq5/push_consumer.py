"""RocketMQ's official 5.x Python client's PushConsumer consuming from rocketpy (run producer.py first).

Run it in the client's own venv (its top-level package ``rocketmq`` is not rocketpy's):
    ~/rmq5/bin/python examples/rocketmq5/push_consumer.py [ENDPOINT [TOPIC [GROUP [SECONDS]]]]
It consumes for SECONDS (20), then shuts down.
"""

import sys
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
)

endpoint = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:8081"
topic = sys.argv[2] if len(sys.argv) > 2 else "Rmq5Topic"
group = sys.argv[3] if len(sys.argv) > 3 else "Rmq5PushGroup"
seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 20.0


class Printer(MessageListener):
    def consume(self, message):
        # one write a line: the client calls the listener from several threads
        sys.stdout.write(f"consumed: {message.message_id} {message.body.decode()}\n")
        sys.stdout.flush()
        return ConsumeResult.SUCCESS  # FAILURE: delivered again after the group's retry delay


consumer = PushConsumer(
    ClientConfiguration(endpoint, Credentials()), group, Printer(), {topic: FilterExpression()}
)
consumer.startup()
try:
    time.sleep(seconds)
finally:
    consumer.shutdown()
