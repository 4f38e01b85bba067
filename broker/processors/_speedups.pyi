"""The send processor's compiled twin (``_speedups.pyx``), as mypy sees it.

Its signature is its pure twin's in ``send.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of ``send.py``) and against the built module by
``stubtest`` (``scripts/check``).
"""

from rocketpy.broker.store import BrokerMessage

__all__ = ["batch_messages"]

def batch_messages(
    items: list[tuple[bytes, int, str]],
    topic: str,
    queue_id: int,
    sys_flag: int,
    born_ts: int,
    born: tuple[str, int],
    reconsume: int,
    max_body: int,
    short_props: int,
) -> tuple[list[BrokerMessage], str, list[int]]: ...
