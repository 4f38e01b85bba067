"""The compiled twins of ``_speedups.pyx`` (the request header and body checks, a POP answer's offset lists),
as mypy sees them.

Their signatures are their pure twins' in ``shape.py`` and ``receipt.py``, checked both ways by
mypy (``rocketpy._accel.same_signature``, at the end of each) and against the built module by
``stubtest`` (``scripts/check``).
"""

from collections.abc import Mapping
from typing import Any

__all__ = ["check_doc", "check_ext", "format_msg_offsets", "format_start_offsets"]

def check_ext(ext: Mapping[Any, Any] | None) -> None: ...
def check_doc(doc: Any, what: str) -> None: ...
def format_start_offsets(entries: list[tuple[str, int, int]]) -> str: ...
def format_msg_offsets(entries: list[tuple[str, int, list[int]]]) -> str: ...
