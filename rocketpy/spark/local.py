"""A quiet local SparkSession with the rocketpy data source registered (examples, tools, tests).

Owns the settings that make ``local[N]`` start quickly and print little on a small machine:
loopback addresses (``SPARK_LOCAL_IP``), this interpreter for the Python workers
(``PYSPARK_PYTHON``), no UI or progress bars, two shuffle partitions, log4j at error level.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rocketpy.spark import register

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def local_session(app: str = "rocketpy", driver_memory: str = "1g", master: str = "local[2]") -> Any:
    """A local SparkSession that starts fast, prints little and has ``format("rocketpy")`` registered."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    fd, name = tempfile.mkstemp(prefix="rocketpy-spark-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_QUIET_LOG4J)
    log4j = Path(name)
    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", driver_memory)
        .config(
            "spark.driver.extraJavaOptions",
            f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dlog4j.configurationFile=file:{log4j}",
        )
        .config("spark.sql.pyspark.jvmStacktrace.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    register(spark)
    return spark
