"""``mqadmin`` commands over a broker's statistics and its store's housekeeping: statsAll
(RocketMQ's per topic and group TPS and day counts), cleanExpiredCQ, cleanUnusedTopic and
deleteExpiredCommitLog.

Registered on the ``mqadmin`` group of ``rocketpy.admin_cli`` (which imports this module); names,
options and output follow RocketMQ's tools (plain text, or one JSON document with ``--json``).
"""

from __future__ import annotations

from typing import Any

import click

from rocketpy.admin_cli import _admin_command, _emit
from rocketpy.errors import RocketpyError

#: RocketMQ's statsAll line: topic and group (at most 64 characters each), then the figures
_STATS_LINE = "{:<64}  {:<64} {:>12} {:>11} {:>11} {:>14} {:>14}"


def stats_all_lines(rows: list[dict[str, Any]]) -> list[str]:
    """statsAll's text, RocketMQ's layout (a topic nobody consumes shows ``NO_CONSUMER``)."""
    out = [
        _STATS_LINE.format(
            "#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"
        )
    ]
    for r in rows:
        consumed = r["group"] is not None
        out.append(
            _STATS_LINE.format(
                r["topic"][:64],
                (r["group"] or "")[:64],
                r["accumulation"],
                f"{r['inTps']:.2f}",
                f"{r['outTps']:.2f}" if consumed else "",
                r["inMsg24Hour"],
                r["outMsg24Hour"] if consumed else "NO_CONSUMER",
            )
        )
    return out


@click.option("-a", "--activeTopic", "active", is_flag=True, help="Print active topics only.")
@click.option("-t", "--topic", default=None, help="Print this topic only.")
@_admin_command("statsAll")
async def stats_all(admin: Any, as_json: bool, active: bool, topic: str | None) -> None:
    """Topic and consumer TPS stats: accumulation, in/out TPS and the day's in/out messages."""
    from rocketpy.client.admin_stats import stats_all as collect

    rows, failed = await collect(admin, topic=topic, active_only=active)
    if as_json:
        _emit(True, {"stats": rows, "failed": failed})
        return
    for line in stats_all_lines(rows):
        click.echo(line)
    for name, why in failed.items():
        click.echo(f"{name}: left out: {why}", err=True)


async def _clean(admin: Any, as_json: bool, cluster: str | None, broker_addr: str | None, what: str) -> None:
    """Run one clean on every target broker; RocketMQ prints ``success`` or ``false``."""
    from rocketpy.client import admin_stats

    results: dict[str, Any] = {}
    ok = True
    for addr in await admin_stats.clean_targets(admin, cluster, broker_addr):
        try:
            if what == "cq":
                results[addr] = {"filesDeleted": await admin_stats.clean_expired_cq(admin, addr)}
            elif what == "commitlog":
                results[addr] = {"filesDeleted": await admin_stats.delete_expired_commitlog(admin, addr)}
            else:
                results[addr] = {"topics": await admin_stats.clean_unused_topic(admin, addr)}
        except RocketpyError as e:
            ok = False
            results[addr] = {"error": str(e)}
    if as_json:
        _emit(True, {"success": ok, "brokers": results})
        return
    click.echo("success" if ok else "false")
    for addr, r in results.items():
        if "error" in r:
            click.echo(f"{addr}: {r['error']}", err=True)


_CLUSTER = click.option("-c", "--cluster", default=None, help="Every broker of this cluster.")
_BROKER = click.option("-b", "--brokerAddr", "broker_addr", default=None, help="This broker only.")


@_CLUSTER
@_BROKER
@_admin_command("cleanExpiredCQ")
async def clean_expired_cq(admin: Any, as_json: bool, cluster: str | None, broker_addr: str | None) -> None:
    """Clean expired ConsumeQueue on broker (files wholly before the commitlog's start)."""
    await _clean(admin, as_json, cluster, broker_addr, "cq")


@_CLUSTER
@_BROKER
@_admin_command("cleanUnusedTopic")
async def clean_unused_topic(admin: Any, as_json: bool, cluster: str | None, broker_addr: str | None) -> None:
    """Clean unused topic on broker (the queues of topics it no longer has)."""
    await _clean(admin, as_json, cluster, broker_addr, "topic")


@_CLUSTER
@_BROKER
@_admin_command("deleteExpiredCommitLog")
async def delete_expired_commitlog(
    admin: Any, as_json: bool, cluster: str | None, broker_addr: str | None
) -> None:
    """Delete expired CommitLog files (past fileReservedTime) now, not at the deleteWhen hour."""
    await _clean(admin, as_json, cluster, broker_addr, "commitlog")
