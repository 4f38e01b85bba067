"""Stub of the compiled ``rocketpy.remoting._turn`` (twin of ``rocketpy/remoting/turn.py`` and of
``start_call`` in ``rocketpy/remoting/calls.py``)."""

import asyncio

from rocketpy.remoting.calls import CallsMixin
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.connection import Channel

__all__ = ["flush_later", "receive", "serve_turn", "start_call"]

def serve_turn(channel: Channel, data: bytes | bytearray | memoryview) -> None: ...
def receive(channel: Channel, data: bytes | bytearray | memoryview) -> None: ...
def start_call(
    channel: CallsMixin, cmd: RemotingCommand, timeout: float
) -> asyncio.Future[RemotingCommand]: ...
def flush_later(channel: Channel) -> None: ...
