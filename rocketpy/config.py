"""Daemon configuration: pydantic models whose aliases are RocketMQ's ``.properties`` key names.

Field names are snake_case (what the code reads); aliases are RocketMQ's camelCase keys (what
files, ``-p`` output and UPDATE_BROKER_CONFIG use). Durations are milliseconds unless a name
says otherwise, as in RocketMQ.

Also owns turning ``.properties`` entries (read by ``rocketpy.properties``, whose names are
re-exported here) plus command-line overrides into validated models (``load_namesrv_config``,
``load_broker_config``) where every mistake is a ``ConfigError`` whose message is the one line to
print (``error: FILE:LINE: ...``), and printing the effective config (``config_lines``, for ``-p``).
A leading ``~`` in a path value (``storePathRootDir``, ``storePathCommitLog``, ``kvConfigPath``)
means the user's home directory, as in a shell.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import socket
from enum import Enum, StrEnum
from typing import Any, Protocol, get_args

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo

from rocketpy.addresses import AddressError, parse_namesrv_addrs
from rocketpy.errors import ConfigError, HeaderError
from rocketpy.limits import (
    CHANNEL_IDLE_SECONDS,
    DEFAULT_MAX_HEADER_BYTES,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_ADDRESS,
    MAX_HEADER_BYTES,
    MAX_MESSAGE_BYTES,
    PARTIAL_FRAME_SECONDS,
)
from rocketpy.properties import Property, parse_properties, read_properties_file
from rocketpy.protocol.headers.pop import MessageRequestMode

__all__ = [
    "OLD_KEY_SPELLINGS",
    "SECRET_KEYS",
    "AclKeys",
    "BrokerConfig",
    "BrokerRole",
    "ConfigError",
    "ControllerType",
    "FlushDiskType",
    "NamesrvConfig",
    "Property",
    "StoreConfig",
    "advertised_host",
    "config_lines",
    "load_broker_config",
    "load_namesrv_config",
    "parse_delay_levels",
    "parse_properties",
    "read_properties_file",
]


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class ControllerType(StrEnum):
    """Who coordinates controller mode (``controllerType``): etcd is the one built."""

    ETCD = "ETCD"


_MODEL_CONFIG = ConfigDict(populate_by_name=True, extra="forbid", validate_assignment=True)

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024


_DELAY_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str) -> list[int]:
    """``messageDelayLevel`` ("1s 5s ... 2h") as milliseconds per level (level 1 first).

    Raises:
        ValueError: a word is not a positive number with a unit s, m, h or d, or there is none.
    """
    out: list[int] = []
    for word in spec.split():
        if not re.fullmatch(r"[0-9]+[smhd]", word) or int(word[:-1]) <= 0:
            raise ValueError(
                f"delay level {len(out) + 1} ({word!r}) is not a positive whole number with a unit "
                "s, m, h or d (e.g. '1s 5s 10s 30s 1m ... 2h')"
            )
        out.append(int(word[:-1]) * _DELAY_UNITS_MS[word[-1]])
    if not out:
        raise ValueError("no delay level given: list at least one, e.g. '1s 5s 10s'")
    return out


def _home(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


#: The ACL file's name beside the daemon's properties file (RocketMQ: ``conf/plain_acl.yml``).
DEFAULT_ACL_FILE_NAME = "plain_acl.yml"


class AclKeys(Protocol):
    """The plain ACL keys shared by the broker and the NameServer (``rocketpy.acl``).

    ``aclFile`` is None until loading resolves it: ``plain_acl.yml`` beside the properties file (the
    working directory without one); a relative path is taken relative to the properties file.
    """

    acl_enable: bool
    acl_file: str | None
    acl_file_check_interval: int


def _acl_fields() -> tuple[Any, Any, Any]:
    """The ``AclKeys`` fields (one definition, placed last in both daemon models)."""
    return (
        Field(False, alias="aclEnable"),
        Field(None, alias="aclFile"),
        Field(2000, alias="aclFileCheckInterval", gt=0),
    )


class ConnectionLimits(BaseModel):
    """A daemon's defences against hostile or broken peers (docs/operations.md "Hostile traffic")."""

    model_config = _MODEL_CONFIG

    max_connections: int = Field(MAX_CONNECTIONS, alias="maxConnections", gt=0)
    max_connections_per_address: int = Field(
        MAX_CONNECTIONS_PER_ADDRESS, alias="maxConnectionsPerAddress", gt=0
    )
    # RocketMQ's NettyServerConfig key; 0 = never close idle connections
    server_channel_max_idle_time_seconds: int = Field(
        CHANNEL_IDLE_SECONDS, alias="serverChannelMaxIdleTimeSeconds", ge=0
    )
    partial_frame_timeout_seconds: int = Field(
        PARTIAL_FRAME_SECONDS, alias="partialFrameTimeoutSeconds", ge=0
    )
    # a longer frame header closes the connection before it is read (rocketpy.limits)
    max_header_bytes: int = Field(
        DEFAULT_MAX_HEADER_BYTES, alias="maxHeaderBytes", ge=1024, le=MAX_HEADER_BYTES
    )

    def server_limits(self) -> dict[str, Any]:
        """The keyword arguments of ``RemotingServer`` these settings stand for."""
        return {
            "max_header_bytes": self.max_header_bytes,
            "max_connections": self.max_connections,
            "max_connections_per_address": self.max_connections_per_address,
            "idle_seconds": self.server_channel_max_idle_time_seconds,
            "partial_frame_seconds": self.partial_frame_timeout_seconds,
        }


class NamesrvConfig(ConnectionLimits):
    """NameServer settings (RocketMQ's NamesrvConfig + NettyServerConfig keys)."""

    model_config = _MODEL_CONFIG

    listen_port: int = Field(9876, alias="listenPort", ge=0, le=65535)
    bind_address: str = Field("0.0.0.0", alias="bindAddress")
    scan_not_active_broker_interval: int = Field(10_000, alias="scanNotActiveBrokerInterval", gt=0)
    broker_channel_expired_time: int = Field(120_000, alias="brokerChannelExpiredTime", gt=0)
    kv_config_path: str = Field(_home("namesrv", "kvConfig.json"), alias="kvConfigPath")
    order_message_enable: bool = Field(False, alias="orderMessageEnable")
    max_frame_bytes: int = Field(DEFAULT_MAX_FRAME_BYTES, alias="maxFrameBytes", gt=1024)
    # Prometheus metrics at http://bindAddress:metricsPort/metrics (rocketpy.metrics); 0 = off
    metrics_port: int = Field(0, alias="metricsPort", ge=0, le=65535)
    acl_enable: bool
    acl_file: str | None
    acl_file_check_interval: int
    acl_enable, acl_file, acl_file_check_interval = _acl_fields()

    @field_validator("kv_config_path")
    @classmethod
    def _expand_paths(cls, value: str) -> str:
        return os.path.expanduser(value)


class StoreConfig(BaseModel):
    """Message store settings (RocketMQ's MessageStoreConfig keys)."""

    model_config = _MODEL_CONFIG

    store_path_root_dir: str = Field(_home("store"), alias="storePathRootDir")
    store_path_commit_log: str | None = Field(None, alias="storePathCommitLog")
    mapped_file_size_commit_log: int = Field(1024 * 1024 * 1024, alias="mappedFileSizeCommitLog", ge=4096)
    mapped_file_size_consume_queue: int = Field(300_000 * 20, alias="mappedFileSizeConsumeQueue", ge=20)
    flush_disk_type: FlushDiskType = Field(FlushDiskType.ASYNC_FLUSH, alias="flushDiskType")
    broker_role: BrokerRole = Field(BrokerRole.ASYNC_MASTER, alias="brokerRole")
    flush_interval_commit_log: int = Field(500, alias="flushIntervalCommitLog", gt=0)
    flush_commit_log_least_pages: int = Field(4, alias="flushCommitLogLeastPages", ge=0)
    flush_commit_log_thorough_interval: int = Field(10_000, alias="flushCommitLogThoroughInterval", gt=0)
    flush_interval_consume_queue: int = Field(1000, alias="flushIntervalConsumeQueue", gt=0)
    flush_consume_queue_least_pages: int = Field(2, alias="flushConsumeQueueLeastPages", ge=0)
    flush_consume_queue_thorough_interval: int = Field(
        60_000, alias="flushConsumeQueueThoroughInterval", gt=0
    )
    sync_flush_timeout: int = Field(5000, alias="syncFlushTimeout", gt=0)
    file_reserved_time: int = Field(72, alias="fileReservedTime", ge=0)
    delete_when: str = Field("04", alias="deleteWhen")
    disk_max_used_space_ratio: int = Field(75, alias="diskMaxUsedSpaceRatio", ge=10, le=95)
    disk_space_clean_forcibly_ratio: int = Field(85, alias="diskSpaceCleanForciblyRatio", ge=10, le=95)
    disk_space_warning_level_ratio: int = Field(90, alias="diskSpaceWarningLevelRatio", ge=10, le=95)
    clean_resource_interval: int = Field(10_000, alias="cleanResourceInterval", gt=0)
    destroy_mapped_file_interval_forcibly: int = Field(
        120_000, alias="destroyMapedFileIntervalForcibly", ge=0
    )
    warm_mapped_file_enable: bool = Field(False, alias="warmMapedFileEnable")
    max_message_size: int = Field(MAX_MESSAGE_BYTES, alias="maxMessageSize", gt=0)
    message_index_enable: bool = Field(True, alias="messageIndexEnable")
    max_hash_slot_num: int = Field(5_000_000, alias="maxHashSlotNum", gt=0)
    max_index_num: int = Field(20_000_000, alias="maxIndexNum", gt=0)
    check_crc_on_recover: bool = Field(True, alias="checkCRCOnRecover")
    max_transfer_bytes_on_message_in_memory: int = Field(
        256 * 1024, alias="maxTransferBytesOnMessageInMemory", gt=0
    )
    max_transfer_count_on_message_in_memory: int = Field(32, alias="maxTransferCountOnMessageInMemory", gt=0)
    message_delay_level: str = Field(
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", alias="messageDelayLevel"
    )
    flush_delay_offset_interval: int = Field(10_000, alias="flushDelayOffsetInterval", gt=0)
    # RocketMQ 5 timer messages (any delivery time): 1 s slots, a wheel of TIMER_WHEEL_SLOTS seconds
    timer_wheel_enable: bool = Field(True, alias="timerWheelEnable")
    timer_max_delay_sec: int = Field(3 * 86_400, alias="timerMaxDelaySec", gt=0)
    timer_roll_window_slot: int = Field(2 * 86_400, alias="timerRollWindowSlot", gt=0, le=7 * 86_400 - 2)
    mapped_file_size_timer_log: int = Field(100 * 1024 * 1024, alias="mappedFileSizeTimerLog", ge=4096)
    timer_flush_interval_ms: int = Field(1000, alias="timerFlushIntervalMs", gt=0)
    # master/slave replication (rocketpy.broker.ha; RocketMQ's HAService keys)
    ha_listen_port: int | None = Field(None, alias="haListenPort", ge=0, le=65535)  # None: listenPort + 1
    ha_master_address: str | None = Field(None, alias="haMasterAddress")  # None: learnt from the NameServer
    ha_send_heartbeat_interval: int = Field(5000, alias="haSendHeartbeatInterval", gt=0)
    ha_housekeeping_interval: int = Field(20_000, alias="haHousekeepingInterval", gt=0)
    ha_transfer_batch_size: int = Field(32 * 1024, alias="haTransferBatchSize", ge=1024, le=4 << 20)
    ha_max_gap_not_in_sync: int = Field(256 * 1024 * 1024, alias="haMaxGapNotInSync", gt=0)
    # controller mode: a slave that has not caught up with the master for this long leaves the
    # SyncStateSet (RocketMQ 5's key; broker/failover/sync_state.py)
    ha_max_time_slave_not_catchup: int = Field(15_000, alias="haMaxTimeSlaveNotCatchup", gt=0)
    # overload: a commitlog flush running longer than this answers new sends SYSTEM_BUSY (send_queue.py)
    os_page_cache_busy_timeout_mills: int = Field(1000, alias="osPageCacheBusyTimeOutMills", gt=0)

    @field_validator("message_delay_level")
    @classmethod
    def _check_delay_levels(cls, value: str) -> str:
        parse_delay_levels(value)
        return value

    @field_validator("delete_when")
    @classmethod
    def _check_delete_when(cls, value: str) -> str:
        # RocketMQ's rule: whole hours of the day, ';'-separated; an hour past 23 never comes
        if not all(p.isdigit() for p in _hour_parts(value)):
            raise ValueError(
                f"deleteWhen is hours of the day separated by ';' (e.g. 04 or 04;16), got {value!r}"
            )
        return value

    @field_validator("store_path_root_dir", "store_path_commit_log")
    @classmethod
    def _expand_paths(cls, value: str | None) -> str | None:
        return os.path.expanduser(value) if value else value

    def commit_log_dir(self) -> str:
        """Directory of the commitlog files."""
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")


def _hour_parts(delete_when: str) -> list[str]:
    return [p.strip() for p in delete_when.replace(",", ";").split(";")]


def delete_hours(delete_when: str) -> set[int]:
    """``deleteWhen`` ("04" or "04;16") as a set of hours (checked when the config is read)."""
    return {int(p) for p in _hour_parts(delete_when) if p.isdigit()}


def _default_broker_name() -> str:
    return socket.gethostname() or "broker"


class BrokerConfig(ConnectionLimits):
    """Broker settings (RocketMQ's BrokerConfig + NettyServerConfig keys)."""

    model_config = _MODEL_CONFIG

    broker_cluster_name: str = Field("DefaultCluster", alias="brokerClusterName")
    broker_name: str = Field(default_factory=_default_broker_name, alias="brokerName")
    broker_id: int = Field(0, alias="brokerId", ge=0)
    namesrv_addr: str | None = Field(None, alias="namesrvAddr")
    listen_port: int = Field(10911, alias="listenPort", ge=0, le=65535)
    bind_address: str = Field("0.0.0.0", alias="bindAddress")
    broker_ip1: str | None = Field(None, alias="brokerIP1")
    broker_permission: int = Field(6, alias="brokerPermission", ge=0, le=15)
    auto_create_topic_enable: bool = Field(True, alias="autoCreateTopicEnable")
    auto_create_subscription_group: bool = Field(True, alias="autoCreateSubscriptionGroup")
    default_topic_queue_nums: int = Field(8, alias="defaultTopicQueueNums", gt=0, le=1024)
    long_polling_enable: bool = Field(True, alias="longPollingEnable")
    short_polling_time_mills: int = Field(1000, alias="shortPollingTimeMills", gt=0)
    notify_consumer_ids_changed_enable: bool = Field(True, alias="notifyConsumerIdsChangedEnable")
    register_name_server_period: int = Field(30_000, alias="registerNameServerPeriod", gt=0)
    register_broker_timeout_mills: int = Field(6000, alias="registerBrokerTimeoutMills", gt=0)
    flush_consumer_offset_interval: int = Field(5000, alias="flushConsumerOffsetInterval", gt=0)
    channel_expired_timeout: int = Field(120_000, alias="channelExpiredTimeout", gt=0)
    transaction_time_out: int = Field(6000, alias="transactionTimeOut", gt=0)
    transaction_check_max: int = Field(15, alias="transactionCheckMax", gt=0)
    transaction_check_interval: int = Field(30_000, alias="transactionCheckInterval", gt=0)
    enable_property_filter: bool = Field(False, alias="enablePropertyFilter")
    max_frame_bytes: int = Field(DEFAULT_MAX_FRAME_BYTES, alias="maxFrameBytes", gt=1024)
    # replication (rocketpy.broker.ha): a slave copies the master's tables this often (SlaveSynchronize)
    slave_sync_interval: int = Field(10_000, alias="slaveSyncInterval", gt=0)
    slave_read_enable: bool = Field(False, alias="slaveReadEnable")
    access_message_in_memory_max_ratio: int = Field(40, alias="accessMessageInMemoryMaxRatio", ge=0, le=100)
    # overload (broker/send_queue.py): SYSTEM_BUSY once the oldest waiting put waited this long, or
    # this many puts wait for the disk (RocketMQ's BrokerFastFailure and send thread-pool queue)
    wait_time_mills_in_send_queue: int = Field(200, alias="waitTimeMillsInSendQueue", gt=0)
    send_thread_pool_queue_capacity: int = Field(10_000, alias="sendThreadPoolQueueCapacity", gt=0)
    # scale (broker/registration.py): the topic table goes to NameServers in requests of this many
    # topics (RocketMQ 5's split registration; one request would pass the frame limit near 100k)
    enable_split_registration: bool = Field(True, alias="enableSplitRegistration")
    split_registration_size: int = Field(800, alias="splitRegistrationSize", gt=0, le=50_000)
    # controller mode (rocketpy.broker.failover): etcd elects each broker group's master
    enable_controller_mode: bool = Field(False, alias="enableControllerMode")
    controller_type: ControllerType = Field(ControllerType.ETCD, alias="controllerType")
    etcd_endpoints: str = Field("", alias="etcdEndpoints")
    etcd_key_prefix: str = Field("/rocketpy", alias="etcdKeyPrefix", pattern=r"^/[A-Za-z0-9_./-]*$")
    controller_lease_ttl_seconds: int = Field(5, alias="controllerLeaseTtlSeconds", ge=2, le=120)
    enable_elect_unclean_master: bool = Field(False, alias="enableElectUncleanMaster")
    all_ack_in_sync_state_set: bool = Field(False, alias="allAckInSyncStateSet")
    min_in_sync_replicas: int = Field(1, alias="minInSyncReplicas", ge=1, le=16)
    # Prometheus metrics at http://bindAddress:metricsPort/metrics (rocketpy.metrics); 0 = off
    metrics_port: int = Field(0, alias="metricsPort", ge=0, le=65535)
    # message trace (rocketpy.broker.trace): create the trace topic and write the broker's own records
    trace_topic_enable: bool = Field(False, alias="traceTopicEnable")
    msg_trace_topic_name: str = Field("RMQ_SYS_TRACE_TOPIC", alias="msgTraceTopicName", min_length=1)
    # POP consumption (rocketpy.broker.pop): held POP requests per (group, topic, queue) and in
    # total (past either: POLLING_FULL), and the most messages of one queue in flight at once
    pop_polling_size: int = Field(1024, alias="popPollingSize", gt=0, le=100_000)
    max_pop_polling_size: int = Field(100_000, alias="maxPopPollingSize", gt=0, le=1_000_000)
    pop_inflight_message_threshold: int = Field(
        100_000, alias="popInflightMessageThreshold", gt=0, le=1_000_000
    )
    # ms a plain pop's CK record is held back (never written when the pop is acked within it;
    # broker/pop/ck_buffer.py); 0 = written at once. RocketMQ's name (its default is 10 s, off)
    pop_ck_stay_buffer_time: int = Field(500, alias="popCkStayBufferTime", ge=0, le=60_000)
    # QUERY_ASSIGNMENT for a (topic, group) with no mode set by SET_MESSAGE_REQUEST_MODE
    default_message_request_mode: MessageRequestMode = Field(
        MessageRequestMode.PULL, alias="defaultMessageRequestMode"
    )
    default_pop_share_queue_num: int = Field(-1, alias="defaultPopShareQueueNum", ge=-1, le=1024)
    acl_enable: bool
    acl_file: str | None
    acl_file_check_interval: int
    acl_enable, acl_file, acl_file_check_interval = _acl_fields()
    # the ACL account the broker signs its own requests with (to NameServers, a slave to its master)
    acl_access_key: str | None = Field(None, alias="aclAccessKey")
    acl_secret_key: str | None = Field(None, alias="aclSecretKey")
    # ACL 2.0 (RocketMQ 5's AuthConfig keys; rocketpy.acl.auth_*, broker/auth_metadata.py): users and
    # ACLs kept by the broker; JSON {"username","password"} / {"accessKey","secretKey"} Super users
    authentication_enabled: bool = Field(False, alias="authenticationEnabled")
    authorization_enabled: bool = Field(False, alias="authorizationEnabled")
    init_authentication_user: str | None = Field(None, alias="initAuthenticationUser")
    inner_client_authentication_credentials: str | None = Field(
        None, alias="innerClientAuthenticationCredentials"
    )
    # RocketMQ 5's gRPC API (rocketpy.broker.grpc), with RocketMQ proxy's key names and defaults
    # where the proxy has the key: grpcServerPort 0 = any free port, -1 = off
    grpc_server_port: int = Field(8081, alias="grpcServerPort", ge=-1, le=65535)
    grpc_tls_cert_path: str | None = Field(None, alias="grpcTlsCertPath")
    grpc_tls_key_path: str | None = Field(None, alias="grpcTlsKeyPath")
    grpc_max_inbound_message_size: int = Field(
        130 * 1024 * 1024, alias="grpcMaxInboundMessageSize", ge=64 * 1024
    )
    # RocketMQ's proxy leaves it unbounded (Integer.MAX_VALUE); here one connection's streams are bounded
    grpc_max_concurrent_calls_per_connection: int = Field(
        1000, alias="grpcMaxConcurrentCallsPerConnection", gt=0
    )
    grpc_client_idle_time_mills: int = Field(120_000, alias="grpcClientIdleTimeMills", gt=0)
    grpc_shutdown_time_seconds: int = Field(30, alias="grpcShutdownTimeSeconds", ge=0)
    # rocketpy's: a Telemetry stream that sent no settings within this time is ended
    grpc_settings_timeout_mills: int = Field(10_000, alias="grpcSettingsTimeoutMills", gt=0)
    enable_message_body_empty_check: bool = Field(True, alias="enableMessageBodyEmptyCheck")
    max_user_property_size: int = Field(16 * 1024, alias="maxUserPropertySize")
    user_property_max_num: int = Field(128, alias="userPropertyMaxNum")
    max_message_group_size: int = Field(64, alias="maxMessageGroupSize")
    max_delay_time_mills: int = Field(24 * 3600 * 1000, alias="maxDelayTimeMills", gt=0)
    max_transaction_recovery_second: int = Field(3600, alias="maxTransactionRecoverySecond", gt=0)
    enable_topic_message_type_check: bool = Field(True, alias="enableTopicMessageTypeCheck")
    grpc_client_producer_max_attempts: int = Field(3, alias="grpcClientProducerMaxAttempts", gt=0)
    grpc_client_producer_backoff_initial_millis: int = Field(
        10, alias="grpcClientProducerBackoffInitialMillis", gt=0
    )
    grpc_client_producer_backoff_max_millis: int = Field(
        1000, alias="grpcClientProducerBackoffMaxMillis", gt=0
    )
    grpc_client_producer_backoff_multiplier: int = Field(2, alias="grpcClientProducerBackoffMultiplier", gt=0)
    grpc_client_consumer_min_long_polling_timeout_millis: int = Field(
        5000, alias="grpcClientConsumerMinLongPollingTimeoutMillis", gt=0
    )
    grpc_client_consumer_max_long_polling_timeout_millis: int = Field(
        20_000, alias="grpcClientConsumerMaxLongPollingTimeoutMillis", gt=0
    )
    grpc_client_consumer_long_polling_batch_size: int = Field(
        32, alias="grpcClientConsumerLongPollingBatchSize", gt=0
    )
    # ReceiveMessage (POP over gRPC): the invisible time a receive may ask for, the one an
    # auto-renewed receive gets, and the time a long poll keeps back to answer before the deadline
    min_invisible_time_mills_for_recv: int = Field(10_000, alias="minInvisibleTimeMillsForRecv", ge=0)
    max_invisible_time_mills: int = Field(
        12 * 3600 * 1000, alias="maxInvisibleTimeMills", gt=0, le=12 * 3600 * 1000
    )
    default_invisible_time_mills: int = Field(
        60_000, alias="defaultInvisibleTimeMills", gt=0, le=12 * 3600 * 1000
    )
    long_polling_reserve_time_in_millis: int = Field(100, alias="longPollingReserveTimeInMillis", ge=0)
    # auto-renew (a PushConsumer's receives): the broker keeps its messages invisible while the
    # client lives, renewing each renewAheadTimeMillis before it would show, for renewMaxTimeMillis
    enable_proxy_auto_renew: bool = Field(True, alias="enableProxyAutoRenew")
    renew_ahead_time_millis: int = Field(10_000, alias="renewAheadTimeMillis", ge=0)
    renew_max_time_millis: int = Field(3 * 3600 * 1000, alias="renewMaxTimeMillis", gt=0)
    renew_schedule_period_millis: int = Field(5000, alias="renewSchedulePeriodMillis", gt=0)
    max_renew_retry_times: int = Field(3, alias="maxRenewRetryTimes", ge=0)
    invisible_time_millis_when_clear: int = Field(
        1000, alias="invisibleTimeMillisWhenClear", gt=0, le=12 * 3600 * 1000
    )


#: Keys whose values are never printed (``-p``, GET_BROKER_CONFIG): shown as ``******``.
SECRET_KEYS = frozenset({"aclSecretKey", "initAuthenticationUser", "innerClientAuthenticationCredentials"})


# --------------------------------------------------------------------------------------------
# Loading: file entries + command-line overrides -> validated models

#: Old RocketMQ spellings still accepted in files (RocketMQ 4.x wrote "maped").
OLD_KEY_SPELLINGS = {
    "mapedFileSizeCommitLog": "mappedFileSizeCommitLog",
    "mapedFileSizeConsumeQueue": "mappedFileSizeConsumeQueue",
}

_Entry = tuple[str, str, str]  # (key, raw value, where: "FILE:LINE" or "command line")


def load_namesrv_config(path: str | None, overrides: dict[str, str]) -> NamesrvConfig:
    """Build the NameServer config from an optional ``.properties`` file and overrides.

    Args:
        path: the ``-c`` file, or None for defaults.
        overrides: RocketMQ key -> value from the command line; they win over the file.

    Raises:
        ConfigError: one line naming the file, line, key and what is allowed.
    """
    (config,) = _load((NamesrvConfig,), _entries(path, overrides))
    assert isinstance(config, NamesrvConfig)
    _resolve_acl_file(config, path)
    return config


def load_broker_config(path: str | None, overrides: dict[str, str]) -> tuple[BrokerConfig, StoreConfig]:
    """Build the broker and store configs from one ``.properties`` file and overrides.

    One broker file holds both BrokerConfig and StoreConfig keys, as in RocketMQ. When
    ``namesrvAddr`` is set nowhere, the ``NAMESRV_ADDR`` environment variable is used (RocketMQ's rule).

    Raises:
        ConfigError: one line naming the file, line, key and what is allowed.
    """
    entries = _entries(path, overrides)
    env_addr = os.environ.get("NAMESRV_ADDR")
    if env_addr and not any(k == "namesrvAddr" for k, _, _ in entries):
        entries.insert(0, ("namesrvAddr", env_addr, "environment NAMESRV_ADDR"))
    broker, store = _load((BrokerConfig, StoreConfig), entries)
    assert isinstance(broker, BrokerConfig) and isinstance(store, StoreConfig)
    _check_role(broker, store, entries)
    _resolve_acl_file(broker, path)
    if (broker.acl_access_key is None) != (broker.acl_secret_key is None):
        raise ConfigError(
            "error: aclAccessKey and aclSecretKey go together: set both (an admin account of the "
            "NameServers' ACL file) or neither"
        )
    _check_auth(broker)
    return broker, store


def _check_auth(broker: BrokerConfig) -> None:
    """ACL 1.0 and 2.0 exclude each other; authorization needs authentication; the JSON keys parse."""
    if broker.acl_enable and broker.authentication_enabled:
        raise ConfigError(
            "error: aclEnable=true (ACL 1.0, plain_acl.yml) and authenticationEnabled=true (ACL 2.0, "
            "users and ACLs) exclude each other: choose one"
        )
    if broker.authorization_enabled and not broker.authentication_enabled:
        raise ConfigError(
            "error: authorizationEnabled=true needs authenticationEnabled=true (a request's user must "
            "be proven before its ACL is applied)"
        )
    for key, value, fields in (
        ("initAuthenticationUser", broker.init_authentication_user, ("username", "password")),
        ("innerClientAuthenticationCredentials", broker.inner_client_authentication_credentials,
         ("accessKey", "secretKey")),
    ):  # fmt: skip
        if value is None:
            continue
        try:
            doc = json.loads(value)
            ok = isinstance(doc, dict) and all(isinstance(doc.get(f), str) and doc[f] for f in fields)
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f'error: {key} must be JSON {{"{fields[0]}": "...", "{fields[1]}": "..."}}')


def _resolve_acl_file(config: AclKeys, properties_path: str | None) -> None:
    base = os.path.dirname(os.path.abspath(properties_path)) if properties_path else os.getcwd()
    name = os.path.expanduser(config.acl_file or DEFAULT_ACL_FILE_NAME)
    config.acl_file = os.path.join(base, name)


def _entries(path: str | None, overrides: dict[str, str]) -> list[_Entry]:
    entries = [(p.key, p.value, f"{path}:{p.line}") for p in read_properties_file(path)] if path else []
    entries += [(k, v, "command line") for k, v in overrides.items()]
    return entries


def _key_table(models: tuple[type[BaseModel], ...]) -> dict[str, tuple[type[BaseModel], str]]:
    table: dict[str, tuple[type[BaseModel], str]] = {}
    for model in models:
        for name, field in model.model_fields.items():
            table[field.alias or name] = (model, name)
    for old, new in OLD_KEY_SPELLINGS.items():
        if new in table:
            table[old] = table[new]
    return table


def _load(models: tuple[type[BaseModel], ...], entries: list[_Entry]) -> list[BaseModel]:
    table = _key_table(models)
    values: dict[type[BaseModel], dict[str, Any]] = {m: {} for m in models}
    origin: dict[str, _Entry] = {}
    for key, raw, where in entries:
        if key not in table:
            raise ConfigError(_unknown_key_message(where, key, table))
        model, name = table[key]
        values[model][name] = _convert(model.model_fields[name], key, raw, where)
        origin[name] = (key, raw, where)
    built: list[BaseModel] = []
    for model in models:
        try:
            built.append(model.model_validate(values[model]))
        except ValidationError as e:
            raise ConfigError(_validation_message(e, origin)) from e
    return built


def _unknown_key_message(where: str, key: str, table: dict[str, Any]) -> str:
    known = [k for k in table if k not in OLD_KEY_SPELLINGS]
    by_case = {k.lower(): k for k in known}
    hint = by_case.get(key.lower()) or next(
        iter(difflib.get_close_matches(key, known, n=1, cutoff=0.6)), None
    )
    if hint:
        return f"error: {where}: unknown key '{key}' (did you mean '{hint}'?)"
    return f"error: {where}: unknown key '{key}' (print the known keys with -p)"


def _validation_message(e: ValidationError, origin: dict[str, _Entry]) -> str:
    err = e.errors()[0]
    name = str(err["loc"][0]) if err["loc"] else ""
    key, raw, where = origin.get(name, (name, "", "config"))
    return f"error: {where}: {key}='{raw.strip()}' is invalid: {err['msg']}"


def _convert(field: FieldInfo, key: str, raw: str, where: str) -> Any:
    """Turn one raw string into the field's type, or raise the one-line error for it.

    Surrounding whitespace is dropped first (a trailing blank after ``brokerName=a`` is a common,
    invisible mistake; the reader itself keeps it, as Java does).
    """
    value = raw.strip()
    args = get_args(field.annotation)
    base = next((a for a in args if a is not type(None)), None) if args else field.annotation
    if type(None) in args and value == "":
        return None
    if base is bool:
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"error: {where}: {key}='{value}' is not a boolean: use true or false")
    if base is int:
        return _convert_int(field, key, value, where)
    if isinstance(base, type) and issubclass(base, Enum):
        names = [m.value for m in base]
        if value.upper() in names:
            return base(value.upper())
        raise ConfigError(f"error: {where}: {key}='{value}' is not one of {', '.join(names)}")
    if key == "namesrvAddr":
        try:
            parse_namesrv_addrs(value)
        except AddressError as e:
            raise ConfigError(f"error: {where}: {key}='{value}': {e}") from e
    return value


def _convert_int(field: FieldInfo, key: str, value: str, where: str) -> int:
    lo: int | None = None
    hi: int | None = None
    for m in field.metadata:
        if isinstance(m, annotated_types.Ge):
            lo = int(m.ge)  # type: ignore[call-overload]
        elif isinstance(m, annotated_types.Gt):
            lo = int(m.gt) + 1  # type: ignore[call-overload]
        elif isinstance(m, annotated_types.Le):
            hi = int(m.le)  # type: ignore[call-overload]
        elif isinstance(m, annotated_types.Lt):
            hi = int(m.lt) - 1  # type: ignore[call-overload]
    if lo is not None and hi is not None:
        allowed = f"use an integer from {lo} to {hi}"
    elif lo is not None:
        allowed = f"use an integer >= {lo}"
    else:
        allowed = f"use an integer <= {hi}" if hi is not None else "use an integer"
    if not re.fullmatch(r"[+-]?[0-9]+", value):
        raise ConfigError(f"error: {where}: {key}='{value}' is not an integer: {allowed}")
    n = int(value)
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise ConfigError(f"error: {where}: {key}='{value}' is out of range: {allowed}")
    return n


def _where(entries: list[_Entry], *keys: str) -> str:
    """Where the last of ``keys`` was set ("config" when none was)."""
    return next((w for k, _, w in reversed(entries) if k in keys), "config")


def _check_controller_mode(broker: BrokerConfig, store: StoreConfig, entries: list[_Entry]) -> None:
    """Controller mode: etcd endpoints given; roles and ids are the controller's, not the file's."""
    where = _where(entries, "enableControllerMode")
    if not broker.etcd_endpoints.strip():
        raise ConfigError(
            f"error: {where}: enableControllerMode=true needs etcdEndpoints=HOST:PORT[,HOST:PORT...] "
            "(the etcd members' client addresses)"
        )
    try:
        parse_namesrv_addrs(broker.etcd_endpoints)
    except AddressError as e:
        raise ConfigError(f"error: {_where(entries, 'etcdEndpoints')}: etcdEndpoints: {e}") from e
    if store.broker_role is BrokerRole.SLAVE or broker.broker_id != 0:
        raise ConfigError(
            f"error: {_where(entries, 'brokerRole', 'brokerId')}: in controller mode the controller "
            "chooses the master and assigns broker ids: remove brokerId and use brokerRole=SYNC_MASTER "
            "(acknowledge once the SyncStateSet has a message) or ASYNC_MASTER"
        )
    if store.ha_master_address:
        raise ConfigError(
            f"error: {_where(entries, 'haMasterAddress')}: haMasterAddress cannot be set in controller "
            "mode (a follower replicates from the master etcd names)"
        )


def _check_role(broker: BrokerConfig, store: StoreConfig, entries: list[_Entry]) -> None:
    if broker.enable_controller_mode:
        _check_controller_mode(broker, store, entries)
        return
    where = next((w for k, _, w in reversed(entries) if k == "brokerId"), None)
    where = where or next((w for k, _, w in reversed(entries) if k == "brokerRole"), "config")
    if store.broker_role is BrokerRole.SLAVE and broker.broker_id == 0:
        raise ConfigError(
            f"error: {where}: brokerId='0' with brokerRole=SLAVE: "
            "a slave needs brokerId >= 1 (0 is the master)"
        )
    if store.broker_role is not BrokerRole.SLAVE and broker.broker_id != 0:
        raise ConfigError(
            f"error: {where}: brokerId='{broker.broker_id}' with brokerRole={store.broker_role.value}: "
            "a master has brokerId 0; set brokerRole=SLAVE for a slave"
        )


# --------------------------------------------------------------------------------------------
# Effective config (-p) and addresses


def config_lines(*configs: BaseModel) -> list[str]:
    """The effective configuration as ``key=value`` lines with RocketMQ key names (for ``-p``).

    Values are escaped so the output reads back as the same ``.properties`` file.
    """
    lines: list[str] = []
    for config in configs:
        for name, field in type(config).model_fields.items():
            key, value = field.alias or name, getattr(config, name)
            lines.append(f"{key}={'******' if key in SECRET_KEYS and value else _format_value(value)}")
    return lines


def _format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value.value if isinstance(value, Enum) else str(value)
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return "\\" + text if text[:1] in (" ", "\f") else text


def advertised_host(bind_address: str) -> str:
    """The host clients should use for a daemon bound to ``bind_address`` (never ``0.0.0.0``).

    A wildcard bind advertises the host's primary IPv4 address (found without sending a packet),
    or ``127.0.0.1`` when there is none.
    """
    if bind_address not in ("", "0.0.0.0", "::"):
        return bind_address
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # UDP connect: picks a route, sends nothing
            ip = str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    return ip if ip and not ip.startswith("0.") else "127.0.0.1"


#: The largest UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG body read.
MAX_CONFIG_BODY_BYTES = 64 * 1024


def config_update_entries(body: bytes | bytearray | memoryview, what: str) -> list[Property]:
    """The key=value lines of a config-update request's body (``what`` names the request in errors).

    Raises:
        HeaderError: a body over ``MAX_CONFIG_BODY_BYTES``, not UTF-8 properties text, or empty.
    """
    if len(body) > MAX_CONFIG_BODY_BYTES:
        raise HeaderError(f"the config body is larger than {MAX_CONFIG_BODY_BYTES} bytes")
    try:
        entries = parse_properties(bytes(body).decode(), f"{what} body")
    except (UnicodeDecodeError, ConfigError) as e:
        raise HeaderError(f"the body must be UTF-8 properties text (key=value lines): {e}") from e
    if not entries:
        raise HeaderError("the body holds no key=value line; nothing to update")
    return entries
