"""Spark batch: read a range of a topic into a DataFrame, show it, write a transformed copy back.

Needs the Spark extra and Java 17: pip install 'rocketpy[spark]'.

python examples/spark_batch.py -n 127.0.0.1:9876 -t SparkBatchDemo -c 100
"""

import argparse
import asyncio
import json

from rocketpy import Admin, Message, Producer
from rocketpy.spark.local import local_session


async def send_demo_messages(args: argparse.Namespace) -> None:
    """Create the topics and send ``count`` small JSON messages (tags: the item's colour)."""
    async with Admin(args.namesrv) as admin:
        for topic in (args.topic, f"{args.topic}Upper"):
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=4, write_queue_nums=4)
    async with Producer("spark_batch_demo", namesrv_addr=args.namesrv) as producer:
        colours = ["red", "green", "blue"]
        msgs = [
            Message(args.topic, json.dumps({"n": i, "colour": colours[i % 3]}).encode(), tags=colours[i % 3])
            for i in range(args.count)
        ]
        for i in range(0, len(msgs), 100):
            await producer.send_batch(msgs[i : i + 100])
    print(f"sent {args.count} messages to {args.topic}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--namesrv", default="127.0.0.1:9876")
    ap.add_argument("-t", "--topic", default="SparkBatchDemo")
    ap.add_argument("-c", "--count", type=int, default=100)
    args = ap.parse_args()
    asyncio.run(send_demo_messages(args))

    spark = local_session("spark_batch example")
    try:
        df = (
            spark.read.format("rocketpy")
            .option("namesrvAddr", args.namesrv)
            .option("topic", args.topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
        )
        df.selectExpr("queue_id", "queue_offset", "tags", "cast(body AS string) AS body").show(
            5, truncate=False
        )
        for row in df.groupBy("tags").count().orderBy("tags").collect():
            print(f"tag {row.tags}: {row['count']} messages")
        upper = df.selectExpr(
            "upper(cast(body AS string)) AS body", "tags", "cast(queue_offset AS string) AS keys"
        )
        upper.write.format("rocketpy").mode("append").option("namesrvAddr", args.namesrv).option(
            "topic", f"{args.topic}Upper"
        ).save()
        copied = (
            spark.read.format("rocketpy")
            .option("namesrvAddr", args.namesrv)
            .option("topic", f"{args.topic}Upper")
        ).load()
        print(f"wrote {upper.count()} rows to {args.topic}Upper, which now holds {copied.count()} messages")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
