"""Run a whole layout (a conf/ directory of broker .properties files) on one machine.

``scripts/cluster start|stop|status LAYOUT`` (the shell wrapper runs this with the checkout's .venv):

- ``start`` runs a NameServer (the layout's ``namesrv.properties``, else ``conf/namesrv.properties``)
  and every ``*.properties`` broker of the layout as background daemons. Each gets a copy of its
  conf file under the run directory (default ``~/.rocketpy/cluster/<layout>``) with its store
  (``store/<name>``), its log directory (``logs/<name>``) and the live NameServer address put in;
  stdout/stderr go to ``out/<name>.out|.err``. Their pids, addresses and roles are recorded in
  ``cluster.json`` once each has printed its boot line.
- ``status`` shows each recorded process alive or dead, with its address and role.
- ``stop`` stops only the recorded processes (SIGTERM, then SIGKILL after ``--timeout``), brokers
  before the NameServer, and never a pid that no longer runs this run directory's conf file.

A layout in controller mode (``enableControllerMode=true``, e.g. ``conf/controller-2m-2s``) needs
etcd: ``--etcd HOST:PORT[,HOST:PORT]`` points every broker at a running one; without it ``start``
runs a local single-member etcd first (the ``etcd`` binary: Debian's ``etcd-server``; data in
``etcd/``, client port 2379 moved like the others), records it in ``cluster.json`` and stops it last.

The daemons also write their usual pid files (``$ROCKETPY_RUN_DIR``), so ``mqshutdown`` stops them too.
``--port-base N`` moves every port by the same amount so that the NameServer listens on N
(``--port-base 0``: every daemon picks a free port), so two layouts or tests never collide.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from rocketpy.logsetup import process_alive

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
NAMESRV_BOOT = re.compile(r"The Name Server boot success\. listen=(\S+)")
BROKER_BOOT = re.compile(r"The broker\[[^,\]]+, ([^\]]+)\] boot success\.")
DEFAULT_NAMESRV_PORT = 9876
ETCD_CLIENT_PORT, ETCD_PEER_PORT = 2379, 2380
NO_ETCD = (
    "error: this layout runs in controller mode and needs etcd: install it (Debian: apt-get install "
    "etcd-server) so that scripts/cluster starts a local one, or point at yours with --etcd HOST:PORT"
)
STATE_FILE = "cluster.json"
POLL_S = 0.05


class ClusterError(Exception):
    """A user-caused failure; its text is the one line printed."""


@dataclass
class Proc:
    """One daemon started by ``start`` (one row of cluster.json)."""

    name: str
    kind: str  # "namesrv" | "broker"
    role: str
    pid: int
    addr: str
    conf: str  # the run directory's copy: its path in /proc/PID/cmdline identifies the process


# --------------------------------------------------------------------------------------------
# conf files


def read_props(path: Path) -> dict[str, str]:
    """The key=value pairs of a .properties file (last one wins, as the daemons read it)."""
    props: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


def write_conf(src: Path | None, dest: Path, overrides: dict[str, str]) -> None:
    """``src`` followed by ``overrides`` (later keys win), written to ``dest``."""
    text = src.read_text(encoding="utf-8") if src is not None else ""
    extra = "".join(f"{k}={v}\n" for k, v in overrides.items())
    dest.write_text(f"{text}\n# set by scripts/cluster\n{extra}", encoding="utf-8")


def shifted(port: str | None, shift: int | None) -> str | None:
    """A port moved by ``shift`` (``None``: every daemon picks a free port -> "0")."""
    if port is None:
        return None
    if int(port) <= 0:  # 0 (a free port) and -1 (grpcServerPort off) stay what they are
        return port
    if shift is None:
        return "0"
    moved = int(port) + shift
    if not 0 < moved < 65536:
        raise ClusterError(f"error: --port-base moves port {port} to {moved}, outside 1..65535")
    return str(moved)


def broker_confs(layout: Path) -> list[Path]:
    """The layout's broker files: masters (brokerId 0) first, so slaves find them sooner."""
    files = [p for p in sorted(layout.glob("*.properties")) if p.name != "namesrv.properties"]
    if not files:
        raise ClusterError(f"error: {layout} has no broker .properties files; pass a conf/ layout directory")
    return sorted(files, key=lambda p: int(read_props(p).get("brokerId", "0") or 0) > 0)


def role_of(props: dict[str, str]) -> str:
    if props.get("enableControllerMode", "").lower() == "true":
        return "CONTROLLER"  # etcd decides which replica is master
    return props.get("brokerRole", "ASYNC_MASTER")


def in_controller_mode(confs: list[Path]) -> bool:
    """Some broker of the layout runs in controller mode (it needs etcd)."""
    return any(read_props(c).get("enableControllerMode", "").lower() == "true" for c in confs)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _etcd_answers(endpoint: str) -> bool:
    request = urllib.request.Request(f"http://{endpoint}/v3/kv/range", data=b'{"key": "AA=="}')
    try:
        with urllib.request.urlopen(request, timeout=1.0) as resp:
            return b"header" in resp.read()
    except (OSError, urllib.error.URLError):
        return False


def start_etcd(run: Path, shift: int | None, bind: str | None, timeout: float) -> Proc:
    """A local single-member etcd for a controller-mode layout (data in run/etcd)."""
    binary = shutil.which("etcd")
    if binary is None:
        raise ClusterError(NO_ETCD)
    host = bind if bind and bind not in ("0.0.0.0", "::") else "127.0.0.1"
    ports = [shifted(str(p), shift) for p in (ETCD_CLIENT_PORT, ETCD_PEER_PORT)]
    client, peer = (int(p) if p and p != "0" else _free_port(host) for p in ports)
    data = run / "etcd"
    argv = [
        binary,
        "--name",
        "rocketpy",
        "--data-dir",
        str(data),
        "--listen-client-urls",
        f"http://{host}:{client}",
        "--advertise-client-urls",
        f"http://{host}:{client}",
        "--listen-peer-urls",
        f"http://{host}:{peer}",
        "--initial-advertise-peer-urls",
        f"http://{host}:{peer}",
        "--initial-cluster",
        f"rocketpy=http://{host}:{peer}",
    ]
    popen = spawn("etcd", argv, run)
    endpoint = f"{host}:{client}"
    deadline = time.monotonic() + timeout
    while not _etcd_answers(endpoint):
        if popen.poll() is not None or time.monotonic() > deadline:
            stop_procs([Proc("etcd", "etcd", "ETCD", popen.pid, endpoint, str(data))], 5.0)
            raise ClusterError(
                f"error: the local etcd did not start at {endpoint} (see {run / 'out' / 'etcd.err'})"
            )
        time.sleep(POLL_S * 2)
    print(f"started etcd pid {popen.pid} at {endpoint}", flush=True)
    return Proc("etcd", "etcd", "ETCD", popen.pid, endpoint, str(data))


# --------------------------------------------------------------------------------------------
# processes


def runs_conf(proc: Proc) -> bool:
    """``proc.pid`` is alive and still the process we started (its command line names our conf)."""
    if not process_alive(proc.pid):
        return False
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the recorded pid
    return proc.conf.encode() in cmdline


def spawn(name: str, argv: list[str], run: Path) -> subprocess.Popen[bytes]:
    """Start one daemon in its own session (it outlives this script), output under run/out."""
    env = dict(os.environ, ROCKETPY_LOG_DIR=str(run / "logs" / name))
    with (run / "out" / f"{name}.out").open("wb") as out, (run / "out" / f"{name}.err").open("wb") as err:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True
        )


def wait_boot(
    name: str, popen: subprocess.Popen[bytes], boot: re.Pattern[str], run: Path, timeout: float
) -> str:
    """The address in the daemon's boot line; ClusterError if it exits or stays silent."""
    out, err = run / "out" / f"{name}.out", run / "out" / f"{name}.err"
    deadline = time.monotonic() + timeout
    while True:
        m = boot.search(out.read_text(encoding="utf-8", errors="replace"))
        if m:
            return m.group(1)
        if popen.poll() is not None:
            tail = err.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
            raise ClusterError(f"error: {name} exited before it booted ({err}):\n" + "\n".join(tail))
        if time.monotonic() > deadline:
            raise ClusterError(f"error: {name} printed no boot line within {timeout:g}s (see {err})")
        time.sleep(POLL_S)


def signal_all(procs: list[Proc], sig: int) -> None:
    for p in procs:
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass


def stop_procs(procs: list[Proc], timeout: float) -> list[str]:
    """SIGTERM ``procs``, SIGKILL whatever is left after ``timeout``; a line per process."""
    live = [p for p in procs if runs_conf(p)]
    signal_all(live, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(process_alive(p.pid) for p in live) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    killed = [p for p in live if process_alive(p.pid)]
    signal_all(killed, signal.SIGKILL)
    lines = []
    for p in procs:
        if p in killed:
            lines.append(f"killed {p.name} pid {p.pid} ({p.addr}): still running after {timeout:g}s")
        elif p in live:
            lines.append(f"stopped {p.name} pid {p.pid} ({p.addr})")
        else:
            lines.append(f"{p.name} pid {p.pid} ({p.addr}) was not running")
    return lines


# --------------------------------------------------------------------------------------------
# state


def load_state(run: Path) -> list[Proc]:
    path = run / STATE_FILE
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["processes"]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError) as e:
        raise ClusterError(f"error: {path} is not a cluster state file ({e}); remove it by hand") from e
    return [Proc(**row) for row in rows]


def save_state(run: Path, layout: Path, procs: list[Proc]) -> None:
    path = run / STATE_FILE
    tmp = path.with_name(STATE_FILE + ".tmp")
    tmp.write_text(json.dumps({"layout": str(layout), "processes": [asdict(p) for p in procs]}, indent=2))
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------
# commands


def start(
    layout: Path,
    run: Path,
    port_base: int | None,
    bind: str | None,
    sets: dict[str, str],
    timeout: float,
    etcd: str | None = None,
) -> int:
    if any(runs_conf(p) for p in load_state(run)):
        raise ClusterError(
            f"error: the layout is already running from {run}; run 'scripts/cluster stop' first"
        )
    confs = broker_confs(layout)
    for sub in ("conf", "out", "logs", "store"):
        (run / sub).mkdir(parents=True, exist_ok=True)
    ns_src = layout / "namesrv.properties"
    ns_src = ns_src if ns_src.is_file() else ROOT / "conf" / "namesrv.properties"
    ns_port = int(read_props(ns_src).get("listenPort", DEFAULT_NAMESRV_PORT))
    shift = None if port_base == 0 else (0 if port_base is None else port_base - ns_port)
    procs: list[Proc] = []
    try:
        if in_controller_mode(confs):
            if etcd is None:
                procs.append(start_etcd(run, shift, bind, timeout))
                save_state(run, layout, procs)
                etcd = procs[-1].addr
            sets = {"etcdEndpoints": etcd, **sets}
        ns_over = {"listenPort": shifted(str(ns_port), shift) or "0"}
        if bind:
            ns_over["bindAddress"] = bind
        ns_conf = run / "conf" / "namesrv.properties"
        write_conf(ns_src, ns_conf, ns_over)
        popen = spawn("namesrv", [str(BIN / "mqnamesrv"), "-c", str(ns_conf)], run)
        procs.append(Proc("namesrv", "namesrv", "NAMESRV", popen.pid, "", str(ns_conf)))
        ns_addr = procs[-1].addr = wait_boot("namesrv", popen, NAMESRV_BOOT, run, timeout)
        print(f"started namesrv pid {popen.pid} at {ns_addr}", flush=True)
        started = []
        for src in confs:
            name, props = src.stem, read_props(src)
            store = run / "store" / name
            over = {"storePathRootDir": str(store), "storePathCommitLog": str(store / "commitlog")}
            for key in ("listenPort", "haListenPort", "grpcServerPort"):
                port = shifted(props.get(key), shift)
                if port is not None:
                    over[key] = port
            if bind:
                over["bindAddress"] = bind
            over.update(sets)
            conf = run / "conf" / src.name
            write_conf(src, conf, over)
            popen = spawn(name, [str(BIN / "mqbroker"), "-c", str(conf), "-n", ns_addr], run)
            procs.append(Proc(name, "broker", role_of({**props, **sets}), popen.pid, "", str(conf)))
            started.append((procs[-1], popen))
        save_state(run, layout, procs)  # recorded before the waits: a failed start can still be stopped
        for proc, popen in started:  # all brokers boot at once; slaves retry until their master is up
            proc.addr = wait_boot(proc.name, popen, BROKER_BOOT, run, timeout)
            print(f"started {proc.name} ({proc.role}) pid {proc.pid} at {proc.addr}", flush=True)
    except BaseException:
        for line in stop_procs(procs, 5.0):
            print(line, file=sys.stderr)
        (run / STATE_FILE).unlink(missing_ok=True)
        raise
    save_state(run, layout, procs)
    print(f"cluster {layout.name} is running: namesrvAddr={ns_addr} (run directory {run})")
    return 0


def status(run: Path) -> int:
    procs = load_state(run)
    if not procs:
        print(f"not running: no {STATE_FILE} in {run}")
        return 3
    print(f"{'NAME':<16} {'ROLE':<13} {'ADDRESS':<22} {'PID':>8}  STATE")
    dead = 0
    for p in procs:
        up = runs_conf(p)
        dead += not up
        print(f"{p.name:<16} {p.role:<13} {p.addr or '-':<22} {p.pid:>8}  {'alive' if up else 'dead'}")
    return 0 if dead == 0 else 1


def stop(run: Path, timeout: float) -> int:
    procs = load_state(run)
    if not procs:
        print(f"error: nothing to stop: no {STATE_FILE} in {run}", file=sys.stderr)
        return 1
    brokers = [p for p in procs if p.kind == "broker"]
    lines = stop_procs(brokers, timeout) + stop_procs([p for p in procs if p.kind == "namesrv"], timeout)
    lines += stop_procs([p for p in procs if p.kind == "etcd"], timeout)  # last: brokers end their leases
    print("\n".join(lines))
    (run / STATE_FILE).unlink(missing_ok=True)
    return 0


def parse_sets(values: list[str]) -> dict[str, str]:
    sets = {}
    for kv in values:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise ClusterError(f"error: --set {kv!r} is not KEY=VALUE")
        sets[key] = value
    return sets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/cluster", description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["start", "stop", "status"])
    ap.add_argument("layout", help="a conf/ layout directory, e.g. conf/2m-2s-async")
    ap.add_argument(
        "--run-dir",
        help="where stores, logs, output and cluster.json go (default ~/.rocketpy/cluster/<layout name>)",
    )
    ap.add_argument(
        "--port-base",
        type=int,
        help="NameServer port; every broker port moves by as much (0: every daemon picks a free port)",
    )
    ap.add_argument("--bind", help="bindAddress of every daemon (e.g. 127.0.0.1)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker key for every broker of the layout (repeatable)",
    )
    ap.add_argument(
        "--etcd",
        metavar="HOST:PORT[,HOST:PORT]",
        help="controller-mode layouts: the etcd to use (default: start a local one)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds to wait for each boot line (start) or for processes to exit (stop)",
    )
    args = ap.parse_args(argv)
    layout = Path(args.layout).resolve()
    run = (
        Path(args.run_dir).expanduser().resolve()
        if args.run_dir
        else (Path.home() / ".rocketpy" / "cluster" / layout.name)
    )
    try:
        if args.command == "start":
            if not layout.is_dir():
                raise ClusterError(f"error: layout {args.layout} is not a directory (try conf/2m-2s-async)")
            if args.port_base is not None and not 0 <= args.port_base < 65536:
                raise ClusterError(f"error: --port-base {args.port_base} is not a port (0..65535)")
            return start(
                layout, run, args.port_base, args.bind, parse_sets(args.set), args.timeout, args.etcd
            )
        if args.command == "status":
            return status(run)
        return stop(run, args.timeout)
    except ClusterError as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
