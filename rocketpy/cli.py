"""Command line: ``mqnamesrv``, ``mqbroker``, ``mqadmin``, ``mqshutdown`` and the ``rocketpy`` group.

Commands only build configs and hand over to the daemons' ``run`` functions, imported when the
command runs (``rocketpy --help`` and each command start without importing the others). Every
error a user can cause (bad config, bad argument, port in use, unreadable file) ends as one
``error: ...`` line on stderr and a non-zero exit code: 2 for configuration and usage errors, 1
otherwise. ``python -m rocketpy.cli ...`` works like ``rocketpy ...``.

``mqadmin`` sub-commands are ``rocketpy.admin_cli.commands``, added to the ``admin`` group on
first use; in the same way ``rocketpy bench producer|consumer`` are the commands of the
``rocketpy.bench.bench`` group.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import NoReturn

import click

from rocketpy.config import AclKeys, config_lines, load_broker_config, load_namesrv_config
from rocketpy.errors import ConfigError, RocketpyError
from rocketpy.logsetup import pid_files, process_alive, read_pid_file, setup_logging

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the package version and which core runs (``rocketpy._accel``)."""
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import version

    from rocketpy._accel import LABEL

    click.echo(f"rocketpy {version('rocketpy')} ({LABEL})")
    ctx.exit()


@click.group(context_settings=_CONTEXT)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and whether the compiled core or pure Python runs, and exit.",
)
def cli() -> None:
    """rocketpy: a RocketMQ-style message broker (NameServer, Broker, admin and tools)."""


@cli.command("namesrv", context_settings=_CONTEXT)
@click.option("-c", "--config-file", metavar="FILE", help="NameServer .properties file.")
@click.option("-p", "--print-config", is_flag=True, help="Print the effective config and exit.")
def namesrv_cmd(config_file: str | None, print_config: bool) -> int:
    """Run a NameServer in the foreground (stop it with Ctrl-C, SIGTERM or 'mqshutdown namesrv')."""
    config = load_namesrv_config(config_file, {})
    if print_config:
        click.echo("\n".join(config_lines(config)))
        return 0
    _check_acl_file(config)
    setup_logging("namesrv")
    from rocketpy.nameserver.startup import run

    return run(config)


@cli.command("broker", context_settings=_CONTEXT)
@click.option("-c", "--config-file", metavar="FILE", help="Broker .properties file (broker and store keys).")
@click.option("-n", "--namesrv-addr", metavar="ADDR", help="NameServer addresses, 'host:port;host:port'.")
@click.option("-p", "--print-config", is_flag=True, help="Print the effective config and exit.")
def broker_cmd(config_file: str | None, namesrv_addr: str | None, print_config: bool) -> int:
    """Run a Broker in the foreground (stop it with Ctrl-C, SIGTERM or 'mqshutdown broker')."""
    overrides = {"namesrvAddr": namesrv_addr} if namesrv_addr is not None else {}
    broker_config, store_config = load_broker_config(config_file, overrides)
    if print_config:
        click.echo("\n".join(config_lines(broker_config, store_config)))
        return 0
    _check_acl_file(broker_config)
    from rocketpy.broker.startup import run

    setup_logging("broker")
    return run(broker_config, store_config)


def _check_acl_file(config: AclKeys) -> None:
    """With ``aclEnable``, refuse to start on a missing or malformed ACL file (exit 2, FILE:LINE)."""
    if config.acl_enable and config.acl_file:
        from rocketpy.acl.rules import load_acl_file

        load_acl_file(config.acl_file)


class _LazyGroup(click.Group):
    """A group whose sub-commands are imported on first use (``rocketpy --help`` stays fast).

    ``_source`` names a module and an attribute: a ``list[click.Command]`` or a ``click.Group``
    whose commands are adopted.
    """

    _source: tuple[str, str] = ("", "")
    _loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        module, attr = self._source
        source = getattr(importlib.import_module(module), attr)
        commands = source.commands.values() if isinstance(source, click.Group) else source
        for command in commands:
            self.add_command(command)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._load()
        return super().get_command(ctx, cmd_name)


class _AdminGroup(_LazyGroup):
    """The ``admin`` group; its sub-commands are ``rocketpy.admin_cli.commands``."""

    _source = ("rocketpy.admin_cli", "commands")

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from rocketpy.admin_cli import format_sections  # sections as RocketMQ's areas

        format_sections(self, ctx, formatter)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from rocketpy.admin_cli import find_command  # any letter case; a typo gets the nearest name

        return super().get_command(ctx, cmd_name) or find_command(self, ctx, cmd_name)


class _BenchGroup(_LazyGroup):
    """The ``bench`` group; its sub-commands are those of the ``rocketpy.bench.bench`` group."""

    _source = ("rocketpy.bench", "bench")


@cli.group("admin", cls=_AdminGroup, invoke_without_command=True, context_settings=_CONTEXT)
@click.option(
    "-a",
    "--access-key",
    envvar="ROCKETPY_ACCESS_KEY",
    metavar="KEY",
    help="ACL account to sign requests with (env ROCKETPY_ACCESS_KEY).",
)
@click.option(
    "-s",
    "--secret-key",
    envvar="ROCKETPY_SECRET_KEY",
    metavar="SECRET",
    help="The account's secret key (env ROCKETPY_SECRET_KEY keeps it out of the process list).",
)
@click.pass_context
def admin_group(ctx: click.Context, access_key: str | None, secret_key: str | None) -> int | None:
    """RocketMQ's admin commands (updateTopic, topicList, clusterList, ...).

    With ACL on, pass an account before the command: 'mqadmin -a KEY -s SECRET updateTopic ...'.
    """
    if (access_key is None) != (secret_key is None):
        raise click.UsageError("-a/--access-key and -s/--secret-key go together: pass both or neither")
    ctx.ensure_object(dict).update(access_key=access_key, secret_key=secret_key)
    if ctx.invoked_subcommand is not None:
        return None
    click.echo(ctx.get_help())
    return 1


@cli.group("bench", cls=_BenchGroup, invoke_without_command=True, context_settings=_CONTEXT)
@click.pass_context
def bench_group(ctx: click.Context) -> int | None:
    """Benchmarks through the SDK: 'bench producer' and 'bench consumer' report TPS and latency."""
    if ctx.invoked_subcommand is not None:
        return None
    click.echo(ctx.get_help())
    return 1


@cli.command("shutdown", context_settings=_CONTEXT)
@click.argument("kind", type=click.Choice(["namesrv", "broker"]), metavar="namesrv|broker")
@click.option("--timeout", default=15.0, show_default=True, help="Seconds to wait for each process to exit.")
def shutdown_cmd(kind: str, timeout: float) -> int:
    """Stop every running NameServer or Broker of this user (found through their pid files)."""
    targets: list[tuple[Path, int]] = []
    for path in pid_files(kind):
        pid = read_pid_file(path)
        if pid is None or not process_alive(pid) or not _is_rocketpy(pid):
            path.unlink(missing_ok=True)  # stale: the process is gone (or the pid was reused)
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except PermissionError:
            click.echo(
                f"error: not allowed to stop {kind} pid {pid} ({path.name}); run as its owner", err=True
            )
            return 1
        targets.append((path, pid))
    if not targets:
        click.echo(f"error: no {kind} is running (no live pid file in {_run_dir_text()})", err=True)
        return 1
    deadline = time.monotonic() + timeout
    failed = False
    for path, pid in targets:
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        port = path.stem.split("-", 1)[-1]
        if process_alive(pid):
            click.echo(f"error: {kind} pid {pid} (port {port}) is still running after {timeout:g}s", err=True)
            failed = True
        else:
            click.echo(f"stopped {kind} pid {pid} (port {port})")
    return 1 if failed else 0


def _run_dir_text() -> str:
    from rocketpy.logsetup import run_dir

    return str(run_dir())


def _is_rocketpy(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the pid file
    return any(word in cmdline for word in (b"rocketpy", b"mqnamesrv", b"mqbroker"))


@cli.command("dashboard", context_settings=_CONTEXT)
@click.option(
    "-n",
    "--namesrv-addr",
    metavar="ADDR",
    default=lambda: os.environ.get("NAMESRV_ADDR") or "127.0.0.1:9876",
    show_default="NAMESRV_ADDR or 127.0.0.1:9876",
    help="NameServer address(es), 'host:port;host:port'.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve the pages on.")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="0 = any free port."
)
def dashboard_cmd(namesrv_addr: str, host: str, port: int) -> int:
    """Serve the web dashboard (cluster, topics, groups, messages, dead letters) until Ctrl-C."""
    try:
        import aiohttp  # noqa: F401
        import jinja2  # noqa: F401
    except ImportError as e:
        raise ConfigError(
            f"error: the dashboard needs the 'dashboard' extra ({e.name} is missing):"
            " pip install 'rocketpy[dashboard]'"
        ) from None
    import uvloop

    from rocketpy.addresses import AddressError, parse_namesrv_addrs
    from rocketpy.dashboard.app import serve

    try:
        parse_namesrv_addrs(namesrv_addr)
    except AddressError as e:
        raise ConfigError(f"error: -n {namesrv_addr!r}: {e}") from None
    try:
        uvloop.run(serve(namesrv_addr, host, port))
    except KeyboardInterrupt:
        pass
    return 0


@cli.command("store-dump", context_settings=_CONTEXT)
@click.argument("path")
@click.option("--json", "json_lines", is_flag=True, help="One JSON document per record.")
def store_dump_cmd(path: str, json_lines: bool) -> int:
    """Print the records of a store directory or file (commitlog, consumequeue, index)."""
    from rocketpy.broker.store.dump import main as dump

    return dump(path, json_lines)


# --------------------------------------------------------------------------------------------
# entry points


def _fail(message: str, code: int) -> NoReturn:
    print(message if message.startswith("error:") else f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def _invoke(command: click.Command, prog: str) -> NoReturn:
    try:
        result = command.main(prog_name=prog, standalone_mode=False)
    except ConfigError as e:
        _fail(str(e), 2)
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else str(e), err=True)
        sys.exit(2)
    except click.ClickException as e:
        ctx = getattr(e, "ctx", None)
        where = ctx.command_path if ctx is not None else prog
        _fail(f"error: {e.format_message().rstrip('.')} (see '{where} --help')", e.exit_code)
    except (click.Abort, KeyboardInterrupt):
        _fail("error: interrupted", 130)
    except RocketpyError as e:
        _fail(str(e), 1)
    sys.exit(result if isinstance(result, int) else 0)


def main() -> NoReturn:
    """``rocketpy`` console script (the ``cli`` group)."""
    _invoke(cli, "rocketpy")


def mqnamesrv_main() -> NoReturn:
    """``mqnamesrv`` console script."""
    _invoke(namesrv_cmd, "mqnamesrv")


def mqbroker_main() -> NoReturn:
    """``mqbroker`` console script."""
    _invoke(broker_cmd, "mqbroker")


def mqadmin_main() -> NoReturn:
    """``mqadmin`` console script."""
    _invoke(admin_group, "mqadmin")


def mqshutdown_main() -> NoReturn:
    """``mqshutdown`` console script."""
    _invoke(shutdown_cmd, "mqshutdown")


if __name__ == "__main__":
    main()
