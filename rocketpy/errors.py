"""The exceptions users see, and the registry of broker response codes.

``RocketpyError`` is the root of every error the package raises; ``MQClientError`` is raised for
mistakes and conditions on the client side (bad argument, no route, timeout, connection lost);
``MQBrokerError`` carries a broker's (or NameServer's) response code and remark. Messages always say
what to do next.

Every error has a ``retriable`` flag (as aiokafka's errors do): True when the same request may
succeed if sent again, possibly to another broker (a lost connection, a busy broker). The producer's
retry loop decides by this flag alone. Each error response code has its own ``MQBrokerError``
subclass (as asyncpg maps SQLSTATEs to classes); ``broker_error(code, remark, addr)`` builds the
right one, so ``except MQBrokerError`` and ``.code`` keep working while callers may also catch
``SystemBusyError`` and the like. The retriable codes are RocketMQ's producer ``retryResponseCodes``.
"""

from __future__ import annotations

from typing import ClassVar


class RocketpyError(Exception):
    """Base class of every rocketpy error."""

    #: True when sending the same request again (maybe to another broker) may succeed.
    retriable: ClassVar[bool] = False


class MQClientError(RocketpyError):
    """A client-side error: bad argument, no route, timeout, lost connection."""


class RemotingTimeoutError(MQClientError):
    """A request got no response within its timeout."""

    retriable = True


class RemotingConnectError(MQClientError):
    """A connection could not be made, or broke while a request was in flight."""

    retriable = True


class ConfigError(RocketpyError):
    """A bad configuration file or option; the message is the one line to print."""


class RemotingBindError(RocketpyError, OSError):
    """A server could not listen on its address (port in use, bad host, no permission)."""


_BY_CODE: dict[int, type[MQBrokerError]] = {}


class MQBrokerError(RocketpyError):
    """An error response from a broker or NameServer.

    Subclasses name one response code each (``response_code``) and register themselves for
    ``broker_error``; a code without a subclass raises this class itself.

    Attributes:
        code: the RocketMQ ResponseCode number.
        remark: the server's human-readable reason.
        addr: the server's address, when known.
    """

    #: The response code a subclass stands for (None on this base class).
    response_code: ClassVar[int | None] = None

    def __init__(self, code: int, remark: str | None, addr: str | None = None) -> None:
        from rocketpy.remoting.codes import response_name

        self.code = int(code)
        self.remark = remark or ""
        self.addr = addr
        where = f" from {addr}" if addr else ""
        super().__init__(f"{response_name(self.code)}{where}: {self.remark}")

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("response_code")
        if code is not None:
            assert code not in _BY_CODE, f"response code {code} registered twice"
            _BY_CODE[int(code)] = cls


#: How the remark of an ACL refusal (NO_PERMISSION) starts; it makes the error an ``AccessDeniedError``.
ACCESS_DENIED_PREFIX = "access denied: "


def broker_error(code: int, remark: str | None, addr: str | None = None) -> MQBrokerError:
    """The ``MQBrokerError`` subclass registered for ``code`` (else ``MQBrokerError``), built.

    A NO_PERMISSION whose remark starts with ``ACCESS_DENIED_PREFIX`` is an ``AccessDeniedError``.
    """
    cls = _BY_CODE.get(code, MQBrokerError)
    if cls is NoPermissionError and remark and remark.startswith(ACCESS_DENIED_PREFIX):
        cls = AccessDeniedError
    return cls(code, remark, addr)


def error_class(code: int) -> type[MQBrokerError]:
    """The class ``broker_error`` uses for ``code``."""
    return _BY_CODE.get(code, MQBrokerError)


# rocketpy.remoting imports the classes above, so its codes are imported after them.
from rocketpy.remoting.codes import ResponseCode as _RC  # noqa: E402


class BrokerSystemError(MQBrokerError):
    """SYSTEM_ERROR: the server failed to handle the request (another broker may not)."""

    response_code, retriable = _RC.SYSTEM_ERROR, True


class SystemBusyError(MQBrokerError):
    """SYSTEM_BUSY: the broker sheds load (queue wait or page cache busy); another may take it."""

    response_code, retriable = _RC.SYSTEM_BUSY, True


class RequestCodeNotSupportedError(MQBrokerError):
    """REQUEST_CODE_NOT_SUPPORTED: the server does not serve this request code."""

    response_code = _RC.REQUEST_CODE_NOT_SUPPORTED


class TransactionFailedError(MQBrokerError):
    """TRANSACTION_FAILED."""

    response_code = _RC.TRANSACTION_FAILED


class FlushDiskTimeoutError(MQBrokerError):
    """FLUSH_DISK_TIMEOUT: stored, but not flushed in time (a send maps it to a SendStatus)."""

    response_code = _RC.FLUSH_DISK_TIMEOUT


class SlaveNotAvailableError(MQBrokerError):
    """SLAVE_NOT_AVAILABLE: stored, but no slave to replicate to (a send maps it to a SendStatus)."""

    response_code = _RC.SLAVE_NOT_AVAILABLE


class FlushSlaveTimeoutError(MQBrokerError):
    """FLUSH_SLAVE_TIMEOUT: stored, but not replicated in time (a send maps it to a SendStatus)."""

    response_code = _RC.FLUSH_SLAVE_TIMEOUT


class MessageIllegalError(MQBrokerError):
    """MESSAGE_ILLEGAL: the message breaks a broker limit (size, properties, topic)."""

    response_code = _RC.MESSAGE_ILLEGAL


class ServiceNotAvailableError(MQBrokerError):
    """SERVICE_NOT_AVAILABLE: the broker cannot write now (slave, shutting down, store not writable)."""

    response_code, retriable = _RC.SERVICE_NOT_AVAILABLE, True


class VersionNotSupportedError(MQBrokerError):
    """VERSION_NOT_SUPPORTED."""

    response_code = _RC.VERSION_NOT_SUPPORTED


class NoPermissionError(MQBrokerError):
    """NO_PERMISSION: the broker or topic refuses writes (or reads); another broker may accept."""

    response_code, retriable = _RC.NO_PERMISSION, True


class AccessDeniedError(NoPermissionError):
    """NO_PERMISSION from the ACL: no or unknown account, bad signature, or a missing permission.

    Not retriable: every broker of a cluster shares the rules; fix the credentials or the ACL file.
    """

    retriable = False


class TopicNotExistError(MQBrokerError):
    """TOPIC_NOT_EXIST: this broker lacks the topic; another broker of the route may have it."""

    response_code, retriable = _RC.TOPIC_NOT_EXIST, True


class TopicExistAlreadyError(MQBrokerError):
    """TOPIC_EXIST_ALREADY."""

    response_code = _RC.TOPIC_EXIST_ALREADY


class PullNotFoundError(MQBrokerError):
    """PULL_NOT_FOUND where a pull status is not expected."""

    response_code = _RC.PULL_NOT_FOUND


class PullRetryImmediatelyError(MQBrokerError):
    """PULL_RETRY_IMMEDIATELY where a pull status is not expected."""

    response_code = _RC.PULL_RETRY_IMMEDIATELY


class PullOffsetMovedError(MQBrokerError):
    """PULL_OFFSET_MOVED where a pull status is not expected."""

    response_code = _RC.PULL_OFFSET_MOVED


class QueryNotFoundError(MQBrokerError):
    """QUERY_NOT_FOUND: nothing matched the query (message, offset)."""

    response_code = _RC.QUERY_NOT_FOUND


class SubscriptionParseFailedError(MQBrokerError):
    """SUBSCRIPTION_PARSE_FAILED: the tag or SQL expression does not parse."""

    response_code = _RC.SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExistError(MQBrokerError):
    """SUBSCRIPTION_NOT_EXIST: the broker has no subscription of the group for the topic."""

    response_code = _RC.SUBSCRIPTION_NOT_EXIST


class SubscriptionNotLatestError(MQBrokerError):
    """SUBSCRIPTION_NOT_LATEST: the broker holds a newer subscription version."""

    response_code = _RC.SUBSCRIPTION_NOT_LATEST


class SubscriptionGroupNotExistError(MQBrokerError):
    """SUBSCRIPTION_GROUP_NOT_EXIST: the consumer group is unknown and not auto-created."""

    response_code = _RC.SUBSCRIPTION_GROUP_NOT_EXIST


class FilterDataNotExistError(MQBrokerError):
    """FILTER_DATA_NOT_EXIST."""

    response_code = _RC.FILTER_DATA_NOT_EXIST


class FilterDataNotLatestError(MQBrokerError):
    """FILTER_DATA_NOT_LATEST."""

    response_code = _RC.FILTER_DATA_NOT_LATEST


class InvalidParameterError(MQBrokerError):
    """INVALID_PARAMETER: a request field is missing or out of range."""

    response_code = _RC.INVALID_PARAMETER


class TransactionShouldCommitError(MQBrokerError):
    """TRANSACTION_SHOULD_COMMIT."""

    response_code = _RC.TRANSACTION_SHOULD_COMMIT


class TransactionShouldRollbackError(MQBrokerError):
    """TRANSACTION_SHOULD_ROLLBACK."""

    response_code = _RC.TRANSACTION_SHOULD_ROLLBACK


class TransactionStateUnknownError(MQBrokerError):
    """TRANSACTION_STATE_UNKNOW."""

    response_code = _RC.TRANSACTION_STATE_UNKNOW


class TransactionStateGroupWrongError(MQBrokerError):
    """TRANSACTION_STATE_GROUP_WRONG."""

    response_code = _RC.TRANSACTION_STATE_GROUP_WRONG


class NoBuyerIdError(MQBrokerError):
    """NO_BUYER_ID (RocketMQ unit routing); retried on another broker."""

    response_code, retriable = _RC.NO_BUYER_ID, True


class NotInCurrentUnitError(MQBrokerError):
    """NOT_IN_CURRENT_UNIT (RocketMQ unit routing); retried on another broker."""

    response_code, retriable = _RC.NOT_IN_CURRENT_UNIT, True


class ConsumerNotOnlineError(MQBrokerError):
    """CONSUMER_NOT_ONLINE: the client asked about is not connected."""

    response_code = _RC.CONSUMER_NOT_ONLINE


class ConsumeMsgTimeoutError(MQBrokerError):
    """CONSUME_MSG_TIMEOUT: the client did not answer a direct consume in time."""

    response_code = _RC.CONSUME_MSG_TIMEOUT


class NoMessageError(MQBrokerError):
    """NO_MESSAGE."""

    response_code = _RC.NO_MESSAGE


class FlowControlError(MQBrokerError):
    """FLOW_CONTROL."""

    response_code = _RC.FLOW_CONTROL


class GoAwayError(MQBrokerError):
    """GO_AWAY: the broker is leaving; another broker may take the request."""

    response_code, retriable = _RC.GO_AWAY, True
