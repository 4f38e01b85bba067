"""The pytest plugin (``rocketpy.testing``): fixtures, broker keys, boot time, stop by PID."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from rocketpy.sync import SendStatus
from rocketpy.testing import RocketpyCluster, start_cluster

pytest_plugins = ["pytester"]


def test_fixtures_send_to_a_fresh_topic(
    rocketpy_cluster: RocketpyCluster, rocketpy_topic: str, rocketpy_producer: Any
) -> None:
    from rocketpy.sync import Message

    assert rocketpy_cluster.namesrv_addr.startswith("127.0.0.1:")
    result = rocketpy_producer.send(Message(rocketpy_topic, b"hello", tags="T"))
    assert result.status is SendStatus.SEND_OK
    assert result.message_queue.topic == rocketpy_topic and result.message_queue.queue_id in range(4)


def test_start_cluster_boots_and_stops_by_pid(tmp_path: Path) -> None:
    start = time.monotonic()
    cluster, daemons = start_cluster(tmp_path, {"brokerName": "plugin-b"})
    boot_s = time.monotonic() - start
    try:
        assert cluster.broker_name == "plugin-b" and cluster.store_dir == tmp_path / "store"
        assert boot_s < 10.0, f"boot took {boot_s:.2f}s"  # about 0.5 s on an idle machine
    finally:
        for d in daemons:
            d.terminate()
    for d in daemons:
        assert d.process.returncode is not None
        with pytest.raises(ProcessLookupError):
            os.kill(d.process.pid, 0)


@pytest.mark.slow
def test_broker_keys_from_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_name(rocketpy_cluster, rocketpy_topic):
            assert rocketpy_cluster.broker_name == "from-cli"
            assert rocketpy_cluster.cluster_name == "from-ini"
            assert rocketpy_topic.startswith("test_name_")
        """
    )
    pytester.makeini("[pytest]\nrocketpy_broker_keys =\n    brokerName=ini\n    brokerClusterName=from-ini\n")
    result = pytester.runpytest_subprocess(
        "--rocketpy-broker-key", "brokerName=from-cli", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)


def test_bad_broker_key_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(rocketpy_cluster): pass\n")
    result = pytester.runpytest_subprocess("--rocketpy-broker-key", "noequals")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*rocketpy broker key 'noequals' must look like KEY=VALUE*"])
