"""CPU pinning for the benchmarks: the measured process on a CPU of its own, the load on the others.

On a machine with few cores, a benchmark's load generator and the process it measures share the
cores, and the measured CPU per request then includes caches refilled after the other process ran:
a figure of the machine as much as of the code. Pinned, each has its own core, as on a host with
cores to spare (issue 31's figures on the 16-core host were taken so).
"""

from __future__ import annotations

import os


def split_cpus() -> tuple[int, set[int]] | None:
    """One CPU for the measured process and the others for the rest (None: fewer than 2 CPUs)."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    return allowed[-1], set(allowed[:-1])


def pin_process(pid: int, cpus: set[int]) -> None:
    """Every thread of process ``pid`` on ``cpus`` (threads it starts later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # the thread ended meanwhile
            pass
