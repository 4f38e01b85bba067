"""Controller-assigned broker ids (RocketMQ 5's ``brokerIdentity`` with its register check code).

Owns ``{storePathRootDir}/config/controllerIdentity.json``: the cluster, broker name, broker id and a
random ``registerCheckCode`` of this store. The first start in controller mode asks etcd for an id
(a transaction that takes ``ids/next`` and writes ``ids/{id}`` = the code, compared on the counter's
revision, so two brokers starting at once never get the same id), then keeps it in the file. Later
starts check that etcd still says the id belongs to this store's code; an id taken by another code
(a copied store directory, or a different cluster's etcd data) is refused with the reason. An id
etcd lost (a wiped etcd) is claimed again.

The file is read and written in a thread (it blocks on the disk).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from dataclasses import dataclass

from rocketpy.broker.failover.etcd import EtcdClient, created, modified, put_op
from rocketpy.broker.failover.keys import GroupKeys
from rocketpy.broker.store.json_file import read_json_with_backup, write_json_atomic
from rocketpy.errors import RocketpyError

log = logging.getLogger("rocketpy.broker.failover")

FILE_NAME = "controllerIdentity.json"
FIRST_ID = 1
MAX_ATTEMPTS = 20


class IdentityError(RocketpyError):
    """This store's broker id cannot be used (the message says why and what to do)."""


@dataclass(slots=True)
class Identity:
    """This store's identity in controller mode."""

    cluster: str
    broker_name: str
    broker_id: int
    code: str


def identity_path(store_root: str) -> str:
    """Where the identity file lives."""
    return os.path.join(store_root, "config", FILE_NAME)


def load_identity(path: str) -> Identity | None:
    """The stored identity (None: first start in controller mode). Blocking."""
    doc = read_json_with_backup(path)
    if doc is None:
        return None
    return Identity(str(doc["cluster"]), str(doc["brokerName"]), int(doc["brokerId"]), str(doc["code"]))


def save_identity(path: str, ident: Identity) -> None:
    """Keep the identity (atomically). Blocking."""
    write_json_atomic(
        path,
        {
            "cluster": ident.cluster,
            "brokerName": ident.broker_name,
            "brokerId": ident.broker_id,
            "code": ident.code,
        },
    )


async def obtain_identity(
    etcd: EtcdClient, keys: GroupKeys, cluster: str, broker_name: str, path: str
) -> Identity:
    """This store's broker id: the stored one (checked with etcd), or a new one from etcd.

    Raises:
        IdentityError: the store belongs to another group, or its id is another store's.
        EtcdUnavailable / EtcdError: etcd could not be asked.
    """
    ident = await asyncio.to_thread(load_identity, path)
    if ident is not None:
        if (ident.cluster, ident.broker_name) != (cluster, broker_name):
            raise IdentityError(
                f"this store belongs to {ident.cluster}/{ident.broker_name} ({path}), not "
                f"{cluster}/{broker_name}: use that brokerName or an empty store"
            )
        await _check_owner(etcd, keys, ident)
        return ident
    code = uuid.uuid4().hex
    broker_id = await _take_next_id(etcd, keys, code)
    ident = Identity(cluster, broker_name, broker_id, code)
    await asyncio.to_thread(save_identity, path, ident)
    log.info("controller assigned brokerId %d to this store (%s/%s)", broker_id, cluster, broker_name)
    return ident


async def _check_owner(etcd: EtcdClient, keys: GroupKeys, ident: Identity) -> None:
    key = keys.id_owner(ident.broker_id)
    kvs, _ = await etcd.range(key)
    if kvs:
        owner = json.loads(kvs[0].value or b"{}").get("code")
        if owner != ident.code:
            raise IdentityError(
                f"brokerId {ident.broker_id} of {ident.broker_name} belongs to another store in etcd "
                f"(check code {owner}, this store's is {ident.code}): was this store directory copied? "
                f"start from an empty store, or remove {identity_path('STORE')} to get a new id"
            )
        return
    claimed = await etcd.txn([created(key, 0)], [put_op(key, json.dumps({"code": ident.code}).encode())])
    if not claimed.succeeded:
        await _check_owner(etcd, keys, ident)
    else:
        log.warning(
            "etcd did not know brokerId %d of %s; claimed it again", ident.broker_id, ident.broker_name
        )


async def _take_next_id(etcd: EtcdClient, keys: GroupKeys, code: str) -> int:
    for _ in range(MAX_ATTEMPTS):
        kvs, _ = await etcd.range(keys.next_id)
        current = int(json.loads(kvs[0].value).get("next", FIRST_ID)) if kvs else FIRST_ID
        revision = kvs[0].mod_revision if kvs else 0
        for candidate in range(current, current + 64):  # skip ids a wiped counter hands out again
            owner = keys.id_owner(candidate)
            result = await etcd.txn(
                [modified(keys.next_id, revision), created(owner, 0)],
                [
                    put_op(keys.next_id, json.dumps({"next": candidate + 1}).encode()),
                    put_op(owner, json.dumps({"code": code}).encode()),
                ],
            )
            if result.succeeded:
                return candidate
            kvs, _ = await etcd.range(keys.next_id)
            if (kvs[0].mod_revision if kvs else 0) != revision:
                break  # another broker took an id meanwhile: read the counter again
    raise IdentityError(f"could not obtain a broker id from etcd after {MAX_ATTEMPTS} attempts")
