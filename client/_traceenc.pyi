"""Message trace's record encoders (``_traceenc.pyx``), as mypy sees them.

Their signatures are their pure twins' (``client/trace.py``), checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``trace.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from typing import Any

from rocketpy.client.trace import _Encoded

__all__ = ["_encode_after", "_encode_before", "_encode_pub"]

def _encode_pub(what: tuple[Any, ...], out: _Encoded) -> None: ...
def _encode_before(what: tuple[Any, ...], out: _Encoded) -> None: ...
def _encode_after(what: tuple[Any, ...], out: _Encoded) -> None: ...
