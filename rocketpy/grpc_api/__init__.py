"""RocketMQ 5's gRPC API (``apache.rocketmq.v2``) as protobuf classes, generated from ``proto/``.

``v2/`` holds ``definition_pb2``, ``service_pb2`` and ``admin_pb2``, made by
``scripts/gen_grpc.py`` from apache/rocketmq-apis' v2 protos and committed (docs/design.md §15).
They are registered in rocketpy's own descriptor pool (``pool.POOL``), so a process may also
import another package generated from the same protos (the official 5.x Python client's
``rocketmq.grpc_protocol``) without a duplicate-file clash. Only the broker's gRPC endpoint
(``rocketpy.broker.grpc``), scripts and tests import this package; the SDK never does.
"""
