"""RocketMQ's official 5.x Python client's SimpleConsumer receiving from rocketpy (run producer.py first).

Run it in the client's own venv (its top-level package ``rocketmq`` is not rocketpy's):
    ~/rmq5/bin/python examples/rocketmq5/simple_consumer.py [ENDPOINT [TOPIC [GROUP]]]
It receives until a receive comes back empty, acking each message.
"""

import sys

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

endpoint = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:8081"
topic = sys.argv[2] if len(sys.argv) > 2 else "Rmq5Topic"
group = sys.argv[3] if len(sys.argv) > 3 else "Rmq5SimpleGroup"

consumer = SimpleConsumer(
    ClientConfiguration(endpoint, Credentials()), group, {topic: FilterExpression()}, await_duration=5
)
consumer.startup()
try:
    while msgs := consumer.receive(16, 15):  # up to 16 messages, invisible for 15 s (10 s at least)
        for msg in msgs:
            print("received:", msg.message_id, msg.body.decode())
            consumer.ack(msg)  # or consumer.change_invisible_duration(msg, 60) to take longer
finally:
    consumer.shutdown()
