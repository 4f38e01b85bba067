"""The waiting POPs' table listens to the store's dispatches only while a POP or a NOTIFICATION waits."""

from __future__ import annotations

import asyncio
from typing import Any

from rocketpy.broker.pop.polling import PopWaiters
from tests.unit.test_broker_long_polling import Listening


async def test_listens_to_dispatches_only_while_someone_waits() -> None:
    waiters = PopWaiters(per_key_max=8, total_max=8)
    listening = Listening()
    waiters.listen_with(listening)
    assert listening.fns == []
    first = asyncio.ensure_future(waiters.wait(("G", "T", 0), ("T", "%RETRY%G"), None, 10))
    second = asyncio.ensure_future(waiters.wait(("G", "T", -1), ("T",), None, 0.01))
    await asyncio.sleep(0)
    assert waiters.count == 2 and listening.fns == [waiters.notify]
    assert await second is False  # expired; the first still waits
    assert listening.fns == [waiters.notify]
    waiters.notify("T", 0)
    assert await first is True
    assert waiters.count == 0 and listening.fns == []


async def test_a_listener_that_stops_listening_inside_its_call_does_not_skip_the_next() -> None:
    from rocketpy.broker.store.dispatch import Dispatcher

    d: Any = Dispatcher.__new__(Dispatcher)  # only the listener table is used here
    d.listeners = ()
    seen: list[str] = []

    def once(*_a: Any) -> None:
        seen.append("once")
        d.listen(once, False)

    def every(*_a: Any) -> None:
        seen.append("every")

    d.listen(once)
    d.listen(every)
    d.listen(every)  # already listening: no second call
    assert d.listeners == (once, every)
    cq = type("Q", (), {"topic": "T", "queue_id": 0})()
    d.notify(cq, 0, 0, 0)
    d.notify(cq, 1, 0, 0)
    assert seen == ["once", "every", "every"]
    d.listen(every, False)
    d.listen(every, False)
    assert d.listeners == ()
