"""The RPC layer: frames, commands, server and client (DESIGN §2).

Public names are re-exported here: ``RemotingCommand``, ``RemotingServer``, ``RemotingClient``,
``Channel`` and the frame codec. Codes, headers and ext-field reads are the protocol's
(``rocketpy.protocol``), imported from there.
"""

from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.codec import FrameDecoder, FrameError, encode_frame, register_header_codec
from rocketpy.remoting.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_JSON,
    SERIALIZE_MSGPACK,
    RemotingCommand,
)
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.processor import Handler, ProcessorTable
from rocketpy.remoting.server import RemotingServer

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "SERIALIZE_JSON",
    "SERIALIZE_MSGPACK",
    "Channel",
    "FrameDecoder",
    "FrameError",
    "Handler",
    "ProcessorTable",
    "RemotingClient",
    "RemotingCommand",
    "RemotingServer",
    "encode_frame",
    "register_header_codec",
]
