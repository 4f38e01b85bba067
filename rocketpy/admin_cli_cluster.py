"""``mqadmin`` commands about the NameServers' settings and replication: getNamesrvConfig,
updateNamesrvConfig, haStatus.

Registered on the ``mqadmin`` group of ``rocketpy.admin_cli`` (which imports this module); names,
options and output follow RocketMQ's tools (plain text, or one JSON document with ``--json``).
"""

from __future__ import annotations

import json
from typing import Any

import click

from rocketpy.admin_cli import _admin_command, _emit
from rocketpy.errors import RocketpyError
from rocketpy.protocol.codes import RequestCode

# ---- NameServer settings -------------------------------------------------------------------------


async def _each_namesrv(admin: Any, code: int, body: bytes = b"") -> dict[str, bytes]:
    """``code`` to every NameServer: address -> its answer's body (an error answer raises)."""
    from rocketpy.client.answers import check
    from rocketpy.remoting.command import RemotingCommand

    out = {}
    for addr in admin.instance.api.namesrv_addrs:
        resp = await admin.instance.remoting.invoke(
            addr, RemotingCommand.request(code, None, body), admin.timeout
        )
        out[addr] = bytes(check(resp, addr).body)
    return out


@_admin_command("getNamesrvConfig")
async def get_namesrv_config(admin: Any, as_json: bool) -> None:
    """Print every NameServer's effective configuration."""
    from rocketpy.config import parse_properties

    configs = {
        addr: {e.key: e.value for e in parse_properties(body.decode(), addr)}
        for addr, body in (await _each_namesrv(admin, RequestCode.GET_NAMESRV_CONFIG)).items()
    }
    if as_json:
        _emit(True, configs)
        return
    for addr, cfg in configs.items():
        click.echo(f"============{addr}============")
        for k, v in cfg.items():
            click.echo(f"{k:<50}=  {v}")


@click.option("-k", "--key", required=True, help="A key that can change live (the answer lists them).")
@click.option("-v", "--value", required=True)
@_admin_command("updateNamesrvConfig")
async def update_namesrv_config(admin: Any, as_json: bool, key: str, value: str) -> None:
    """Change a NameServer setting on every NameServer while they run (until their next start)."""
    done = await _each_namesrv(admin, RequestCode.UPDATE_NAMESRV_CONFIG, f"{key}={value}\n".encode())
    if as_json:
        _emit(True, {"updated": sorted(done), "key": key, "value": value})
        return
    click.echo(f"update name server config success!{sorted(done)}\n{key} : {value}")


# ---- replication ---------------------------------------------------------------------------------


def ha_doc(addr: str, runtime: dict[str, str]) -> dict[str, Any]:
    """One broker's replication as haStatus shows it: a master's slaves, or a slave's link."""
    try:
        ha = json.loads(runtime.get("haStatus", "null"))
    except ValueError:
        ha = None
    doc: dict[str, Any] = {"addr": addr, "role": runtime.get("brokerRole"),
                           "commitLogMaxOffset": int(runtime.get("commitLogMaxOffset", 0) or 0)}  # fmt: skip
    if isinstance(ha, list):
        doc["slaves"] = ha
    elif isinstance(ha, dict):
        doc["link"] = ha
    return doc


def _print_ha(doc: dict[str, Any]) -> None:
    if "link" in doc:
        link = doc["link"]
        behind = max(0, (link.get("masterOffset") or 0) - (link.get("slaveMaxOffset") or 0))
        click.echo(f"#SlaveAddr               {doc['addr']}")
        click.echo(f"#MasterHaAddr            {link.get('masterHaAddr')}")
        click.echo(f"#Connected               {str(link.get('connected')).lower()}")
        click.echo(f"#SlaveMaxOffset          {link.get('slaveMaxOffset')}")
        click.echo(f"#MasterOffset            {link.get('masterOffset')}")
        click.echo(f"#Diff                    {behind}")
        click.echo(f"#LastTransfer(s)         {link.get('secondsSinceFrame')}")
        return
    slaves = doc.get("slaves") or []
    click.echo(f"#MasterAddr               {doc['addr']}")
    click.echo(f"#MasterCommitLogMaxOffset {doc['commitLogMaxOffset']}")
    click.echo(f"#SlaveNum                 {len(slaves)}")
    keys = ("brokerId", "addr", "ackOffset", "bytesBehind", "secondsSinceReport")
    rows = [[s.get(k) for k in keys] for s in slaves]
    _emit(False, None, ["SlaveId", "SlaveAddr", "SlaveAckOffset", "Diff", "LastReport(s)"], rows)


@click.option("-b", "--brokerAddr", "broker_addr", help="This broker (a master or a slave).")
@click.option("-c", "--clusterName", "cluster", help="Every member of every broker of this cluster.")
@_admin_command("haStatus")
async def ha_status(admin: Any, as_json: bool, broker_addr: str | None, cluster: str | None) -> None:
    """Replication: a master's slaves (acknowledged offset, bytes behind, last report) or a slave's
    link to its master (connected, offsets, last transfer)."""
    if broker_addr:
        addrs = [broker_addr]
    elif cluster:
        info = await admin.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            raise RocketpyError(f"cluster {cluster!r} not found (see mqadmin clusterList)")
        bds = [info.broker_addr_table[n] for n in sorted(names) if n in info.broker_addr_table]
        addrs = [a for bd in bds for _bid, a in sorted(bd.broker_addrs.items())]
    else:
        raise click.UsageError("give -b BROKER_ADDR or -c CLUSTER")
    docs = [ha_doc(a, dict(await admin.broker_runtime_info(a))) for a in addrs]
    if as_json:
        _emit(True, {"brokers": docs})
        return
    for i, doc in enumerate(docs):
        if i:
            click.echo("")
        _print_ha(doc)
