"""Large bodies compressed off the loop (``client/deflate.py``): both twins of ``start_deflate``
settle their future with ``zlib.compress``'s bytes (the compiled one from its C thread), under
asyncio's loop and uvloop, many at once, on two loops in two threads at once; a bad level fails
with zlib's error; a send cancelled meanwhile leaves nothing behind."""

from __future__ import annotations

import asyncio
import os
import threading
import zlib
from typing import Any

import pytest
import uvloop

from rocketpy import _accel
from rocketpy.client.deflate import deflate

try:
    compiled: Any = _accel.load_compiled()
except ImportError:  # pragma: no cover - a tree where pip install did not build it
    compiled = None

TWINS = [pytest.param(_accel.PURE["start_deflate"], id="pure")]
if compiled is not None:
    TWINS.append(pytest.param(compiled["start_deflate"], id="compiled"))

BODIES = [os.urandom(3000) + b"trace record \x01 " * (5000 * k) for k in range(1, 12)]


async def _all(start: Any, level: int) -> list[Any]:
    loop = asyncio.get_running_loop()
    futures = []
    for body in BODIES:
        done = loop.create_future()
        start(loop, body, level, done)
        futures.append(done)
    return await asyncio.gather(*futures, return_exceptions=True)


@pytest.mark.parametrize("start", TWINS)
@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_bodies_compress_as_zlib_does(start: Any, run: Any) -> None:
    for level in (-1, 0, 1, 6, 9):
        assert run(_all(start, level)) == [zlib.compress(b, level) for b in BODIES]
    bad = run(_all(start, 10))
    assert all(isinstance(r, zlib.error) for r in bad), bad[:2]


@pytest.mark.parametrize("start", TWINS)
def test_two_loops_in_two_threads(start: Any) -> None:
    results: dict[int, list[Any]] = {}

    def worker(i: int) -> None:
        results[i] = uvloop.run(_all(start, 1))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    expected = [zlib.compress(b, 1) for b in BODIES]
    assert results == {0: expected, 1: expected}


@pytest.mark.parametrize("start", TWINS)
def test_a_cancelled_send_leaves_the_rest_settled(start: Any) -> None:
    async def main() -> list[bytes]:
        loop = asyncio.get_running_loop()
        first = loop.create_future()
        start(loop, BODIES[-1], 1, first)
        first.cancel()  # its send gave up: the compression finishes and is dropped
        return [await deflate(b, 1) for b in BODIES[:3]]

    assert uvloop.run(main()) == [zlib.compress(b, 1) for b in BODIES[:3]]
