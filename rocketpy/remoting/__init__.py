"""The RPC layer: frames, commands, codes, server and client (DESIGN §2).

Public names are re-exported here: ``RemotingCommand``, ``RemotingServer``, ``RemotingClient``,
``Channel``, ``RequestCode``, ``ResponseCode``, the frame codec and the ext-field helpers.
"""

from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.codec import FrameDecoder, FrameError, encode_frame, register_header_codec
from rocketpy.remoting.codes import RequestCode, ResponseCode, code_name, response_name
from rocketpy.remoting.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_JSON,
    SERIALIZE_MSGPACK,
    RemotingCommand,
)
from rocketpy.remoting.connection import Channel
from rocketpy.remoting.headers import HeaderError, ext_bool, ext_int, ext_opt_int, ext_opt_str, ext_str
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
    "HeaderError",
    "ProcessorTable",
    "RemotingClient",
    "RemotingCommand",
    "RemotingServer",
    "RequestCode",
    "ResponseCode",
    "code_name",
    "encode_frame",
    "ext_bool",
    "ext_int",
    "ext_opt_int",
    "ext_opt_str",
    "ext_str",
    "register_header_codec",
    "response_name",
]
