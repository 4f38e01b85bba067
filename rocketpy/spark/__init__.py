"""rocketpy's Spark connector: topics as a PySpark data source, batch and streaming, read and write.

Install with ``pip install 'rocketpy[spark]'`` (pyspark >= 4.2 and pyarrow; Spark needs Java 17),
then::

    import rocketpy.spark
    rocketpy.spark.register(spark)
    df = spark.read.format("rocketpy").option("namesrvAddr", "127.0.0.1:9876").option("topic", "T").load()

Modules: ``options`` (names and parsing), ``offsets`` (specs, JSON, ranges, caps), ``schema`` and
``convert`` (rows as Arrow), ``brokers`` and ``pull`` (the SDK calls), ``plan`` (driver-side
offsets), ``source`` (the DataSource and batch reader), ``stream`` (micro-batch reader) and
``sink`` (writers). This package imports pyspark; the rest of rocketpy never imports it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RocketpyDataSource", "register"]


#: Spark's switch for Python data sources' filter pushdown (Spark 4.1+, batch reads, default off).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, pushdown: bool = False) -> None:
    """Make ``format("rocketpy")`` available in the SparkSession ``spark``.

    Registration is per session (``spark.newSession()`` needs its own call). Spark's Python
    workers import this package, so it must be installed in the interpreter they run
    (``PYSPARK_PYTHON``), e.g. with ``pip install 'rocketpy[spark]'``.

    ``pushdown=True``: batch reads take ``tags = '...'`` / ``tags IN (...)`` filters to the brokers
    (Spark's ``pushFilters``, 4.1+; the session needs ``spark.sql.python.filterPushdown.enabled=true``,
    Spark refuses such a source otherwise). Spark 4.3 keeps a Python source's planned read per
    DataFrame and reuses it for a later query on that DataFrame that pushes no filter, pushed tags
    included: with pushdown, give such a query its own ``load()``.

    Raises:
        ValueError: ``pushdown=True`` in a session without Spark's pushdown setting.
    """
    from rocketpy.spark.source import PushdownDataSource, RocketpyDataSource

    if pushdown and str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() != "true":
        raise ValueError(f"register(spark, pushdown=True) needs {PUSHDOWN_CONF}=true in the session")
    spark.dataSource.register(PushdownDataSource if pushdown else RocketpyDataSource)


def __getattr__(name: str) -> Any:
    """``RocketpyDataSource`` imported on first use (pyspark is loaded only then)."""
    if name == "RocketpyDataSource":
        from rocketpy.spark.source import RocketpyDataSource

        return RocketpyDataSource
    raise AttributeError(f"module 'rocketpy.spark' has no attribute {name!r}")
