"""Finding messages by key while they wait for their delivery time.

Owns ``find_waiting``: a waiting message is indexed under its waiting topic (``SCHEDULE_TOPIC_XXXX``
or the timer topic), so a key query of the real topic that finds nothing looks there too and
keeps the records whose ``REAL_TOPIC`` is the topic asked for.
"""

from __future__ import annotations

from rocketpy.broker.store import QueryMessageResult, Store
from rocketpy.broker.timer.service import TIMER_TOPIC
from rocketpy.broker.topic_config import SCHEDULE_TOPIC
from rocketpy.message_props import REAL_TOPIC_SEP, get_property
from rocketpy.record import HEAD_SIZE, POS_BODY_LEN, U32


def find_waiting(
    store: Store, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
) -> QueryMessageResult:
    """Records waiting in the schedule or timer topic for delivery to ``topic`` with ``key``."""
    out = QueryMessageResult()
    for waiting_topic in (SCHEDULE_TOPIC, TIMER_TOPIC):
        found = store.query_message(waiting_topic, key, max_num - len(out.buffers), begin_ts, end_ts)
        out.index_last_update_timestamp = found.index_last_update_timestamp
        out.index_last_update_phyoffset = found.index_last_update_phyoffset
        out.buffers += [b for b in found.buffers if _real_topic(b) == topic]
        if len(out.buffers) >= max_num:
            break
    return out


def _real_topic(record: bytes) -> str | None:
    t = HEAD_SIZE + U32.unpack_from(record, POS_BODY_LEN)[0]
    props = record[t + 3 + record[t] :].decode(errors="replace")
    return get_property(props, REAL_TOPIC_SEP)
