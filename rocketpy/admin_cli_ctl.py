"""``mqadmin`` controller-mode commands: getSyncStateSet, getBrokerEpoch, getControllerMetaData,
electMaster (RocketMQ 5's names and options; the coordinator is etcd, read through the brokers).

Registered on the ``mqadmin`` group of ``rocketpy.admin_cli`` (which imports this module); output
follows the same rules (plain text, or one JSON document with ``--json``).
"""

from __future__ import annotations

from typing import Any

import click

from rocketpy.admin_cli import _admin_command, _emit


@click.option("-b", "--brokerName", "broker_name", required=True, help="The broker group.")
@_admin_command("getSyncStateSet")
async def get_sync_state_set(admin: Any, as_json: bool, broker_name: str) -> None:
    """Show a group's master, master epoch and SyncStateSet (controller mode)."""
    doc = await admin.get_sync_state_set(broker_name)
    rows = [
        [doc["brokerName"], doc["masterId"], doc["masterAddr"], doc["masterEpoch"], doc["epochStartOffset"],
         ",".join(map(str, doc["syncStateSet"])), doc["syncStateSetEpoch"]],
    ]  # fmt: skip
    for bid, rep in doc.get("replicas", {}).items():
        rows.append([f"  replica {bid}", "", rep["addr"], rep["epoch"], rep["maxOffset"], "", ""])
    headers = ["Broker Name", "MasterId", "MasterAddr", "Epoch", "StartOffset", "SyncStateSet", "SSSEpoch"]
    _emit(as_json, doc, headers, rows)


@click.option("-b", "--brokerName", "broker_name", required=True, help="The broker group.")
@_admin_command("getBrokerEpoch")
async def get_broker_epoch(admin: Any, as_json: bool, broker_name: str) -> None:
    """Show each broker's epoch entries (epoch -> start offset) and log end (controller mode)."""
    docs = await admin.get_broker_epoch(broker_name)
    rows = []
    for d in docs:
        if "error" in d:
            rows.append([d["addr"], d["routeBrokerId"], "", "", d["error"], "", ""])
            continue
        entries = d.get("entries") or []
        for i, (epoch, start) in enumerate(entries):
            end = entries[i + 1][1] if i + 1 < len(entries) else d["maxOffset"]
            rows.append([d["addr"], d["brokerId"], d["role"], epoch, start, end, d["maxOffset"]])
    headers = ["Addr", "BrokerId", "Role", "Epoch", "StartOffset", "EndOffset", "MaxOffset"]
    _emit(as_json, {"brokers": docs}, headers, rows)


@_admin_command("getControllerMetaData")
async def get_controller_metadata(admin: Any, as_json: bool) -> None:
    """Show the coordinator (etcd members, leader, version) behind controller mode."""
    doc = await admin.get_controller_metadata()
    rows = [
        [m["id"], m["name"], ",".join(m["clientURLs"]), "yes" if m["isLeader"] else ""]
        for m in doc["members"]
    ]
    click.echo(
        f"controllerType: {doc['controllerType']}  etcd {doc['etcdVersion']}  raftTerm {doc['raftTerm']}  "
        f"keyPrefix {doc['keyPrefix']}  leaseTtl {doc['leaseTtlSeconds']}s"
    ) if not as_json else None
    _emit(as_json, doc, ["MemberId", "Name", "ClientURLs", "Leader"], rows)


@click.option("-b", "--brokerName", "broker_name", required=True, help="The broker group.")
@click.option("-i", "--brokerId", "broker_id", type=int, required=True, help="The replica to make master.")
@_admin_command("electMaster")
async def elect_master(admin: Any, as_json: bool, broker_name: str, broker_id: int) -> None:
    """Hand a group to another in-sync replica (graceful switchover: writes pause, nothing is lost)."""
    doc = await admin.elect_master(broker_name, broker_id)
    _emit(as_json, doc, ["Result"], [[doc.get("result", "")]])
