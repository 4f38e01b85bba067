"""ABBA order for the on/off benchmarks (``bench_acl.py``, ``bench_metrics.py``).

On this machine the second run of a back-to-back pair is often slower and throughput drifts between
runs, so every round runs each phase four times, both sides in both places: A, B, B, A, then the next
round B, A, A, B. A round's ratio is its two runs of one side over its two runs of the other.
"""

from __future__ import annotations

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
