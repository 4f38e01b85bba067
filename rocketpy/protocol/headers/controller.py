"""Controller mode (RocketMQ 5's controller codes, served by brokers in controller mode): a group's
SyncStateSet (CONTROLLER_GET_SYNC_STATE_DATA), a broker's epoch entries (GET_BROKER_EPOCH_CACHE),
the coordinator's metadata (CONTROLLER_GET_METADATA_INFO) and a switchover (CONTROLLER_ELECT_MASTER).
Answers are structured bodies (maps), described in docs/wire.md.
"""

from __future__ import annotations

from rocketpy.protocol.header import Header, wire


class BrokerNameRequestHeader(Header):
    """CONTROLLER_GET_SYNC_STATE_DATA: the group asked about."""

    broker_name: str = wire("brokerName", nonempty=True)


class ElectMasterRequestHeader(Header):
    """CONTROLLER_ELECT_MASTER: hand ``broker_name``'s group to ``broker_id`` (RocketMQ's field names)."""

    broker_name: str = wire("brokerName", nonempty=True)
    broker_id: int = wire("brokerId", lo=1)
