"""The command line as users run it: mqbroker config handling, mqshutdown, admin, one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.daemons import REPO_ROOT, daemon_env, write_properties


def run_cli(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rocketpy.cli", *args]
    full_env = env or daemon_env(tmp_path, tmp_path)
    return subprocess.run(cmd, cwd=REPO_ROOT, env=full_env, capture_output=True, text=True, timeout=30)


def test_mqbroker_print_config_with_namesrv_override(tmp_path: Path) -> None:
    conf = write_properties(
        tmp_path / "broker.properties",
        {"brokerName": "broker-x", "namesrvAddr": "10.0.0.1:9876", "mapedFileSizeCommitLog": 65536},
    )
    result = run_cli(tmp_path, "broker", "-c", str(conf), "-n", "127.0.0.1:9876;127.0.0.1:9877", "-p")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "namesrvAddr=127.0.0.1:9876;127.0.0.1:9877" in lines  # -n wins over the file
    assert "brokerName=broker-x" in lines and "mappedFileSizeCommitLog=65536" in lines
    assert "flushDiskType=ASYNC_FLUSH" in lines


def test_mqbroker_config_errors_exit_2(tmp_path: Path) -> None:
    conf = write_properties(tmp_path / "broker.properties", {"brokerName": "b", "flushDiskType": "SOMETIMES"})
    result = run_cli(tmp_path, "broker", "-c", str(conf), "-p")
    assert result.returncode == 2
    assert (
        result.stderr == f"error: {conf}:2: flushDiskType='SOMETIMES' is not one of ASYNC_FLUSH, SYNC_FLUSH\n"
    )
    bad_n = run_cli(tmp_path, "broker", "-n", "nohost", "-p")
    assert bad_n.returncode == 2
    assert bad_n.stderr.startswith("error: command line: namesrvAddr='nohost': 'nohost' is not HOST:PORT")
    missing = run_cli(tmp_path, "broker", "-c", str(tmp_path / "missing.properties"))
    assert missing.returncode == 2
    assert (
        missing.stderr
        == f"error: {tmp_path / 'missing.properties'}: cannot read config file: No such file or directory\n"
    )


def test_mqshutdown_broker_when_none_runs_and_stale_pid_files_are_cleaned(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stale = run_dir / "broker-10911.pid"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale.write_text(dead.stdout)  # a pid that has exited
    result = run_cli(tmp_path, "shutdown", "broker")
    assert result.returncode == 1
    assert result.stderr == f"error: no broker is running (no live pid file in {run_dir})\n"
    assert not stale.exists()


def test_mqshutdown_does_not_signal_a_foreign_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (run_dir / "namesrv-9876.pid").write_text(f"{sleeper.pid}\n")  # pid reused by something else
        result = run_cli(tmp_path, "shutdown", "namesrv")
        assert result.returncode == 1 and "no namesrv is running" in result.stderr
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_admin_and_wrong_arguments_are_one_line(tmp_path: Path) -> None:
    admin = run_cli(tmp_path, "admin")
    assert admin.returncode != 0 and "Traceback" not in admin.stderr
    wrong = run_cli(tmp_path, "shutdown", "everything")
    assert wrong.returncode == 2
    assert wrong.stderr.count("\n") == 1 and wrong.stderr.startswith(
        "error: Invalid value for 'namesrv|broker'"
    )


def test_log_dir_not_writable_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    env = daemon_env(tmp_path, tmp_path)
    env["ROCKETPY_LOG_DIR"] = str(blocker / "logs")
    conf = write_properties(tmp_path / "ns.properties", {"listenPort": 0, "bindAddress": "127.0.0.1"})
    result = run_cli(tmp_path, "namesrv", "-c", str(conf), env=env)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: cannot write the log file {blocker / 'logs' / 'namesrv.log'}")
    assert result.stderr.count("\n") == 1
    assert os.path.isfile(blocker)
