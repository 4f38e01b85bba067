"""A streaming pipeline: JSON order events -> revenue per product per minute -> parquet + a topic.

One command runs the three parts against a running cluster (e.g. the quick start's):

1. a producer thread sends ``--orders`` JSON order events to ``Orders`` over ``--seconds``;
   their event time advances one simulated minute every ``--per-minute`` orders;
2. a Structured Streaming query reads the topic, parses the JSON, and sums revenue per product
   per one-minute event-time window with a one-minute watermark (append mode: a window is written
   once the watermark has passed it);
3. every closed window goes to parquet (``--out``) and, as JSON, to the topic ``Revenue`` (one
   product -> one queue, via orderKey): two queries over the same aggregation, each with its
   own checkpoint.

It prints progress each micro-batch (with how far the stream is behind), then the parquet result
and what arrived in ``Revenue``.

python examples/spark_pipeline.py -n 127.0.0.1:9876 --orders 600 --seconds 10

Against a cluster with ACL on, give an account in the environment and add ``--acl``. The account
needs admin rights: the example creates its topics, and the exactly-once stream sink records its
micro-batches in the NameServers' KV table. Spark's workers inherit the environment and sign with
it, so the secret is in no Spark option or plan:

ROCKETPY_ACCESS_KEY=rocketmq2 ROCKETPY_SECRET_KEY=12345678 python examples/spark_pipeline.py --acl
"""

import argparse
import asyncio
import json
import os
import random
import tempfile
import threading
import time

from rocketpy import Admin, Message, Producer
from rocketpy.spark.local import local_session

PRODUCTS = {"apple": 1.5, "bread": 3.0, "cheese": 7.25, "dates": 4.0}
EVENT_SCHEMA = "order_id BIGINT, product STRING, quantity INT, price DOUBLE, ts TIMESTAMP"


def account(args: argparse.Namespace) -> dict:
    """The SDK's account arguments (``--acl``: from the environment), else none."""
    if not args.acl:
        return {}
    keys = (os.environ.get("ROCKETPY_ACCESS_KEY"), os.environ.get("ROCKETPY_SECRET_KEY"))
    if not all(keys):
        raise SystemExit("--acl: set ROCKETPY_ACCESS_KEY and ROCKETPY_SECRET_KEY to an admin account")
    return {"access_key": keys[0], "secret_key": keys[1]}


async def create_topics(args: argparse.Namespace) -> None:
    async with Admin(args.namesrv, **account(args)) as admin:
        for topic in (args.topic, args.out_topic):
            await admin.create_topic(topic, "DefaultCluster", read_queue_nums=4, write_queue_nums=4)


async def produce_orders(args: argparse.Namespace) -> None:
    """Send the order events, spread over ``args.seconds``."""
    rng = random.Random(7)
    start_minute = int(time.time()) // 60 * 60 - 60 * (args.orders // args.per_minute + 1)
    async with Producer("spark_pipeline_orders", namesrv_addr=args.namesrv, **account(args)) as producer:
        for i in range(args.orders):
            product = rng.choice(sorted(PRODUCTS))
            event = {
                "order_id": i,
                "product": product,
                "quantity": rng.randint(1, 5),
                "price": PRODUCTS[product],
                "ts": time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime(start_minute + 60 * (i // args.per_minute) + i % 60)
                ),
            }
            await producer.send(Message(args.topic, json.dumps(event).encode(), tags=product, keys=str(i)))
            await asyncio.sleep(args.seconds / args.orders)
    print(f"producer: sent {args.orders} orders to {args.topic}")


def build_queries(spark, args: argparse.Namespace, out_dir: str, checkpoints: str):
    """The pipeline: parse, aggregate with a watermark, and two sinks (parquet, topic)."""
    from pyspark.sql import functions as F

    orders = (
        spark.readStream.format("rocketpy")
        .option("namesrvAddr", args.namesrv)
        .option("topic", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 500)
        .load()
        .select(F.from_json(F.col("body").cast("string"), EVENT_SCHEMA).alias("o"))
        .select("o.*")
    )
    revenue = (
        orders.withWatermark("ts", "1 minute")
        .groupBy(F.window("ts", "1 minute").alias("minute"), "product")
        .agg(F.sum(F.col("quantity") * F.col("price")).alias("revenue"), F.count("*").alias("orders"))
        .select(
            F.col("minute.start").alias("minute"), "product", F.round("revenue", 2).alias("revenue"), "orders"
        )
    )
    to_parquet = (
        revenue.writeStream.outputMode("append")
        .format("parquet")
        .option("path", out_dir)
        .option("checkpointLocation", f"{checkpoints}/parquet")
        .trigger(processingTime="2 seconds")
        .start()
    )
    _wait_running(to_parquet)  # two queries starting at once compete for a small machine's cores
    to_topic = (
        revenue.select(
            F.to_json(F.struct("minute", "product", "revenue", "orders")).alias("body"),
            F.col("product").alias("orderKey"),  # one product -> one queue
            F.lit("revenue").alias("tags"),
        )
        .writeStream.outputMode("append")
        .format("rocketpy")
        .option("namesrvAddr", args.namesrv)
        .option("topic", args.out_topic)
        .option("checkpointLocation", f"{checkpoints}/topic")
        .trigger(processingTime="2 seconds")
        .start()
    )
    return to_parquet, to_topic


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--namesrv", default="127.0.0.1:9876")
    ap.add_argument("-t", "--topic", default="Orders")
    ap.add_argument("--out-topic", default="Revenue")
    ap.add_argument("--orders", type=int, default=600)
    ap.add_argument("--per-minute", type=int, default=100, help="orders per simulated minute")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the producer sends")
    ap.add_argument("--out", default=None, help="parquet directory (default: a new temporary one)")
    ap.add_argument(
        "--acl", action="store_true", help="sign with ROCKETPY_ACCESS_KEY / ROCKETPY_SECRET_KEY (ACL on)"
    )
    args = ap.parse_args()
    asyncio.run(create_topics(args))
    work = tempfile.mkdtemp(prefix="rocketpy-pipeline-")
    out_dir = args.out or f"{work}/revenue.parquet"

    spark = local_session("spark_pipeline example")
    try:
        queries = build_queries(spark, args, out_dir, f"{work}/checkpoints")
        producer = threading.Thread(target=asyncio.run, args=(produce_orders(args),))
        producer.start()
        deadline = time.monotonic() + args.seconds + 300
        while producer.is_alive() or any(_behind(q) for q in queries):
            if time.monotonic() > deadline:
                raise SystemExit("pipeline: the stream did not catch up within its deadline")
            for name, q in zip(("parquet", "topic"), queries, strict=True):
                p = q.lastProgress
                if p:
                    print(
                        f"pipeline ({name}): batch {p['batchId']}: {p['numInputRows']} orders read{_lag(p)}"
                    )
            time.sleep(2)
        producer.join()
        for q in queries:
            q.stop()
        result = spark.read.parquet(out_dir).orderBy("minute", "product")
        result.show(40, truncate=False)
        print(f"parquet: {result.count()} (minute, product) rows in {out_dir}")
        in_topic = (
            spark.read.format("rocketpy")
            .option("namesrvAddr", args.namesrv)
            .option("topic", args.out_topic)
            .load()
        )
        print(f"topic {args.out_topic}: {in_topic.count()} revenue messages")
    finally:
        spark.stop()


def _wait_running(query, timeout_s: float = 300.0) -> None:
    """Until ``query`` has started its sources (its first trigger began), or it failed."""
    deadline = time.monotonic() + timeout_s
    while query.status["message"] == "Initializing sources" and time.monotonic() < deadline:
        if query.exception() is not None:
            raise SystemExit(f"pipeline: query failed: {query.exception()}")
        time.sleep(0.2)


def _lag(progress) -> str:
    """How far the source is behind (the connector reports it beside the newest offsets)."""
    latest = progress["sources"][0].get("latestOffset") if progress["sources"] else None
    if not latest:
        return ""
    lag = json.loads(latest)
    if "maxOffsetsBehindLatest" not in lag:
        return ""
    return f", {lag['maxOffsetsBehindLatest']} behind ({lag.get('maxSecondsBehindLatest', '?')} s)"


def _behind(query) -> bool:
    """True until the query has run and its last micro-batch read nothing (it has caught up)."""
    if query.exception() is not None:
        raise SystemExit(f"pipeline: query failed: {query.exception()}")
    p = query.lastProgress
    return not p or p["numInputRows"] > 0


if __name__ == "__main__":
    main()
