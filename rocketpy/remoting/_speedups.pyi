"""The frame codec's compiled twins (``_speedups.pyx``), as mypy sees them.

Each signature is its pure twin's in ``codec.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``codec.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from rocketpy.remoting.codec import FrameDecoder
from rocketpy.remoting.command import RemotingCommand

__all__ = ["assemble_body", "encode_frame", "split_frames"]

def assemble_body(decoder: FrameDecoder, data: bytes | bytearray | memoryview) -> int: ...
def encode_frame(cmd: RemotingCommand) -> list[bytes | memoryview]: ...
def split_frames(
    decoder: FrameDecoder, src: bytes | bytearray | memoryview, max_frames: int = ...
) -> tuple[list[RemotingCommand], int]: ...
