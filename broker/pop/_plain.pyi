"""A plain pop's compiled read (``_plain.pyx``), as mypy sees it.

The signature is its pure twin's in ``plain.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at its end) and against the built module by ``stubtest``
(``scripts/check``).
"""

from rocketpy.broker.pop.reader import PopRead, PopReader
from rocketpy.broker.pop.types import PopRequest

__all__ = ["read_plain"]

def read_plain(reader: PopReader, req: PopRequest, out: PopRead) -> None: ...
