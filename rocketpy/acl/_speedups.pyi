"""The ACL signature's compiled twins (``_speedups.pyx``), as mypy sees them.

Each signature is its pure twin's in ``signing.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``signing.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from collections.abc import Mapping
from typing import Any

from rocketpy.acl.signing import HmacKey
from rocketpy.remoting.command import Body

__all__ = ["hmac_signature", "signed_ext"]

def signed_ext(ext: Mapping[str, Any] | None) -> bytes: ...
def hmac_signature(key: HmacKey, ext: Mapping[str, Any] | None, body: Body) -> str: ...
