"""RocketMQ's official 5.x Python client (pip install rocketmq-python-client) sending to rocketpy.

Run it in the client's own venv (its top-level package ``rocketmq`` is not rocketpy's):
    python3.11 -m venv ~/rmq5 && ~/rmq5/bin/pip install rocketmq-python-client
    .venv/bin/mqadmin updateTopic -n 127.0.0.1:9876 -t Rmq5Topic -c DefaultCluster
    ~/rmq5/bin/python examples/rocketmq5/producer.py [ENDPOINT [TOPIC]]
ENDPOINT is any broker's gRPC endpoint (grpcServerPort, 8081 in conf/broker.properties).
"""

import sys
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoint = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:8081"
topic = sys.argv[2] if len(sys.argv) > 2 else "Rmq5Topic"

producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
producer.startup()
try:
    msg = Message()
    msg.topic, msg.body, msg.tag, msg.keys = topic, b"hello from a RocketMQ 5 client", "TagA", "order-1"
    msg.add_property("region", "eu")
    print("normal:", producer.send(msg).message_id)

    later = Message()
    later.topic, later.body = topic, b"in 10 seconds"
    later.delivery_timestamp = int(time.time()) + 10  # epoch seconds
    print("delay: ", producer.send(later).message_id)
finally:
    producer.shutdown()
