"""OpenTelemetry spans of traced producers and consumers, when ``opentelemetry-api`` is installed.

Owns ``otel_spans()``: None without the package (nothing else changes), else a ``Spans`` object
the trace hooks (``client/trace.py``) call after a send and after each consumed message. Spans
are ended with the times the hooks measured (``start_time``/``end_time`` in ns), so they cost no
context switches on the hot path: a ``PRODUCER`` span ``{topic} send`` and a ``CONSUMER`` span
``{topic} process``, with OpenTelemetry's messaging attributes (``messaging.system=rocketmq``,
``messaging.destination.name``, ``messaging.message.id``, ``messaging.rocketmq.client_group``,
``messaging.rocketmq.message.tag``/``.keys``). Which exporter receives them is the application's
choice (its ``TracerProvider``); with the API alone (no SDK) the spans are no-ops.
"""

from __future__ import annotations

from typing import Any

from rocketpy.message import Message, MessageExt

SCOPE = "rocketpy"


def otel_spans() -> Spans | None:
    """A span maker when ``opentelemetry-api`` is importable, else None."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return Spans(trace)


class Spans:
    """Ends one span per traced send and per consumed message."""

    def __init__(self, trace_api: Any) -> None:
        self._api = trace_api
        self._tracer = trace_api.get_tracer(SCOPE)

    def _attributes(self, group: str, topic: str, msg_id: str, msg: Message | MessageExt) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "messaging.system": "rocketmq",
            "messaging.destination.name": topic,
            "messaging.message.id": msg_id,
            "messaging.rocketmq.client_group": group,
        }
        if msg.tags:
            attrs["messaging.rocketmq.message.tag"] = msg.tags
        if msg.keys:
            attrs["messaging.rocketmq.message.keys"] = (
                list(msg.keys) if not isinstance(msg.keys, str) else [msg.keys]
            )
        return attrs

    def send(self, group: str, msg: Message, result: Any, begin_ms: int, cost_ms: int) -> None:
        """A ``PRODUCER`` span for one stored message."""
        attrs = self._attributes(group, msg.topic, result.msg_id, msg)
        attrs["messaging.operation"] = "publish"
        start_ns = begin_ms * 1_000_000
        span = self._tracer.start_span(
            f"{msg.topic} send", kind=self._api.SpanKind.PRODUCER, attributes=attrs, start_time=start_ns
        )
        span.end(end_time=start_ns + cost_ms * 1_000_000)

    def process(self, group: str, msg: MessageExt, begin_s: float, end_s: float, ok: bool) -> None:
        """A ``CONSUMER`` span for one consumed message (its status ERROR when the listener failed)."""
        attrs = self._attributes(group, msg.topic, msg.msg_id, msg)
        attrs["messaging.operation"] = "process"
        attrs["messaging.rocketmq.message.reconsume_times"] = msg.reconsume_times
        span = self._tracer.start_span(
            f"{msg.topic} process",
            kind=self._api.SpanKind.CONSUMER,
            attributes=attrs,
            start_time=int(begin_s * 1e9),
        )
        if not ok:
            span.set_status(self._api.Status(self._api.StatusCode.ERROR, "consume failed"))
        span.end(end_time=int(end_s * 1e9))
