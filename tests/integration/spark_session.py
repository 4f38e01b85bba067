"""One quiet local SparkSession for the Spark connector tests (local[2], loopback, no UI).

``spark_or_skip()`` builds it once per test run, or skips with the reason: pyspark not installed
(``pip install -e '.[spark]'``) or no ``java`` on PATH (Spark 4 needs Java 17). Workers run this
venv's Python, where rocketpy is installed, so they import the connector.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def skip_reason() -> str | None:
    """Why the Spark tests cannot run here (None when they can)."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"pyspark/pyarrow missing ({e}): install the extra with pip install -e '.[spark]'"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no java on PATH: Spark 4 needs Java 17 (apt-get install openjdk-17-jre-headless)"
    return None


def build_session(app: str = "rocketpy-tests", driver_memory: str = "1g") -> Any:
    """A local[2] SparkSession configured to start fast and print little."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    log4j = Path(tempfile.gettempdir()) / "rocketpy-spark-log4j2.properties"
    log4j.write_text(_QUIET_LOG4J)
    spark = (
        SparkSession.builder.master("local[2]")
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
    import rocketpy.spark

    rocketpy.spark.register(spark)
    return spark


_session: Any = None


def spark_or_skip() -> Any:
    """The shared session (built on first use), or a pytest skip saying what is missing."""
    global _session
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    if _session is None:
        _session = build_session()
    return _session
