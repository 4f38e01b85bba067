"""The shared SparkSession of the Spark connector tests, or a skip saying what is missing.

``spark_or_skip()`` builds one quiet ``local[2]`` session per test run
(``rocketpy.spark.local.local_session``), or skips with the reason: pyspark not installed
(``pip install -e '.[spark]'``) or no ``java`` (Spark 4 needs Java 17).

The JVM (and the Python workers, whose output Spark copies to the JVM's stderr) write to
``jvm_log()``, a file made for the run: the JVM inherits this process's stdout/stderr when it
starts, and pytest swaps those per test, so without the file its output would land in whichever
test's capture happened to be open. Tests read the file (e.g. to check what the workers logged).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
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
_jvm_log: Path | None = None


def jvm_log() -> Path:
    """The file the shared session's JVM and Python workers write to."""
    assert _jvm_log is not None, "the shared session was not started"
    return _jvm_log


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """File descriptors 1 and 2 point at ``path`` meanwhile (a child started now inherits them)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def spark_or_skip() -> Any:
    """The shared session (built on first use), or a pytest skip saying what is missing."""
    global _session, _jvm_log
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    if _session is None:
        from rocketpy.spark.local import local_session

        _jvm_log = Path(tempfile.mkdtemp(prefix="rocketpy-spark-tests-")) / "jvm.log"
        with _output_to(_jvm_log):
            _session = local_session("rocketpy-tests")
    return _session
