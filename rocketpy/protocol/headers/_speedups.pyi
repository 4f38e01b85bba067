"""The SEND_MESSAGE_V2 header's compiled twin (``_speedups.pyx``), as mypy sees it.

Its signature is its pure twin's in ``send.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``send.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from typing import Any

from rocketpy.protocol.headers.send import SendMessageRequestHeader

__all__ = ["read_typical_v2"]

def read_typical_v2(h: SendMessageRequestHeader, ext: dict[str, Any]) -> bool: ...
