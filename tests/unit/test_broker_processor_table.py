"""The broker's one table of request code -> handler, and what its processors hold."""

from __future__ import annotations

import inspect
from pathlib import Path

from rocketpy.broker.controller import BrokerController
from rocketpy.config import BrokerConfig, StoreConfig
from rocketpy.protocol.codes import RequestCode as C

#: Every code the broker served before the table (each processor's own ``register``), by processor.
SERVED_BEFORE = {
    # SendMessageProcessor
    C.SEND_MESSAGE, C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE,
    # PullMessageProcessor
    C.PULL_MESSAGE, C.LITE_PULL_MESSAGE,
    # QueryProcessor
    C.GET_MAX_OFFSET, C.GET_MIN_OFFSET, C.SEARCH_OFFSET_BY_TIMESTAMP, C.GET_EARLIEST_MSG_STORETIME,
    C.QUERY_MESSAGE, C.VIEW_MESSAGE_BY_ID,
    # ClientManageProcessor
    C.HEART_BEAT, C.UNREGISTER_CLIENT,
    # ConsumerManageProcessor
    C.GET_CONSUMER_LIST_BY_GROUP, C.QUERY_CONSUMER_OFFSET, C.UPDATE_CONSUMER_OFFSET,
    C.LOCK_BATCH_MQ, C.UNLOCK_BATCH_MQ,
    # AdminProcessor
    C.UPDATE_AND_CREATE_TOPIC, C.DELETE_TOPIC_IN_BROKER, C.GET_ALL_TOPIC_CONFIG,
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, C.DELETE_SUBSCRIPTIONGROUP,
    C.GET_BROKER_CONFIG, C.UPDATE_BROKER_CONFIG,
    # AdminStatsProcessor
    C.GET_BROKER_RUNTIME_INFO, C.GET_CONSUME_STATS, C.GET_TOPIC_STATS_INFO, C.GET_CONSUMER_CONNECTION_LIST,
}  # fmt: skip
#: Codes served since the table was introduced.
ADDED_SINCE = {
    C.END_TRANSACTION,
    C.END_TRANSACTION_BATCH,  # EndTransactionProcessor
    C.CONSUMER_SEND_MSG_BACK,  # SendBackProcessor
    # PopMessageProcessor, AckMessageProcessor, AssignmentProcessor (POP consumption)
    C.POP_MESSAGE, C.PEEK_MESSAGE, C.NOTIFICATION, C.POLLING_INFO,
    C.ACK_MESSAGE, C.BATCH_ACK_MESSAGE, C.CHANGE_MESSAGE_INVISIBLETIME,
    C.QUERY_ASSIGNMENT, C.SET_MESSAGE_REQUEST_MODE,
    # ControllerProcessor (controller mode; other brokers answer that it is off)
    C.GET_BROKER_EPOCH_CACHE,
    C.NOTIFY_BROKER_ROLE_CHANGED,
    C.CONTROLLER_GET_SYNC_STATE_DATA,
    C.CONTROLLER_GET_METADATA_INFO,
    C.CONTROLLER_ELECT_MASTER,
    # AuthProcessor (ACL 2.0's users and ACLs)
    C.AUTH_CREATE_USER, C.AUTH_UPDATE_USER, C.AUTH_DELETE_USER, C.AUTH_GET_USER, C.AUTH_LIST_USER,
    C.AUTH_CREATE_ACL, C.AUTH_UPDATE_ACL, C.AUTH_DELETE_ACL, C.AUTH_GET_ACL, C.AUTH_LIST_ACL,
    # ClientCallsProcessor (broker -> client calls on a group's own connections)
    C.INVOKE_BROKER_TO_RESET_OFFSET, C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
    C.GET_CONSUMER_RUNNING_INFO, C.CONSUME_MESSAGE_DIRECTLY, C.GET_PRODUCER_CONNECTION_LIST,
    # BrokerStatsViewProcessor (statsAll), StoreCleanProcessor (cleanExpiredCQ, cleanUnusedTopic,
    # deleteExpiredCommitLog), ConsumeQueueViewProcessor (queryCq)
    C.VIEW_BROKER_STATS_DATA, C.GET_BROKER_CONSUME_STATS,
    C.CLEAN_EXPIRED_CONSUMEQUEUE, C.CLEAN_UNUSED_TOPIC, C.DELETE_EXPIRED_COMMITLOG, C.QUERY_CONSUME_QUEUE,
}  # fmt: skip


def _controller(tmp_path: Path) -> BrokerController:
    broker = BrokerConfig(brokerName="b", bindAddress="127.0.0.1", listenPort=0)
    return BrokerController(broker, StoreConfig(storePathRootDir=str(tmp_path)))


def test_table_serves_every_code_served_before(tmp_path: Path) -> None:
    table = _controller(tmp_path).processor_table()
    assert len(SERVED_BEFORE) == 30
    # plus the tables a slave copies from its master (broker/ha/metadata.py)
    assert set(table) == SERVED_BEFORE | ADDED_SINCE | {C.GET_ALL_CONSUMER_OFFSET, C.GET_ALL_DELAY_OFFSET}


def test_handlers_take_channel_and_request(tmp_path: Path) -> None:
    for code, handler in _controller(tmp_path).processor_table().items():
        assert list(inspect.signature(handler).parameters) == ["channel", "request"], code.name


def test_processors_hold_managers_not_the_controller(tmp_path: Path) -> None:
    controller = _controller(tmp_path)
    table = controller.processor_table()
    processors = {id(h.__self__): h.__self__ for h in table.values()}  # type: ignore[attr-defined]
    # seven families, EndTransaction, SendBack, the replication tables, Pop, Ack, Assignment,
    # the controller codes, ACL 2.0's users and ACLs, the broker -> client calls, statsAll's view,
    # the store's clean commands, queryCq's view of a consume queue
    assert len(processors) == 19
    for processor in processors.values():
        held = vars(processor).values()
        assert all(value is not controller for value in held), type(processor).__name__
        # the shared managers are the controller's own instances (one store, one topic table)
        if hasattr(processor, "store"):
            assert processor.store is controller.store
        if hasattr(processor, "topic_config"):
            assert processor.topic_config is controller.topic_config
