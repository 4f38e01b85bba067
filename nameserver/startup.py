"""Runs a NameServer in the foreground under uvloop until SIGTERM or SIGINT.

Prints ``The Name Server boot success. listen=HOST:PORT`` on stdout (flushed) once the listener
accepts connections (after ``The Name Server serves metrics at URL`` when ``metricsPort`` is set),
writes the pid file ``namesrv-PORT.pid`` (used by ``mqshutdown namesrv``) and
removes it on the way out. Logging is set up by the caller (``rocketpy.cli``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import uvloop

from rocketpy._accel import LABEL
from rocketpy.config import NamesrvConfig
from rocketpy.errors import RemotingBindError, RocketpyError
from rocketpy.logsetup import remove_pid_file, stderr_after_boot, write_pid_file
from rocketpy.metrics import MetricsBindError
from rocketpy.nameserver.controller import NamesrvController
from rocketpy.nameserver.kv_config import KVConfigError

log = logging.getLogger("rocketpy.namesrv")

#: How long a graceful stop may take before connections are aborted.
SHUTDOWN_TIMEOUT_S = 5.0


def run(config: NamesrvConfig) -> int:
    """Run the NameServer until a stop signal; return the process exit code.

    Start-up failures a user can fix (port in use, unreadable KV file, unwritable pid file) are
    printed as one ``error:`` line on stderr and return 1.
    """
    return uvloop.run(_serve(config))


async def _serve(config: NamesrvConfig) -> int:
    controller = NamesrvController(config)
    try:
        host, port = await controller.start()
        pid_path = await asyncio.to_thread(write_pid_file, "namesrv", port)
    except MetricsBindError as e:
        await controller.shutdown(1.0)
        return _fail(str(e))
    except RemotingBindError as e:
        await controller.shutdown(1.0)
        return _fail(_bind_error_text(config, e))
    except (KVConfigError, RocketpyError) as e:
        await controller.shutdown(1.0)
        return _fail(str(e))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    lines = [f"The Name Server boot success. listen={host}:{port} ({LABEL})"]
    if controller.metrics is not None:
        lines.insert(0, f"The Name Server serves metrics at {controller.metrics.url}")
    for line in lines:
        log.info(line)
        print(line, flush=True)
    stderr_after_boot()
    try:
        await stop.wait()
        log.info("stop signal received, shutting down")
    finally:
        await controller.shutdown(SHUTDOWN_TIMEOUT_S)
        await asyncio.to_thread(remove_pid_file, pid_path)
        log.info("The Name Server shut down")
    return 0


def _bind_error_text(config: NamesrvConfig, e: RemotingBindError) -> str:
    cause = e.__cause__
    if isinstance(cause, OSError) and cause.errno:
        where = f"{config.bind_address}:{config.listen_port}"
        return (
            f"namesrv cannot listen on {where}: {os.strerror(cause.errno)}; "
            "choose another listenPort or stop the process using it"
        )
    return str(e)


def _fail(text: str) -> int:
    print(text if text.startswith("error:") else f"error: {text}", file=sys.stderr, flush=True)
    return 1
