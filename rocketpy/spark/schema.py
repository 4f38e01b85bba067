"""The row schema of the ``rocketpy`` data source, as Spark DDL and as the Arrow schema it yields.

Owns the column list of a read (one row per message) and its Arrow twin. Spark checks the first
``pyarrow.RecordBatch`` of a partition against ``to_arrow_schema(schema, timezone="UTC")``
exactly (types, nullability, map field names); ``ARROW_SCHEMA`` is that schema built by hand, so
the conversion needs no JVM (a test compares the two). Timestamps are microseconds in UTC.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_DDL = (
    "topic STRING, broker_name STRING, queue_id INT, queue_offset BIGINT, msg_id STRING, "
    "keys ARRAY<STRING>, tags STRING, body BINARY, properties MAP<STRING, STRING>, "
    "born_timestamp TIMESTAMP, store_timestamp TIMESTAMP, reconsume_times INT"
)

TIMESTAMP = pa.timestamp("us", tz="UTC")
PROPERTIES = pa.map_(pa.string(), pa.string())

ARROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("broker_name", pa.string()),
        pa.field("queue_id", pa.int32()),
        pa.field("queue_offset", pa.int64()),
        pa.field("msg_id", pa.string()),
        pa.field("keys", pa.list_(pa.field("element", pa.string()))),
        pa.field("tags", pa.string()),
        pa.field("body", pa.binary()),
        pa.field("properties", PROPERTIES),
        pa.field("born_timestamp", TIMESTAMP),
        pa.field("store_timestamp", TIMESTAMP),
        pa.field("reconsume_times", pa.int32()),
    ]
)

COLUMNS = tuple(ARROW_SCHEMA.names)
