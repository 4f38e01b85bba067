"""The request header check's compiled twin (``_speedups.pyx``), as mypy sees it.

Its signature is its pure twin's in ``shape.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``shape.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from collections.abc import Mapping
from typing import Any

__all__ = ["check_ext"]

def check_ext(ext: Mapping[Any, Any] | None) -> None: ...
