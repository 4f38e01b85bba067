"""zlib compression of large message bodies off the event loop.

A body of ``COMPRESS_IN_THREAD_BYTES`` or more is not compressed on the loop (zlib takes a
millisecond or more for it): ``deflate`` hands it to ``start_deflate`` and awaits the result.
The pure twin runs ``zlib.compress`` in the loop's default executor. A Python worker thread takes
the GIL twice a body, each time waiting up to the interpreter's switch interval (5 ms) while the
loop is busy, and a busy loop sending a few hundred large bodies a second (a traced consumer's
trace messages, ``client/trace.py``) fell behind on them; the compiled twin (``client/_speedups.pyx``)
queues the body to a C thread that never takes the GIL and announces each finished body on a pipe
the loop reads.
"""

from __future__ import annotations

import asyncio
import functools
import zlib
from typing import TYPE_CHECKING

from rocketpy._accel import twin

#: Bodies at least this large are compressed in a worker thread instead of on the loop.
COMPRESS_IN_THREAD_BYTES = 64 * 1024


async def deflate(body: bytes, level: int) -> bytes:
    """``zlib.compress(body, level)``, made off the loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()
    start_deflate(loop, body, level, done)
    return await done


def _settle(done: asyncio.Future[bytes], work: asyncio.Future[bytes]) -> None:
    if done.done():  # (the send was cancelled meanwhile)
        return
    if work.cancelled():
        done.cancel()
    elif (exc := work.exception()) is not None:
        done.set_exception(exc)
    else:
        done.set_result(work.result())


@twin
def start_deflate(
    loop: asyncio.AbstractEventLoop, body: bytes, level: int, done: asyncio.Future[bytes]
) -> None:
    """Start ``zlib.compress(body, level)`` off ``loop``; ``done`` gets the result (or zlib's error)
    on ``loop``."""
    work = loop.run_in_executor(None, zlib.compress, body, level)
    work.add_done_callback(functools.partial(_settle, done))


if TYPE_CHECKING:  # the compiled twin as its stub declares it: the same signature, both ways
    from rocketpy._accel import same_signature
    from rocketpy.client import _speedups

    same_signature(start_deflate)(_speedups.start_deflate)
    same_signature(_speedups.start_deflate)(start_deflate)
