"""ABBA order for the on/off benchmarks (``bench_acl.py``, ``bench_metrics.py``), and the check
that a ``--base`` checkout runs the same core as this one (``same_core``).

On this machine the second run of a back-to-back pair is often slower and throughput drifts between
runs, so every round runs each phase four times, both sides in both places: A, B, B, A, then the next
round B, A, A, B. A round's ratio is its two runs of one side over its two runs of the other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def abba(round_no: int, a: T, b: T) -> tuple[T, T, T, T]:
    """The order of one round's four runs: A, B, B, A in even rounds, B, A, A, B in odd ones."""
    first, second = (a, b) if round_no % 2 == 0 else (b, a)
    return first, second, second, first


def round_ratios(on: list[float], off: list[float]) -> list[float]:
    """Each round's ratio from each side's figures in run order (two per round): its two runs on
    over its two runs off, 0.0 when the off runs measured nothing."""
    ratios = []
    for i in range(0, len(off), 2):
        base = off[i] + off[i + 1]
        ratios.append((on[i] + on[i + 1]) / base if base else 0.0)
    return ratios


def _active_core(tree: Path) -> tuple[str, str]:
    """The core the daemons run from checkout ``tree`` would load (``compiled`` or ``pure``), and why
    not the compiled one."""
    code = "import rocketpy._accel as a; print(a.ACTIVE); print(a.LOAD_ERROR)"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, timeout=60
    )
    active, _, why = out.stdout.strip().partition("\n")
    return (active, why) if active else ("unimportable", out.stderr.strip()[-300:])


def same_core(this: Path, base: Path) -> None:
    """Exit with a message unless ``base`` loads the same core (compiled or pure) as ``this``: a
    base whose compiled modules are not built runs pure Python, and an A/B against it measures the
    compiled core, not the change."""
    (mine, _), (theirs, why) = _active_core(this), _active_core(base)
    if mine != theirs:
        sys.exit(
            f"--base {base} runs the {theirs} core ({why}), this tree the {mine} one: build it first "
            f"(cd {base} && {sys.executable} setup.py build_ext --inplace)"
        )
