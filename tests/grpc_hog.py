"""A hostile gRPC client for tests: opens N Telemetry streams on one connection and keeps them.

``python -m tests.grpc_hog HOST:PORT N SECONDS``: each stream writes producer settings; prints
``opened`` once every stream was started, holds them SECONDS, then exits.
"""

from __future__ import annotations

import asyncio
import sys

import grpc

from rocketpy.grpc_api.v2 import definition_pb2 as pb
from rocketpy.grpc_api.v2 import service_pb2 as spb


async def main(addr: str, count: int, seconds: float) -> None:
    async with grpc.aio.insecure_channel(addr) as channel:
        telemetry = channel.stream_stream(
            "/apache.rocketmq.v2.MessagingService/Telemetry",
            request_serializer=spb.TelemetryCommand.SerializeToString,
            response_deserializer=spb.TelemetryCommand.FromString,
        )
        settings = spb.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PRODUCER))
        md = [("x-mq-client-id", "hog"), ("x-mq-language", "PYTHON")]
        calls, writes = [], []
        for _ in range(count):
            call = telemetry(metadata=md, timeout=seconds + 30)
            calls.append(call)
            writes.append(asyncio.ensure_future(call.write(settings)))
        print("opened", flush=True)
        await asyncio.sleep(seconds)
        for call, write in zip(calls, writes, strict=True):
            write.cancel()
            call.cancel()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
