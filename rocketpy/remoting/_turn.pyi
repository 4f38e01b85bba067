"""Stub of the compiled ``rocketpy.remoting._turn`` (twin of ``rocketpy/remoting/turn.py``)."""

from rocketpy.remoting.connection import Channel

__all__ = ["receive", "serve_turn"]

def serve_turn(channel: Channel, data: bytes | bytearray | memoryview) -> None: ...
def receive(channel: Channel, data: bytes | bytearray | memoryview) -> None: ...
