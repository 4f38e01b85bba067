"""The exceptions users see.

``RocketpyError`` is the root; ``MQClientError`` is raised for mistakes and conditions on the
client side (bad argument, no route, timeout, connection lost); ``MQBrokerError`` carries a
broker's response code and remark. Messages always say what to do next.
"""

from __future__ import annotations


class RocketpyError(Exception):
    """Base class of every rocketpy error."""


class MQClientError(RocketpyError):
    """A client-side error: bad argument, no route, timeout, lost connection."""


class RemotingTimeoutError(MQClientError):
    """A request got no response within its timeout."""


class RemotingConnectError(MQClientError):
    """A connection could not be made, or broke while a request was in flight."""


class MQBrokerError(RocketpyError):
    """An error response from a broker or NameServer.

    Attributes:
        code: the RocketMQ ResponseCode number.
        remark: the server's human-readable reason.
    """

    def __init__(self, code: int, remark: str | None, addr: str | None = None) -> None:
        from rocketpy.remoting.codes import response_name

        self.code = int(code)
        self.remark = remark or ""
        self.addr = addr
        where = f" from {addr}" if addr else ""
        super().__init__(f"{response_name(self.code)}{where}: {self.remark}")


class ConfigError(RocketpyError):
    """A bad configuration file or option; the message is the one line to print."""


class RemotingBindError(RocketpyError, OSError):
    """A server could not listen on its address (port in use, bad host, no permission)."""
