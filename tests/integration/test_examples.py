"""Every example in examples/ runs against a real NameServer + broker and prints what it should."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemons import REPO_ROOT, start_broker, start_namesrv

EXAMPLES = REPO_ROOT / "examples"
RUN_TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def namesrv_addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One cluster for all examples (each example uses its own topic)."""
    tmp = tmp_path_factory.mktemp("examples")
    ns = start_namesrv(tmp)
    # short transaction checks: the transaction example waits for the broker's check
    txn_checks = {"transactionCheckInterval": 500, "transactionTimeOut": 500}
    broker = start_broker(tmp, ns.addr, **txn_checks)
    try:
        yield str(ns.addr)
    finally:
        broker.terminate()
        ns.terminate()
        for d in (broker, ns):
            assert not d.has_traceback(), d.stderr_text()[-4000:]


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env["ROCKETPY_OFFSETS_DIR"] = str(tmp / "offsets")
    return env


def start(name: str, addr: str, tmp: Path, *args: str) -> subprocess.Popen[str]:
    """Start ``examples/{name}.py -n addr args...``."""
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "-n", addr, *args],
        cwd=REPO_ROOT,
        env=_env(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> str:
    """Wait for an example (bounded) and return its output; it must exit 0."""
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"{proc.args} did not exit within {RUN_TIMEOUT_S} s:\n{out}")
    assert proc.returncode == 0, f"{proc.args} exited {proc.returncode}:\n{out}"
    return out


def run(name: str, addr: str, tmp: Path, *args: str) -> str:
    """Run an example to completion."""
    return finish(start(name, addr, tmp, *args))


def _count(out: str, prefix: str) -> int:
    return sum(1 for line in out.splitlines() if line.startswith(prefix))


def test_sync_producer_then_push_consumer(namesrv_addr: str, tmp_path: Path) -> None:
    out = run("producer_sync", namesrv_addr, tmp_path, "-t", "ExSync", "-c", "10")
    assert _count(out, "sent ") == 10 and "SEND_OK" in out and "done: 10 messages sent" in out
    out = run("push_consumer", namesrv_addr, tmp_path, "-t", "ExSync", "-c", "10")
    assert _count(out, "received:") == 10 and "done: received 10 messages" in out


def test_async_producer(namesrv_addr: str, tmp_path: Path) -> None:
    out = run("producer_async", namesrv_addr, tmp_path, "-t", "ExAsync", "-c", "10")
    assert _count(out, "callback: SEND_OK") == 10 and "done: 10/10 async sends acknowledged" in out


def test_oneway_producer_then_lite_pull_consumer(namesrv_addr: str, tmp_path: Path) -> None:
    out = run("producer_oneway", namesrv_addr, tmp_path, "-t", "ExOneway", "-c", "10")
    assert _count(out, "sent oneway") == 10
    out = run("lite_pull_consumer", namesrv_addr, tmp_path, "-t", "ExOneway", "-c", "10")
    assert _count(out, "polled:") == 10 and "done: polled 10 messages" in out


def test_ordered_producer_and_consumer(namesrv_addr: str, tmp_path: Path) -> None:
    out = run("ordered_producer", namesrv_addr, tmp_path, "-t", "ExOrder", "-o", "6")
    assert "done: 24 ordered messages sent" in out
    queue_of: dict[str, set[str]] = {}
    for line in out.splitlines():
        if line.startswith("sent order-"):
            order = line.split()[1].split(":")[0]
            queue_of.setdefault(order, set()).add(line.rsplit(" ", 1)[1])
    assert len(queue_of) == 6 and all(len(q) == 1 for q in queue_of.values())  # one order -> one queue
    out = run("ordered_consumer", namesrv_addr, tmp_path, "-t", "ExOrder", "-o", "6")
    assert "done: 24 messages of 6 orders, 0 out of order" in out


def test_batch_producer_splits_at_4_mib(namesrv_addr: str, tmp_path: Path) -> None:
    out = run("batch_producer", namesrv_addr, tmp_path, "-t", "ExBatch", "-c", "1000", "-b", "10240")
    assert "done: 1000 messages sent in batches" in out
    assert _count(out, "batch ") == 3  # 10 MB of bodies in 4 MiB batches


def test_broadcasting_consumers_each_get_all(namesrv_addr: str, tmp_path: Path) -> None:
    run("producer_sync", namesrv_addr, tmp_path, "-t", "ExBroadcast", "-c", "10")
    procs = [start("broadcast_consumer", namesrv_addr, tmp_path, "-t", "ExBroadcast", "-i", i) for i in "ab"]
    outs = [finish(p) for p in procs]
    for name, out in zip("ab", outs, strict=True):
        assert f"done: [{name}] received 10 messages" in out
    assert len(list((tmp_path / "offsets").rglob("offsets.json"))) == 2


def test_blocking_producer_and_consumer(namesrv_addr: str, tmp_path: Path) -> None:
    out = run("blocking_producer", namesrv_addr, tmp_path, "-t", "ExBlocking", "-c", "10")
    assert _count(out, "sent ") == 10 and "done: 10 messages sent with the blocking API" in out
    out = run("blocking_consumer", namesrv_addr, tmp_path, "-t", "ExBlocking", "-c", "10")
    assert _count(out, "received:") == 10 and "done: received 10 messages with the blocking API" in out


def test_transaction_producer_commits_the_checked_one(namesrv_addr: str, tmp_path: Path) -> None:
    out = run("transaction_producer", namesrv_addr, tmp_path, "-t", "ExTxn", "--wait", "30")
    assert "local state=COMMIT_MESSAGE" in out and "local state=ROLLBACK_MESSAGE" in out
    assert "check from the broker for unknown: committing it" in out
    out = run("lite_pull_consumer", namesrv_addr, tmp_path, "-t", "ExTxn", "-c", "2")
    assert sorted(line.split("body=")[-1] for line in out.splitlines() if line.startswith("polled:")) == [
        "order commit",
        "order unknown",
    ]


def test_delay_producer_then_push_consumer(namesrv_addr: str, tmp_path: Path) -> None:
    out = run("delay_producer", namesrv_addr, tmp_path, "-t", "ExDelay", "-l", "1", "2", "--at", "2")
    assert _count(out, "sent ") == 4 and "done: 4 delayed messages sent" in out
    out = run("push_consumer", namesrv_addr, tmp_path, "-t", "ExDelay", "-g", "ex_delay_c", "-c", "4")
    assert _count(out, "received:") == 4 and "done: received 4 messages" in out


def test_retry_consumer_fails_twice_then_succeeds(namesrv_addr: str, tmp_path: Path) -> None:
    run("producer_sync", namesrv_addr, tmp_path, "-t", "ExRetry", "-c", "2")
    out = run("retry_consumer", namesrv_addr, tmp_path, "-t", "ExRetry", "-c", "2")
    counts = [
        line.split("reconsume_times=")[1].split()[0] for line in out.splitlines() if "received:" in line
    ]
    assert sorted(counts) == ["0", "0", "1", "1", "2", "2"], out
    assert "topic=ExRetry" in out and "%RETRY%" not in out
    assert "done: 2 messages consumed after 2 failures each" in out


def test_dlq_consumer_reads_dead_letters(namesrv_addr: str, tmp_path: Path) -> None:
    run("producer_sync", namesrv_addr, tmp_path, "-t", "ExDlq", "-c", "2")
    out = run("dlq_consumer", namesrv_addr, tmp_path, "-t", "ExDlq", "-c", "2")
    assert _count(out, "dead letter:") == 2 and "from topic=ExDlq tried 2 times" in out, out
    assert "done: 2 dead letters read from %DLQ%example_dlq_group" in out


def test_simple_consumer_receives_extends_and_acks(namesrv_addr: str, tmp_path: Path) -> None:
    run("producer_sync", namesrv_addr, tmp_path, "-t", "ExSimple", "-c", "10")
    out = run("simple_consumer", namesrv_addr, tmp_path, "-t", "ExSimple", "-c", "10")
    assert _count(out, "received:") == 10 and _count(out, "extended:") == 1, out
    assert "done: received and acked 10 messages" in out
    again = run("simple_consumer", namesrv_addr, tmp_path, "-t", "ExSimple", "-c", "1", "--timeout", "3")
    assert "done: received and acked 0 messages" in again, again  # acked: the group gets nothing again


def test_traced_messages_print_a_timeline(namesrv_addr: str, tmp_path: Path) -> None:
    out = run("traced_messages", namesrv_addr, tmp_path, "-t", "ExTraced", "-c", "3")
    assert "sent 3 traced messages" in out and "dropped=0, sent_records=3" in out, out
    events = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert events[0] == "sent" and "consumed" in events, out
    assert "group=example_traced_producer_group" in out and "status=SEND_OK" in out
    assert "done: 3 of 3 consumed" in out


def test_every_example_is_tested() -> None:
    tested = {
        "producer_sync", "push_consumer", "producer_async", "producer_oneway", "lite_pull_consumer",
        "ordered_producer", "ordered_consumer", "batch_producer", "broadcast_consumer",
        "blocking_producer", "blocking_consumer", "sql_filter_consumer",
        "transaction_producer", "delay_producer", "retry_consumer", "dlq_consumer", "simple_consumer",
        "traced_messages",
    }  # fmt: skip
    spark = {p.stem for p in EXAMPLES.glob("spark_*.py")}  # tested in test_spark_examples.py
    assert {p.stem for p in EXAMPLES.glob("*.py")} - spark == tested
