"""Daemon configuration: pydantic models whose aliases are RocketMQ's ``.properties`` key names.

Field names are snake_case (what the code reads); aliases are RocketMQ's camelCase keys (what
files, ``-p`` output and UPDATE_BROKER_CONFIG use). Durations are milliseconds unless a name
says otherwise, as in RocketMQ.

NOTE: the ``.properties`` reader and the file/line error reporting are added on top of these
models (see ``load_*`` functions below once present).
"""

from __future__ import annotations

import os
import socket
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class FlushDiskType(str, Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(str, Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


_MODEL_CONFIG = ConfigDict(populate_by_name=True, extra="forbid", validate_assignment=True)

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024


def _home(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


class NamesrvConfig(BaseModel):
    """NameServer settings (RocketMQ's NamesrvConfig + NettyServerConfig keys)."""

    model_config = _MODEL_CONFIG

    listen_port: int = Field(9876, alias="listenPort", ge=0, le=65535)
    bind_address: str = Field("0.0.0.0", alias="bindAddress")
    scan_not_active_broker_interval: int = Field(10_000, alias="scanNotActiveBrokerInterval", gt=0)
    broker_channel_expired_time: int = Field(120_000, alias="brokerChannelExpiredTime", gt=0)
    kv_config_path: str = Field(_home("namesrv", "kvConfig.json"), alias="kvConfigPath")
    order_message_enable: bool = Field(False, alias="orderMessageEnable")
    max_frame_bytes: int = Field(DEFAULT_MAX_FRAME_BYTES, alias="maxFrameBytes", gt=1024)


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
    flush_consume_queue_thorough_interval: int = Field(60_000, alias="flushConsumeQueueThoroughInterval", gt=0)
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
    max_message_size: int = Field(4 * 1024 * 1024, alias="maxMessageSize", gt=0)
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

    def commit_log_dir(self) -> str:
        """Directory of the commitlog files."""
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")


def _default_broker_name() -> str:
    return socket.gethostname() or "broker"


class BrokerConfig(BaseModel):
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
