"""rocketpy's own protobuf descriptor pool for the ``apache.rocketmq.v2`` files.

protobuf's default pool refuses a second ``apache/rocketmq/v2/definition.proto`` that differs
from the first; other packages (the 5.x Python client) add theirs there, so rocketpy's generated
modules add theirs here. The well-known types the protos import (Timestamp, Duration) are added
first, from protobuf's own modules.
"""

from __future__ import annotations

from google.protobuf import descriptor_pool, duration_pb2, timestamp_pb2

POOL = descriptor_pool.DescriptorPool()
for _module in (timestamp_pb2, duration_pb2):
    POOL.AddSerializedFile(_module.DESCRIPTOR.serialized_pb)
