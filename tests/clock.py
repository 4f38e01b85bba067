"""A clock tests set by hand, for services that take an injectable ``clock`` (seconds)."""

from __future__ import annotations

#: Where every ManualClock starts (a fixed, realistic epoch second).
T0 = 1_700_000_000.0


class ManualClock:
    """Returns ``t``; tests move time by assigning it."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
