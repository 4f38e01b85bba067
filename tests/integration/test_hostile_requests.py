"""Every request code both daemons serve, with random header fields and bodies: a clear answer, never
a traceback (docs/operations.md "Hostile traffic").

A handler that raises something other than ``HeaderError`` answers SYSTEM_ERROR with the remark
"<owner> failed: <exception>" and logs a traceback; both count as failures here, as does any
traceback in either daemon's log (``DaemonPool`` checks stderr at teardown, this test checks the
log file too, so the failing input is shown).
"""

from __future__ import annotations

import random
from pathlib import Path

from rocketpy.protocol.codes import ResponseCode, code_name
from rocketpy.remoting.client import RemotingClient
from rocketpy.remoting.codec import FrameDecoder
from rocketpy.remoting.command import RemotingCommand
from tests.conftest import DaemonPool
from tests.daemons import Daemon
from tests.hostile_frames import REQUEST_CODES, malformed_request

TIMEOUT_S = 10.0
REQUESTS_PER_CODE = 60


def _unexpected(response: RemotingCommand) -> bool:
    """SYSTEM_ERROR from a handler that raised (the processor table's "<owner> failed: ..." remark)."""
    return response.code == ResponseCode.SYSTEM_ERROR and " failed: " in (response.remark or "")


def _log_tracebacks(daemon: Daemon) -> str:
    text = "".join(p.read_text(errors="replace") for p in Path(daemon.workdir, "logs").glob("*.log"))
    return text if "Traceback (most recent call last)" in text else ""


async def _fuzz_daemon(addr: str, seed: int) -> list[str]:
    """Send REQUESTS_PER_CODE random requests of every code; return the unexpected answers."""
    rng = random.Random(seed)
    client = RemotingClient(name="fuzz")
    problems: list[str] = []
    try:
        for code in REQUEST_CODES:
            for _ in range(REQUESTS_PER_CODE):
                frame = malformed_request(rng, code)
                (request,) = FrameDecoder().feed(frame)
                request.opaque = 0
                response = await client.invoke(addr, request, TIMEOUT_S)
                if _unexpected(response):
                    problems.append(f"{code_name(code)} ext={request.ext!r:.200} -> {response.remark}")
    finally:
        await client.close()
    return problems


async def test_random_requests_of_every_code_get_clear_answers(daemons: DaemonPool) -> None:
    namesrv = daemons.namesrv()
    broker = daemons.broker(namesrv.addr)
    problems = await _fuzz_daemon(namesrv.addr, 1) + await _fuzz_daemon(broker.addr, 2)
    assert not problems, "\n".join(problems[:30])
    for daemon in (namesrv, broker):
        assert not _log_tracebacks(daemon), _log_tracebacks(daemon)[-6000:]
        assert daemon.returncode is None
