"""The index's bulk entry writer (``_indexkeys.pyx``), as mypy sees it.

Its signature is its pure twin's (``index.py``), checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``index.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from mmap import mmap

__all__ = ["put_key_entries"]

def put_key_entries(
    mm: mmap | bytearray,
    props: str,
    topic_hash: int,
    phys: int,
    time_diff: int,
    count: int,
    slots: int,
    entries_pos: int,
    room: int,
) -> int: ...
