"""MetricsServer in-process: a per-server registry, a collector that fails answers 500 and the
server goes on serving, OpenMetrics on request, HEAD, shutdown closes the port."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from rocketpy.metrics import MetricsServer


class Flaky(Collector):
    """Raises while ``broken``; else one gauge whose value counts the collections."""

    def __init__(self) -> None:
        self.broken = True
        self.calls = 0

    def collect(self) -> Iterator[Metric]:
        self.calls += 1
        if self.broken:
            raise RuntimeError("collector bug")
        yield GaugeMetricFamily("rocketpy_test_calls", "Collections so far.", value=self.calls)


async def get(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    try:
        return await asyncio.wait_for(reader.read(), 5.0)
    finally:
        writer.close()


async def test_failing_collector_answers_500_and_serving_goes_on() -> None:
    flaky = Flaky()
    server = MetricsServer.for_daemon(flaky, "127.0.0.1", 0, "test")
    await server.start()
    assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/metrics"
    try:
        raw = await get(server.port, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert raw.startswith(b"HTTP/1.1 500 ") and b"see the daemon's log" in raw
        flaky.broken = False
        raw = await get(server.port, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert raw.startswith(b"HTTP/1.1 200 ")
        families = {f.name: f for f in text_string_to_metric_families(raw.partition(b"\r\n\r\n")[2].decode())}
        assert families["rocketpy_test_calls"].samples[0].value == 2
        assert "process_cpu_seconds" in families  # the process figures, collected in the thread
        head = await get(server.port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")
        om = await get(server.port, b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n")
        assert b"Content-Type: application/openmetrics-text" in om and om.endswith(b"# EOF\n")
    finally:
        await server.shutdown()
    try:
        await asyncio.open_connection("127.0.0.1", server.port)
    except ConnectionRefusedError:
        pass
    else:
        raise AssertionError("the metrics port still accepts connections after shutdown")


async def test_registries_are_per_server() -> None:
    a, b = CollectorRegistry(auto_describe=False), CollectorRegistry(auto_describe=False)
    a.register(Flaky())
    assert list(b.collect()) == []  # two daemons in one process do not see each other's metrics
    server = MetricsServer(b, "127.0.0.1", 0, name="b")
    body, content_type = await server.render()
    assert body == b"" and content_type.startswith("text/plain")
