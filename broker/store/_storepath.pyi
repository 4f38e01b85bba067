"""The store's request-path calls, compiled (``_storepath.pyx``), as mypy sees them.

Their signatures are their pure twins' in ``put.py`` and ``reads.py``, checked both ways by mypy
(``rocketpy._accel.same_signature``, at the end of each) and against the built module by
``stubtest`` (``scripts/check``).
"""

from rocketpy.broker.store.commitlog import CommitLog
from rocketpy.broker.store.consume_queue import ConsumeQueue
from rocketpy.broker.store.message import BrokerMessage
from rocketpy.broker.store.put import PutService
from rocketpy.broker.store.results import GetMessageResult, PutMessageResult

__all__ = ["get_now", "put_now"]

def get_now(
    cl: CommitLog, cq: ConsumeQueue | None, offset: int, max_msgs: int, max_bytes: int
) -> GetMessageResult | None: ...
def put_now(service: PutService, msgs: list[BrokerMessage]) -> PutMessageResult | None: ...
