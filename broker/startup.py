"""Broker process entry: ``run(broker_config, store_config) -> exit code``.

Owns the process lifecycle around ``BrokerController``: uvloop, SIGTERM/SIGINT -> graceful stop,
the pid file (for ``mqshutdown broker``) and the boot line, printed to stdout (flushed) once the
listener accepts connections and the first registration with every reachable NameServer is done:
``The broker[NAME, HOST:PORT] boot success. serializeType=MSGPACK and name server is ADDR (CORE)
grpcServerPort=PORT``, after
``The broker[NAME] serves metrics at http://HOST:PORT/metrics`` when ``metricsPort`` is set.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import signal
import sys

import uvloop

from rocketpy._accel import LABEL
from rocketpy.broker.controller import BrokerController
from rocketpy.broker.store.faults import DiskFaults
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.errors import RocketpyError
from rocketpy.logsetup import remove_pid_file, write_pid_file

log = logging.getLogger("rocketpy.broker")

#: Open files the broker asks for: every consume-queue file keeps a descriptor (10,000 queues need
#: about 10,000), plus commitlog, index and connections.
WANTED_NOFILE = 65536


def raise_nofile_limit(wanted: int = WANTED_NOFILE) -> int:
    """Raise the soft RLIMIT_NOFILE towards ``wanted`` (capped by the hard limit); return it.

    Never lowers the limit; a refusal by the OS is logged and the current limit kept.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-files limit from %d to %d: %s", soft, target, e)
    log.info("open-files limit (RLIMIT_NOFILE) is %s (hard %s)", soft, hard)
    return int(soft)


def boot_line(broker_name: str, addr: str, namesrv_addr: str | None, grpc_port: int = -1) -> str:
    """The boot success line tests and scripts wait for: the active core (``_accel``), then the gRPC
    endpoint's port (``grpcServerPort=-1`` when it is off)."""
    return (
        f"The broker[{broker_name}, {addr}] boot success. serializeType=MSGPACK "
        f"and name server is {namesrv_addr or 'null'} ({LABEL}) grpcServerPort={grpc_port}"
    )


async def serve(broker_config: BrokerConfig, store_config: StoreConfig) -> int:
    """Run a broker until SIGTERM/SIGINT; returns the process exit code."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        faults = DiskFaults.from_env()  # a test hook; unset in production
    except ValueError as e:
        print(f"error: the broker cannot start: {e}", file=sys.stderr, flush=True)
        return 2
    controller = BrokerController(broker_config, store_config, faults)
    try:
        addr = await controller.start()
    except (RocketpyError, OSError) as e:
        print(f"error: the broker cannot start: {e}", file=sys.stderr, flush=True)
        await controller.shutdown()
        return 1
    port = int(addr.rsplit(":", 1)[1])
    try:
        pid_path = await asyncio.to_thread(write_pid_file, "broker", port)
    except RocketpyError as e:
        print(str(e), file=sys.stderr, flush=True)
        await controller.shutdown()
        return 1
    grpc_port = controller.grpc.port if controller.grpc is not None else -1
    lines = [boot_line(broker_config.broker_name, addr, broker_config.namesrv_addr, grpc_port)]
    if controller.metrics is not None:
        lines.insert(0, f"The broker[{broker_config.broker_name}] serves metrics at {controller.metrics.url}")
    for line in lines:
        log.info(line)
        print(line, flush=True)
    try:
        await stop.wait()
        log.info("broker %s: stop requested", broker_config.broker_name)
    finally:
        await controller.shutdown()
        await asyncio.to_thread(remove_pid_file, pid_path)
    return 0


def run(broker_config: BrokerConfig, store_config: StoreConfig) -> int:
    """Run the broker in this process under uvloop; returns the exit code."""
    raise_nofile_limit()
    return uvloop.run(serve(broker_config, store_config))
