"""The one place that chooses the compiled core or its pure-Python twin (at import time).

``rocketpy._speedups`` (Cython, built by ``pip install``) holds C versions of the byte-layout hot
loops; the pure-Python versions stay in their modules and are the reference. Each pure function is
wrapped with ``twin``: its module-level name then refers to the compiled function of the same name
when the compiled core is active, else to itself. Set ``ROCKETPY_NO_EXTENSIONS=1`` (before the
first ``import rocketpy``) to force the pure twins; a missing or unloadable extension falls back to
them too, and ``LOAD_ERROR`` says why.

Attributes:
    ACTIVE: ``"compiled"`` or ``"pure"`` — what this process runs.
    LABEL: the words the boot lines and ``rocketpy --version`` print: ``compiled core`` / ``pure Python``.
    PURE: every twinned pure function by name (tests compare them with ``speedups``'s).
    speedups: the compiled module, or None.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

#: Environment variable that forces the pure-Python twins when set to ``1`` (or true/yes/on).
NO_EXTENSIONS_ENV = "ROCKETPY_NO_EXTENSIONS"

F = TypeVar("F", bound=Callable[..., Any])


def extensions_disabled(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """True when ``ROCKETPY_NO_EXTENSIONS`` asks for the pure-Python twins."""
    return environ.get(NO_EXTENSIONS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _load() -> tuple[ModuleType | None, str]:
    if extensions_disabled():
        return None, f"{NO_EXTENSIONS_ENV} is set"
    try:
        from rocketpy import _speedups  # type: ignore[attr-defined]
    except ImportError as exc:  # not built (e.g. a source tree without a compiler run)
        return None, f"rocketpy._speedups is not importable: {exc}"
    return _speedups, ""


speedups, LOAD_ERROR = _load()
ACTIVE = "compiled" if speedups is not None else "pure"
LABEL = "compiled core" if speedups is not None else "pure Python"
PURE: dict[str, Callable[..., Any]] = {}


def twin(pure: F) -> F:
    """The function to call for ``pure``: its compiled twin (same name) when active, else ``pure``."""
    PURE[pure.__name__] = pure
    if speedups is None:
        return pure
    compiled: F = getattr(speedups, pure.__name__)
    return compiled
