"""``rocketpy bench producer|consumer``: load generators through the SDK, like RocketMQ's benchmark tool.

Owns the click group ``bench`` and its statistics: a ``Stats`` window per report interval (count,
failures, RT sum/max) printed every second as
``Send TPS: N | Max RT(ms): N | Average RT(ms): x.xxx | Send Failed: N`` (consumer: ``Consume TPS``,
born-to-consume and store-to-consume RT), a progress bar on stderr only when it is a terminal, and a
``[Complete]`` summary line, whose rates run from the client's start to the end of the work (its
shutdown left out: a traced client's flush, say; the ``[CPU]`` line counts both). Runs are bounded
by ``--duration`` seconds and/or ``--count`` messages.
Run standalone with ``python -m rocketpy.bench producer ...``.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from typing import Any

import click

from rocketpy.errors import RocketpyError

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
#: Round trips kept for the percentiles of the summary (a bounded sample: the first ones of a run).
MAX_RT_SAMPLES = 2_000_000


class Stats:
    """Counters of one benchmark: totals plus the current report window."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        #: when the work ended (set before the client's shutdown, which the rates leave out)
        self.finished: float | None = None
        self.total = 0
        self.failed = 0
        self.rt_sum_ms = 0.0
        self.rt_max_ms = 0.0
        self.s2c_sum_ms = 0.0
        self.s2c_max_ms = 0.0
        self._window = (0, 0, 0.0, 0.0, 0.0, 0.0)
        self._window_started = self.started
        self.rt_samples: list[float] = []

    def ok(self, n: int, rt_ms: float, s2c_ms: float = 0.0) -> None:
        """Record ``n`` messages done with round trip (or born-to-consume) ``rt_ms``."""
        self.total += n
        if len(self.rt_samples) < MAX_RT_SAMPLES:
            self.rt_samples.append(rt_ms)
        self.rt_sum_ms += rt_ms * n
        if rt_ms > self.rt_max_ms:
            self.rt_max_ms = rt_ms
        self.s2c_sum_ms += s2c_ms * n
        if s2c_ms > self.s2c_max_ms:
            self.s2c_max_ms = s2c_ms

    def fail(self, n: int = 1) -> None:
        """Record ``n`` failed messages."""
        self.failed += n

    def take_window(self) -> dict[str, float]:
        """The figures since the last call (TPS, avg/max RT, failures), and start a new window."""
        now = time.perf_counter()
        total0, failed0, rt0, s2c0, _, _ = self._window
        n = self.total - total0
        elapsed = max(now - self._window_started, 1e-9)
        out = {
            "tps": n / elapsed,
            "avg_rt_ms": (self.rt_sum_ms - rt0) / n if n else 0.0,
            "max_rt_ms": self.rt_max_ms,
            "avg_s2c_ms": (self.s2c_sum_ms - s2c0) / n if n else 0.0,
            "max_s2c_ms": self.s2c_max_ms,
            "failed": self.failed - failed0,
        }
        self._window = (self.total, self.failed, self.rt_sum_ms, self.s2c_sum_ms, 0.0, 0.0)
        self._window_started = now
        self.rt_max_ms = 0.0 if n else self.rt_max_ms
        self.s2c_max_ms = 0.0 if n else self.s2c_max_ms
        return out

    def begin(self) -> None:
        """Start the run's clock (and the report window's) now: the client has started."""
        self.started = self._window_started = time.perf_counter()

    def summary(self) -> dict[str, float]:
        """Whole-run figures (RT percentiles over the kept round trips, one per send call), the rates
        from ``started`` (after the client's start) to ``finished`` (before its shutdown)."""
        end = time.perf_counter() if self.finished is None else self.finished
        elapsed = max(end - self.started, 1e-9)
        rts = sorted(self.rt_samples)
        return {
            "p50_rt_ms": rts[len(rts) // 2] if rts else 0.0,
            "p99_rt_ms": rts[min(len(rts) - 1, len(rts) * 99 // 100)] if rts else 0.0,
            "total": self.total,
            "failed": self.failed,
            "seconds": elapsed,
            "tps": self.total / elapsed,
            "avg_rt_ms": self.rt_sum_ms / self.total if self.total else 0.0,
            # time-average of messages in flight (Little's law: the round trips summed over the run)
            "in_flight": self.rt_sum_ms / 1000.0 / elapsed,
        }


def progress_bar(done: int, goal: int, width: int = 30) -> str:
    """``[#####.....]  50%``."""
    frac = min(done / goal, 1.0) if goal else 0.0
    filled = int(frac * width)
    return f"[{'#' * filled}{'.' * (width - filled)}] {frac * 100:5.1f}%"


async def _reporter(stats: Stats, kind: str, goal: int, interval_s: float, max_rt_ms: list[float]) -> None:
    tty = sys.stderr.isatty()
    while True:
        await asyncio.sleep(interval_s)
        w = stats.take_window()
        max_rt_ms[0] = max(max_rt_ms[0], w["max_rt_ms"])
        stamp = time.strftime("%H:%M:%S")
        if kind == "send":
            line = (
                f"{stamp} | Send TPS: {w['tps']:.0f} | Max RT(ms): {w['max_rt_ms']:.3f} |"
                f" Average RT(ms): {w['avg_rt_ms']:.3f} | Send Failed: {w['failed']:.0f}"
            )
        else:
            line = (
                f"{stamp} | Consume TPS: {w['tps']:.0f} | AVG(B2C) RT(ms): {w['avg_rt_ms']:.3f} |"
                f" AVG(S2C) RT(ms): {w['avg_s2c_ms']:.3f} | MAX(B2C) RT(ms): {w['max_rt_ms']:.3f} |"
                f" MAX(S2C) RT(ms): {w['max_s2c_ms']:.3f} | Consume Fail: {w['failed']:.0f}"
            )
        click.echo(line)
        if tty and goal:
            click.echo("\r" + progress_bar(stats.total, goal), err=True, nl=False)


async def run_producer(
    namesrv: str,
    topic: str,
    body_size: int,
    concurrency: int,
    batch: int,
    duration_s: float,
    count: int,
    mode: str,
    interval_s: float = 1.0,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    auto_batch: bool = True,
    enable_trace: bool = False,
) -> dict[str, float]:
    """Send until ``duration_s`` passes or ``count`` messages are sent; print interval and summary lines
    (``enable_trace``: with message trace, and a line of what it wrote and dropped)."""
    from rocketpy.client.producer import Producer
    from rocketpy.message import Message

    producer = Producer(
        "benchmark_producer",
        namesrv,
        max_async_pending=max(65_536, concurrency * 2),
        access_key=access_key,
        secret_key=secret_key,
        auto_batch=auto_batch,
        enable_trace=enable_trace,
    )
    await producer.start()
    body = b"x" * body_size
    stats = Stats()
    max_rt = [0.0]
    deadline = time.perf_counter() + duration_s if duration_s else float("inf")
    sent = [0]

    def more() -> int:
        if time.perf_counter() >= deadline or (count and sent[0] >= count):
            return 0
        n = min(batch, count - sent[0]) if count else batch
        sent[0] += n
        return n

    async def worker() -> None:
        while n := more():
            t0 = time.perf_counter()
            try:
                if batch > 1:
                    await producer.send_batch([Message(topic, body) for _ in range(n)])
                elif mode == "oneway":
                    await producer.send_oneway(Message(topic, body))
                else:
                    await producer.send(Message(topic, body))
            except RocketpyError:
                stats.fail(n)
                continue
            stats.ok(n, (time.perf_counter() - t0) * 1000.0)

    async def async_feeder() -> None:
        # send_async as applications use it with a bound (a semaphore): `concurrency` sends in flight,
        # the feeder refilling once per loop tick what finished in it (not at half: that averaged
        # three quarters of the window and sent in bursts)
        inflight = [0]
        room = asyncio.Event()

        def done(fut: asyncio.Future[Any], t0: float) -> None:
            inflight[0] -= 1
            if inflight[0] < concurrency:
                room.set()
            if mode == "callback":
                return  # counted by the callback
            if fut.cancelled() or fut.exception() is not None:
                stats.fail(1)
            else:
                stats.ok(1, (time.perf_counter() - t0) * 1000.0)

        def callback(result: Any, err: BaseException | None, t0: float) -> None:
            # in the SDK's callback thread, the only writer of `stats` in this mode
            if err is not None:
                stats.fail(1)
            else:
                stats.ok(1, (time.perf_counter() - t0) * 1000.0)

        while more():
            if inflight[0] >= concurrency:
                room.clear()
                await room.wait()
            t0 = time.perf_counter()
            try:
                cb = functools.partial(callback, t0=t0) if mode == "callback" else None
                fut = producer.send_async(Message(topic, body), callback=cb)
            except RocketpyError:
                stats.fail(1)
                continue
            inflight[0] += 1
            fut.add_done_callback(functools.partial(done, t0=t0))
        while inflight[0]:
            room.clear()
            await room.wait()

    reporter = asyncio.create_task(_reporter(stats, "send", count, interval_s, max_rt))
    cpu0 = time.process_time()
    try:
        if mode in ("async", "callback") and batch == 1:
            await async_feeder()
        else:
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        stats.finished = time.perf_counter()
        cpu_s = time.process_time() - cpu0
        coalesced = producer.coalesce_stats
    finally:
        reporter.cancel()
        await asyncio.gather(reporter, return_exceptions=True)
        await producer.shutdown()  # sends what trace still buffers
    cpu_all_s = time.process_time() - cpu0
    s = stats.summary()
    s["max_rt_ms"] = max(max_rt[0], stats.take_window()["max_rt_ms"])
    s["client_cpu_us_per_msg"] = cpu_s * 1e6 / s["total"] if s["total"] else 0.0
    click.echo(
        f"\n[Complete] Send Total: {s['total']:.0f} | Send TPS: {s['tps']:.0f}"
        f" | Max RT(ms): {s['max_rt_ms']:.3f} | Average RT(ms): {s['avg_rt_ms']:.3f}"
        f" | Send Failed: {s['failed']:.0f} | Client CPU(us/msg): {s['client_cpu_us_per_msg']:.1f}"
        f" | RT p50(ms): {s['p50_rt_ms']:.3f} | RT p99(ms): {s['p99_rt_ms']:.3f}"
        f" | In flight (mean): {s['in_flight']:.1f}"
    )
    _print_cpu(cpu_all_s, s["total"])
    _print_trace(producer.trace_stats)
    if coalesced is not None and coalesced.requests:
        s["msgs_per_request"] = coalesced.messages / coalesced.requests
        click.echo(
            f"[Auto-batch] Requests: {coalesced.requests} | Messages: {coalesced.messages}"
            f" | Msgs/request: {s['msgs_per_request']:.2f} | Batches split: {coalesced.splits}"
        )
    return s


async def run_consumer(
    namesrv: str,
    topic: str,
    group: str,
    duration_s: float,
    count: int,
    from_first: bool,
    interval_s: float = 1.0,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    enable_trace: bool = False,
) -> dict[str, float]:
    """Consume with a PushConsumer until ``duration_s`` passes or ``count`` messages arrived
    (``enable_trace``: with message trace, and a line of what it wrote and dropped)."""
    from rocketpy.client.push_consumer import PushConsumer

    stats = Stats()
    done = asyncio.Event()

    async def listener(msgs: list[Any], context: Any) -> Any:
        now_ms = time.time() * 1000.0
        for m in msgs:
            stats.ok(1, now_ms - m.born_timestamp, now_ms - m.store_timestamp)
        if count and stats.total >= count:
            done.set()
        from rocketpy.client.consumer_types import ConsumeStatus

        return ConsumeStatus.CONSUME_SUCCESS

    where = "CONSUME_FROM_FIRST_OFFSET" if from_first else "CONSUME_FROM_LAST_OFFSET"
    consumer = PushConsumer(
        group,
        namesrv,
        consume_from_where=where,
        access_key=access_key,
        secret_key=secret_key,
        enable_trace=enable_trace,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    cpu0 = time.process_time()
    await consumer.start()
    stats.begin()  # (as the producer's: after its start)
    max_rt = [0.0]
    reporter = asyncio.create_task(_reporter(stats, "consume", count, interval_s, max_rt))
    try:
        async with asyncio.timeout(duration_s or None):
            await done.wait()
    except TimeoutError:
        pass
    finally:
        stats.finished = time.perf_counter()
        reporter.cancel()
        await asyncio.gather(reporter, return_exceptions=True)
        await consumer.shutdown()  # sends what trace still buffers
    cpu_all_s = time.process_time() - cpu0
    s = stats.summary()
    click.echo(
        f"\n[Complete] Consume Total: {s['total']:.0f} | Consume TPS: {s['tps']:.0f} |"
        f" AVG(B2C) RT(ms): {s['avg_rt_ms']:.3f}"
    )
    _print_cpu(cpu_all_s, s["total"])
    _print_trace(consumer.trace_stats)
    return s


def _print_cpu(cpu_s: float, total: float) -> None:
    """The client's CPU per message over the whole run, start to shutdown included."""
    click.echo(f"[CPU] Client CPU incl. start and shutdown(us/msg): {cpu_s * 1e6 / max(total, 1):.1f}")


def _print_trace(stats: Any) -> None:
    """What message trace did in the run (after shutdown, which sends what was buffered)."""
    if stats is not None:
        click.echo(
            f"[Trace] Appended: {stats.appended} | Dropped: {stats.dropped} | Sent records:"
            f" {stats.sent_records} | Sent messages: {stats.sent_messages} | Failed: {stats.failed_records}"
        )


def _run(coro: Any) -> None:
    try:
        import uvloop

        uvloop.run(coro)
    except ImportError:  # pragma: no cover - uvloop is a dependency
        asyncio.run(coro)


@click.group("bench", context_settings=_CONTEXT)
def bench() -> None:
    """Benchmarks through the SDK (RocketMQ's benchmark tool, in rocketpy)."""


_NAMESRV = click.option(
    "-n", "--namesrvAddr", "namesrv", envvar="NAMESRV_ADDR", default="127.0.0.1:9876", show_default=True
)
_TOPIC = click.option("-t", "--topic", default="BenchmarkTest", show_default=True)
_DURATION = click.option(
    "-d", "--duration", type=float, default=10.0, show_default=True, help="Seconds (0 = no limit)."
)
_COUNT = click.option(
    "-q", "--count", type=int, default=0, show_default=True, help="Messages (0 = no limit)."
)
_ACCESS_KEY = click.option(
    "--access-key", envvar="ROCKETPY_ACCESS_KEY", metavar="KEY", help="ACL account (env ROCKETPY_ACCESS_KEY)."
)
_TRACE = click.option(
    "--trace",
    "enable_trace",
    is_flag=True,
    help="With message trace (enable_trace=True, RMQ_SYS_TRACE_TOPIC).",
)
_SECRET_KEY = click.option(
    "--secret-key",
    envvar="ROCKETPY_SECRET_KEY",
    metavar="SECRET",
    help="Its secret (env ROCKETPY_SECRET_KEY).",
)


def _check_credentials(access_key: str | None, secret_key: str | None) -> None:
    if (access_key is None) != (secret_key is None):
        raise click.BadParameter("--access-key and --secret-key go together: pass both or neither")


@bench.command("producer", context_settings=_CONTEXT)
@_NAMESRV
@_TOPIC
@click.option("-s", "--bodySize", "body_size", type=int, default=1024, show_default=True)
@click.option("-w", "--concurrency", type=int, default=64, show_default=True, help="Sends in flight.")
@click.option(
    "-b", "--batchSize", "batch", type=int, default=1, show_default=True, help="> 1 uses send_batch."
)
@click.option(
    "-m",
    "--mode",
    type=click.Choice(["sync", "async", "callback", "oneway"]),
    default="async",
    show_default=True,
    help="callback: send_async with a plain callback (run in the SDK's callback thread) per send.",
)
@click.option(
    "--auto-batch/--no-auto-batch",
    default=True,
    show_default=True,
    help="Coalesce concurrent sends to one queue into one request (Producer(auto_batch=...)).",
)
@_DURATION
@_COUNT
@_ACCESS_KEY
@_SECRET_KEY
@_TRACE
def producer_cmd(
    namesrv: str,
    topic: str,
    body_size: int,
    concurrency: int,
    batch: int,
    mode: str,
    auto_batch: bool,
    duration: float,
    count: int,
    access_key: str | None,
    secret_key: str | None,
    enable_trace: bool,
) -> None:
    """Send messages as fast as the window allows and report TPS / RT every second."""
    if body_size <= 0 or concurrency <= 0 or batch <= 0:
        raise click.BadParameter("body size, concurrency and batch size must be positive")
    if not duration and not count:
        raise click.BadParameter("give --duration or --count (a run must end)")
    _check_credentials(access_key, secret_key)
    _run(
        run_producer(
            namesrv, topic, body_size, concurrency, batch, duration, count, mode,
            access_key=access_key, secret_key=secret_key, auto_batch=auto_batch, enable_trace=enable_trace,
        )
    )  # fmt: skip


@bench.command("consumer", context_settings=_CONTEXT)
@_NAMESRV
@_TOPIC
@click.option("-g", "--group", default="benchmark_consumer", show_default=True)
@click.option("--from-first", is_flag=True, help="Start a new group at the first offset (consume a backlog).")
@_DURATION
@_COUNT
@_ACCESS_KEY
@_SECRET_KEY
@_TRACE
def consumer_cmd(
    namesrv: str,
    topic: str,
    group: str,
    from_first: bool,
    duration: float,
    count: int,
    access_key: str | None,
    secret_key: str | None,
    enable_trace: bool,
) -> None:
    """Consume with a push consumer and report TPS and born/store-to-consume latency every second."""
    if not duration and not count:
        raise click.BadParameter("give --duration or --count (a run must end)")
    _check_credentials(access_key, secret_key)
    _run(
        run_consumer(
            namesrv,
            topic,
            group,
            duration,
            count,
            from_first,
            access_key=access_key,
            secret_key=secret_key,
            enable_trace=enable_trace,
        )
    )


if __name__ == "__main__":
    try:
        bench.main(prog_name="rocketpy bench", standalone_mode=False)
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}", err=True)
        sys.exit(2)
    except RocketpyError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
