"""Errors of the Spark data source that name the option to fix.

Every check of the options (names, values, offsets, credentials) raises ``SparkOptionError``; Spark
shows it as the query's ``AnalysisException`` (planning) or its task or stream failure. It is an
``MQClientError``, so callers that catch the SDK's errors catch these too.
"""

from __future__ import annotations

from rocketpy.errors import MQClientError


class SparkOptionError(MQClientError, ValueError):
    """A data-source option that is unknown, missing or malformed, or that the cluster refuses."""
