"""A Spark driver for the kill -9 test: stream a topic into parquet until killed (or availableNow).

python -m tests.integration.spark_stream_worker NAMESRV TOPIC OUT CHECKPOINT (forever|now)
Prints ``batch N committed`` after each micro-batch so the test knows when to kill it.
"""

from __future__ import annotations

import sys
import time

from rocketpy.spark.local import local_session


def main() -> None:
    ns, topic, out, checkpoint, mode = sys.argv[1:6]
    spark = local_session("rocketpy-kill-test")
    writer = (
        spark.readStream.format("rocketpy")
        .option("namesrvAddr", ns)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 50)
        .load()
        .selectExpr("queue_id", "queue_offset", "cast(body AS string) AS body")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
    )
    if mode == "now":
        q = writer.trigger(availableNow=True).start()
        q.awaitTermination(300)
        print("drained", flush=True)
        return
    q = writer.trigger(processingTime="1 second").start()
    seen = -1
    while True:  # until the test kills this process group
        p = q.lastProgress
        if p and p["batchId"] != seen:
            seen = p["batchId"]
            print(f"batch {seen} committed", flush=True)
        time.sleep(0.2)


if __name__ == "__main__":
    main()
