"""What the dashboard tests share: a running dashboard subprocess, dead letters made for real, the
CSRF token of a page, and the hostile message body the pages must show inert."""

from __future__ import annotations

import asyncio
import re
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from rocketpy import Admin, ConsumeStatus, Message, Producer, PushConsumer
from rocketpy.topic import dlq_topic
from tests.consumer_settings import FAST_CONSUMER
from tests.daemons import daemon_env
from tests.waiting import wait_until_async

#: A body that runs script if a page ever renders it as HTML.
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
#: How the pages must show it: as text.
HOSTILE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
_LISTENING = re.compile(r"rocketpy dashboard on (http://\S+/)")


def csrf_of(page: str) -> str:
    """The CSRF token in a page's forms."""
    m = _CSRF.search(page)
    assert m, "no CSRF token in the page"
    return m.group(1)


async def send(ns: str, topic: str, *messages: Message) -> list[Any]:
    """Send ``messages`` with a throwaway producer; their SendResults."""
    async with Producer("dashboard_test_producer", namesrv_addr=ns) as p:
        return [await p.send(m) for m in messages]


async def total_max_offset(admin: Admin, topic: str) -> int:
    return sum(int(r["max_offset"]) for r in await admin.topic_status(topic))


async def make_dead_letters(ns: str, topic: str, group: str, bodies: list[bytes]) -> None:
    """Send ``bodies`` to ``topic`` and let a consumer of ``group`` fail each once with no retries
    left, so all of them land in ``%DLQ%group``; the consumer is stopped again."""
    consumer = PushConsumer(group, ns, max_reconsume_times=0, **FAST_CONSUMER)
    consumer.subscribe(topic, "*")
    consumer.register_listener(lambda msgs, ctx: ConsumeStatus.RECONSUME_LATER)
    await consumer.start()
    try:
        await send(ns, topic, *(Message(topic, b, keys=f"dead-{i}") for i, b in enumerate(bodies)))
        async with Admin(ns) as admin:

            async def all_dead() -> bool:
                try:
                    return await total_max_offset(admin, dlq_topic(group)) >= len(bodies)
                except Exception:
                    return False

            await wait_until_async(all_dead, 30, interval=0.2, message="the messages in the DLQ")
    finally:
        await consumer.shutdown()


async def traced_message(ns: str, topic: str, group: str, producer_group: str, msg: Message) -> str:
    """Create ``topic``, consume it in ``group`` and send ``msg`` to it, both traced; the message's
    id once its trace shows the send, the consume and the group's CONSUMED progress (the consumer
    is stopped again)."""
    async with Admin(ns) as admin:
        await admin.create_topic(topic, "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
    consumer = PushConsumer(group, ns, enable_trace=True, **FAST_CONSUMER)
    consumer.subscribe(topic, "*")
    consumer.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
    await consumer.start()
    try:
        async with Producer(producer_group, namesrv_addr=ns, enable_trace=True) as producer:
            msg_id = str((await producer.send(msg)).msg_id)
        async with Admin(ns) as admin:

            async def complete() -> bool:
                trace = await admin.query_msg_trace(msg_id)
                kinds = {(e.event, e.group, e.status) for e in trace.events}
                return (
                    ("sent", producer_group, "SEND_OK") in kinds
                    and ("consumed", group, "SUCCESS") in kinds
                    and trace.groups.get(group) == "CONSUMED"
                )

            await wait_until_async(complete, 30, interval=0.3, message="the traced send and consume")
    finally:
        await consumer.shutdown()
    return msg_id


class DashboardProcess:
    """``rocketpy dashboard -n NS --port 0`` as a subprocess; ``url`` from its start line."""

    def __init__(self, ns: str, tmp_path: Path, *extra: str) -> None:
        self.stderr_path = tmp_path / "dashboard.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rocketpy.cli", "dashboard", "-n", ns, "--port", "0", *extra],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=daemon_env(tmp_path, tmp_path),
            text=True,
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 30)  # a deadline for the start line
        line = self.process.stdout.readline() if ready else ""  # "" also when it exited
        m = _LISTENING.search(line)
        if not m:
            self.stop()
            raise AssertionError(f"dashboard did not start: {line!r} {self.stderr_path.read_text()}")
        self.url = m.group(1).rstrip("/")

    def stop(self) -> int:
        """SIGTERM and wait; the exit code."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            code = self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(5)
        if self.process.stdout:
            self.process.stdout.close()
        self._stderr.close()
        return code


def run_async(coro: Any) -> Any:
    """Run a coroutine to completion from sync code that may already have a loop (Playwright's)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(120)
