"""The one table of response codes: RocketMQ's number and name, and the error a client raises for it.

Each row is a ``Response``: the code, its ResponseCode name (RocketMQ's spelling), and for an error
code the ``MQBrokerError`` subclass ``broker_error`` builds (its name, what it means, and whether a
client may retry the request, possibly on another broker: RocketMQ's producer ``retryResponseCodes``).

``scripts/gen_protocol.py`` writes the ``ResponseCode`` enum (``rocketpy/protocol/codes.py``) and
the error classes (``rocketpy/errors.py``) from this table, between their ``generated`` markers;
``tests/unit/test_protocol_specs.py`` fails when either is not what the table gives. To add a
response code: add its row here and run the script.
"""

from __future__ import annotations

from typing import NamedTuple


class Response(NamedTuple):
    """One response code.

    Attributes:
        code: the number on the wire.
        name: RocketMQ's ResponseCode name.
        error: the error class a client raises for it (None: not an error, or no class of its own).
        doc: what it means, for the class's docstring.
        retriable: sending the same request again (maybe to another broker) may succeed.
    """

    code: int
    name: str
    error: str | None = None
    doc: str = ""
    retriable: bool = False


RESPONSES: tuple[Response, ...] = (
    Response(0, "SUCCESS"),
    Response(1, "SYSTEM_ERROR", "BrokerSystemError",
             "the server failed to handle the request (another broker may not)", retriable=True),
    Response(2, "SYSTEM_BUSY", "SystemBusyError",
             "the broker sheds load (queue wait or page cache busy); another may take it", retriable=True),
    Response(3, "REQUEST_CODE_NOT_SUPPORTED", "RequestCodeNotSupportedError",
             "the server does not serve this request code"),
    Response(4, "TRANSACTION_FAILED", "TransactionFailedError"),
    Response(10, "FLUSH_DISK_TIMEOUT", "FlushDiskTimeoutError",
             "stored, but not flushed in time (a send maps it to a SendStatus)"),
    Response(11, "SLAVE_NOT_AVAILABLE", "SlaveNotAvailableError",
             "stored, but no slave to replicate to (a send maps it to a SendStatus)"),
    Response(12, "FLUSH_SLAVE_TIMEOUT", "FlushSlaveTimeoutError",
             "stored, but not replicated in time (a send maps it to a SendStatus)"),
    Response(13, "MESSAGE_ILLEGAL", "MessageIllegalError",
             "the message breaks a broker limit (size, properties, topic)"),
    Response(14, "SERVICE_NOT_AVAILABLE", "ServiceNotAvailableError",
             "the broker cannot write now (slave, shutting down, store not writable)", retriable=True),
    Response(15, "VERSION_NOT_SUPPORTED", "VersionNotSupportedError"),
    Response(16, "NO_PERMISSION", "NoPermissionError",
             "the broker or topic refuses writes (or reads); another broker may accept", retriable=True),
    Response(17, "TOPIC_NOT_EXIST", "TopicNotExistError",
             "this broker lacks the topic; another broker of the route may have it", retriable=True),
    Response(18, "TOPIC_EXIST_ALREADY", "TopicExistAlreadyError"),
    Response(19, "PULL_NOT_FOUND", "PullNotFoundError", "answered where a pull status is not expected"),
    Response(20, "PULL_RETRY_IMMEDIATELY", "PullRetryImmediatelyError",
             "answered where a pull status is not expected"),
    Response(21, "PULL_OFFSET_MOVED", "PullOffsetMovedError", "answered where a pull status is not expected"),
    Response(22, "QUERY_NOT_FOUND", "QueryNotFoundError", "nothing matched the query (message, offset)"),
    Response(23, "SUBSCRIPTION_PARSE_FAILED", "SubscriptionParseFailedError",
             "the tag or SQL expression does not parse"),
    Response(24, "SUBSCRIPTION_NOT_EXIST", "SubscriptionNotExistError",
             "the broker has no subscription of the group for the topic"),
    Response(25, "SUBSCRIPTION_NOT_LATEST", "SubscriptionNotLatestError",
             "the broker holds a newer subscription version"),
    Response(26, "SUBSCRIPTION_GROUP_NOT_EXIST", "SubscriptionGroupNotExistError",
             "the consumer group is unknown and not auto-created"),
    Response(27, "FILTER_DATA_NOT_EXIST", "FilterDataNotExistError"),
    Response(28, "FILTER_DATA_NOT_LATEST", "FilterDataNotLatestError"),
    Response(29, "INVALID_PARAMETER", "InvalidParameterError", "a request field is missing or out of range"),
    Response(200, "TRANSACTION_SHOULD_COMMIT", "TransactionShouldCommitError"),
    Response(201, "TRANSACTION_SHOULD_ROLLBACK", "TransactionShouldRollbackError"),
    Response(202, "TRANSACTION_STATE_UNKNOW", "TransactionStateUnknownError"),
    Response(203, "TRANSACTION_STATE_GROUP_WRONG", "TransactionStateGroupWrongError"),
    Response(204, "NO_BUYER_ID", "NoBuyerIdError", "RocketMQ unit routing; retried on another broker",
             retriable=True),
    Response(205, "NOT_IN_CURRENT_UNIT", "NotInCurrentUnitError",
             "RocketMQ unit routing; retried on another broker", retriable=True),
    Response(206, "CONSUMER_NOT_ONLINE", "ConsumerNotOnlineError", "the client asked about is not connected"),
    Response(207, "CONSUME_MSG_TIMEOUT", "ConsumeMsgTimeoutError",
             "the client did not answer a direct consume in time"),
    Response(208, "NO_MESSAGE", "NoMessageError",
             "no such message (a POP ack outside the queue, or a message no longer in flight)"),
    Response(209, "POLLING_FULL", "PollingFullError",
             "the broker holds its maximum of waiting POP requests; receive again later"),
    Response(210, "POLLING_TIMEOUT", "PollingTimeoutError",
             "a POP found nothing before its poll time ended (a receive maps it to no messages)"),
    Response(215, "FLOW_CONTROL", "FlowControlError"),
    Response(1500, "GO_AWAY", "GoAwayError", "the broker is leaving; another broker may take the request",
             retriable=True),
)  # fmt: skip
