"""The shared SparkSession of the Spark connector tests, or a skip saying what is missing.

``spark_or_skip()`` builds one quiet ``local[2]`` session per test run
(``rocketpy.spark.local.local_session``), or skips with the reason: pyspark not installed
(``pip install -e '.[spark]'``) or no ``java`` (Spark 4 needs Java 17).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest


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


_session: Any = None


def spark_or_skip() -> Any:
    """The shared session (built on first use), or a pytest skip saying what is missing."""
    global _session
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    if _session is None:
        from rocketpy.spark.local import local_session

        _session = local_session("rocketpy-tests")
    return _session
