"""``MetricsServer``: ``GET /metrics`` over HTTP/1.1 on the daemon's own event loop.

Why on the loop and not prometheus_client's ``start_http_server``: the collectors read tables the
loop mutates (topics, offsets, queues, held pulls) without locks; reading them from another thread
could fail mid-iteration ("dictionary changed size"). So a scrape collects the metric families on
the loop — a pass over the tables, no I/O — and only the text rendering, the part that grows with
the number of samples, runs in a thread. The library's server thread would also give every slow
client a thread of its own with no read deadline.

Bounds: at most ``MAX_CONNECTIONS`` open connections (more are answered 503 and closed); the request
head must arrive within ``READ_DEADLINE_S`` and fit in ``MAX_REQUEST_HEAD_BYTES`` (else the connection
is closed, or 431); the answer must drain within ``WRITE_DEADLINE_S`` (else the connection is
aborted); one request per connection (``Connection: close``); one rendering at a time. Only ``GET``
and ``HEAD`` of ``/metrics`` (any query string) are served: other paths are 404, other methods 405.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator

from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from rocketpy.errors import RemotingBindError

log = logging.getLogger("rocketpy.metrics")

METRICS_PATH = "/metrics"
MAX_CONNECTIONS = 16
MAX_REQUEST_HEAD_BYTES = 8192
READ_DEADLINE_S = 5.0
WRITE_DEADLINE_S = 10.0
CLOSE_DEADLINE_S = 1.0


class MetricsBindError(RemotingBindError):
    """``metricsPort`` cannot be bound; the message names the key to change."""


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class _Snapshot(Collector):
    """Families collected on the loop, plus collectors safe to run in the rendering thread."""

    def __init__(self, families: list[Metric], thread_safe: Iterable[Collector]) -> None:
        self._families = families
        self._thread_safe = thread_safe

    def collect(self) -> Iterator[Metric]:
        yield from self._families
        for collector in self._thread_safe:
            yield from collector.collect()


class _Response:
    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers: dict[str, str] = {}


def _text(status: int, message: str) -> _Response:
    return _Response(status, (message + "\n").encode())


class MetricsServer:
    """Serves ``registry`` (collected on the loop) at ``http://host:port/metrics``.

    Args:
        registry: the daemon's own registry (never the process-global one).
        host: the daemon's bind address.
        port: the ``metricsPort`` (the daemons never pass 0, which means off; here 0 picks a free
            port, as in-process tests do).
        name: the daemon, for logs and errors.
        thread_safe: collectors that touch no loop-owned state (e.g. process figures); they run
            in the rendering thread.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        *,
        name: str,
        thread_safe: Iterable[Collector] = (),
    ) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.name = name
        self._thread_safe = tuple(thread_safe)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._render_lock = asyncio.Lock()

    @classmethod
    def for_daemon(cls, collector: Collector, host: str, port: int, name: str) -> MetricsServer:
        """A server for one daemon: its own registry holding ``collector``, plus the process figures
        (``process_*``: CPU, memory, open files; read from /proc in the rendering thread)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        return cls(registry, host, port, name=name, thread_safe=(ProcessCollector(registry=None),))

    @property
    def url(self) -> str:
        """Where the metrics are served (after ``start``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{METRICS_PATH}"

    async def start(self) -> str:
        """Bind and serve; returns ``url``.

        Raises:
            MetricsBindError: the port cannot be bound (in use, no permission).
        """
        try:
            self._server = await asyncio.start_server(
                self._serve, self.host, self.port, limit=MAX_REQUEST_HEAD_BYTES, reuse_address=True
            )
        except OSError as e:
            raise MetricsBindError(
                f"{self.name} cannot serve metrics on {self.host}:{self.port}: {e.strerror or e}; "
                "choose another metricsPort (0 turns metrics off) or stop the process using it"
            ) from e
        self.port = int(self._server.sockets[0].getsockname()[1])  # the bound one, when 0 was asked
        log.info("%s serves metrics at %s", self.name, self.url)
        return self.url

    async def shutdown(self) -> None:
        """Stop accepting and close every open connection."""
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._server = None

    async def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition text (format chosen by the ``Accept`` header) and its content type."""
        encoder, content_type = choose_encoder(accept)
        async with self._render_lock:
            families = list(self.registry.collect())  # on the loop: reads loop-owned tables
            body = await asyncio.to_thread(encoder, _Snapshot(families, self._thread_safe))
        return body, content_type

    # -- one connection ---------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._writers) >= MAX_CONNECTIONS:
            busy = _text(503, "too many metrics connections; retry later")
            await self._send(writer, busy, head_only=False, unread=reader)
            return
        self._writers.add(writer)
        try:
            head = await self._read_head(reader)
            if head is None:
                writer.transport.abort()
                return
            if isinstance(head, _Response):
                await self._send(writer, head, head_only=False, unread=reader)
                return
            method, response = head[0], await self._answer(*head)
            await self._send(writer, response, head_only=method == "HEAD")
        finally:
            self._writers.discard(writer)

    async def _read_head(self, reader: asyncio.StreamReader) -> tuple[str, str, str] | _Response | None:
        """``(method, path, accept)``, an error answer, or None when the client is too slow or gone."""
        try:
            async with asyncio.timeout(READ_DEADLINE_S):
                raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return _text(431, f"the request head exceeds {MAX_REQUEST_HEAD_BYTES} bytes")
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            return None
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _text(400, "malformed request line; expected: GET /metrics HTTP/1.1")
        accept = ""
        for line in lines[1:]:
            key, sep, value = line.partition(":")
            if sep and key.strip().lower() == "accept":
                accept = value.strip()
        return parts[0], parts[1].split("?", 1)[0], accept

    async def _answer(self, method: str, path: str, accept: str) -> _Response:
        if path != METRICS_PATH:
            return _text(404, f"not found; the metrics are at {METRICS_PATH}")
        if method not in ("GET", "HEAD"):
            response = _text(405, f"{METRICS_PATH} answers GET and HEAD only")
            response.headers["Allow"] = "GET, HEAD"
            return response
        try:
            body, content_type = await self.render(accept)
        except Exception:  # a collector bug must not take the daemon down: answer 500 and log it
            log.exception("%s: collecting metrics failed", self.name)
            return _text(500, "collecting metrics failed; see the daemon's log")
        return _Response(200, body, content_type)

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        response: _Response,
        *,
        head_only: bool,
        unread: asyncio.StreamReader | None = None,
    ) -> None:
        """Write ``response`` and close. ``unread``: the request was not read to its end; closing a
        socket with unread input sends RST, which can destroy the answer before the client reads
        it, so the write side is shut first and the rest of the input discarded until the client
        closes (a lingering close, bounded by ``CLOSE_DEADLINE_S``)."""
        headers = {
            "Content-Type": response.content_type,
            "Content-Length": str(len(response.body)),
            "Connection": "close",
            **response.headers,
        }
        head = f"HTTP/1.1 {response.status} {_REASONS[response.status]}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        writer.write(head.encode("latin-1"))
        if not head_only:
            writer.write(response.body)
        try:
            async with asyncio.timeout(WRITE_DEADLINE_S):
                await writer.drain()
            if unread is not None and writer.can_write_eof():
                writer.write_eof()
                async with asyncio.timeout(CLOSE_DEADLINE_S):
                    while await unread.read(1 << 16):
                        pass
            writer.close()
            async with asyncio.timeout(CLOSE_DEADLINE_S):
                await writer.wait_closed()
        except (TimeoutError, ConnectionError):
            writer.transport.abort()
