"""The one place that chooses the compiled core or its pure-Python twins (at import time).

The compiled core is one Cython module per package that owns byte-layout hot loops, each named
``_speedups`` and placed beside the pure-Python modules it twins (``MODULES``). The pure functions
stay in their modules and are the reference. Each is wrapped with ``twin``: its module-level name
then refers to the compiled function of the same name when the compiled core is active, else to
itself. Set ``ROCKETPY_NO_EXTENSIONS=1`` (before the first ``import rocketpy``) to force the pure
twins. The choice is all or nothing: when one compiled module is missing or does not load, every
function is pure and ``LOAD_ERROR`` names that module.

The compiled modules are loaded here, from their files, before any pure module calls ``twin``, and
without running their packages' ``__init__`` (``rocketpy.broker.store``'s imports the store, whose
modules call ``twin``; a client process needs none of it). Each is registered in ``sys.modules``
under its full name: ``importlib.import_module(name)`` and ``from package import _speedups`` find
it there. A compiled module reads what it needs from its own package, or from packages below it,
the first time one of its functions runs.

Each compiled module has a stub, ``_speedups.pyi``; a twin's three signatures (pure, stub, compiled)
are kept the same:

- stub and pure twin: every module that declares twins ends with an ``if TYPE_CHECKING`` block
  calling ``same_signature(pure)(compiled)`` and ``same_signature(compiled)(pure)``; mypy
  (``scripts/check``) rejects a stub whose function differs from the pure one in a parameter's
  name, kind, type or default, or in its return type;
- stub and built module: ``scripts/check`` runs mypy's ``stubtest`` on ``MODULES``, which rejects
  a stub whose parameter names, kinds or defaults, or ``__all__``, differ from the compiled ones.

``tests/unit/test_speedups.py`` compares the pure and compiled functions' run-time signatures too.

Attributes:
    MODULES: the compiled modules by import name, each after the ones it cimports from.
    ACTIVE: ``"compiled"`` (every module of ``MODULES`` loaded) or ``"pure"`` — what this process runs.
    LABEL: the words the boot lines and ``rocketpy --version`` print: ``compiled core`` / ``pure Python``.
    LOAD_ERROR: why the process runs pure ("" when compiled).
    PURE: every twinned pure function by name (tests compare them with the compiled ones).
    COMPILED: every compiled function by name when the compiled core is active, else empty.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar, cast

#: Environment variable that forces the pure-Python twins when set to ``1`` (or true/yes/on).
NO_EXTENSIONS_ENV = "ROCKETPY_NO_EXTENSIONS"

MODULES = (
    "rocketpy._speedups",  # the record layout, the batch encoding, properties, record columns
    "rocketpy.remoting._speedups",  # the frame codec
    "rocketpy.protocol._speedups",  # the request header check
    "rocketpy.protocol.headers._speedups",  # the SEND_MESSAGE_V2 header
    "rocketpy.acl._speedups",  # the ACL signature
    "rocketpy.broker.store._speedups",  # commitlog append, recovery read and dispatch, index entry
    "rocketpy.broker.store._storepath",  # the store's coroutine-free put, its one-view read
    "rocketpy.broker.processors._speedups",  # the send processor's batch helper
    "rocketpy.client._speedups",  # the producer's awaited send: first attempt, batch body, results
    "rocketpy.broker.pop._speedups",  # POP's batch-ack reading, ledger runs and ACKS entries
    "rocketpy.broker.processors._sendrun",  # the send run's fast path: plain messages, answers
    "rocketpy.remoting._turn",  # the channel's read turn: decode, dispatch, answer, one write
    "rocketpy.broker.store._indexkeys",  # the index entries of a message with keys, in one call
    "rocketpy.broker.pop._plain",  # a plain pop's read of its topic
    "rocketpy.client._traceenc",  # message trace's record encoders (Pub, SubBefore, SubAfter)
    "rocketpy.broker.processors._pullpath",  # a pull answered at once, in one call
    "rocketpy.broker.processors._poppath",  # a plain pop answered at once, in one call
)

F = TypeVar("F", bound=Callable[..., Any])


def extensions_disabled(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """True when ``ROCKETPY_NO_EXTENSIONS`` asks for the pure-Python twins."""
    return environ.get(NO_EXTENSIONS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def load_compiled() -> dict[str, Callable[..., Any]]:
    """Every compiled function by name, from every module of ``MODULES``, whatever
    ``ROCKETPY_NO_EXTENSIONS`` says (the twin tests and benchmarks call both twins).

    Raises:
        ImportError: a module is not built or does not load; the message names it.
    """
    functions: dict[str, Callable[..., Any]] = {}
    for name in MODULES:
        try:
            module = _import_compiled(name)
        except ImportError as exc:
            raise ImportError(f"{name} is not importable: {exc}") from exc
        for attr in module.__all__:
            assert attr not in functions, f"two compiled modules define {attr}"
            functions[attr] = getattr(module, attr)
    return functions


def _import_compiled(name: str) -> ModuleType:
    """The compiled module ``name``, loaded from its file without importing its package."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    directory = os.path.join(os.path.dirname(__file__), *name.split(".")[1:-1])
    spec = importlib.machinery.PathFinder.find_spec(name, [directory])
    if spec is None or spec.loader is None:
        raise ImportError(f"not built (no extension module in {directory})")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _load() -> tuple[dict[str, Callable[..., Any]], str]:
    if extensions_disabled():
        return {}, f"{NO_EXTENSIONS_ENV} is set"
    try:
        return load_compiled(), ""
    except ImportError as exc:  # not built (e.g. a source tree without a compiler run), or stale
        return {}, str(exc)


COMPILED, LOAD_ERROR = _load()
ACTIVE = "compiled" if COMPILED else "pure"
LABEL = "compiled core" if COMPILED else "pure Python"
PURE: dict[str, Callable[..., Any]] = {}


def twin(pure: F) -> F:
    """The function to call for ``pure``: its compiled twin (same name) when active, else ``pure``."""
    PURE[pure.__name__] = pure
    if not COMPILED:
        return pure
    return cast(F, COMPILED[pure.__name__])


def same_signature(pure: F) -> Callable[[F], None]:
    """For mypy: ``same_signature(a)(b)`` type-checks when ``b`` can stand in for ``a`` (the same
    parameter names, kinds and defaults; parameter types at least as wide, a return type at least as
    narrow). Written both ways, for a pure function and its compiled twin as the stub declares it,
    it holds only when the two signatures are the same. Called under ``if TYPE_CHECKING`` only."""

    def check(compiled: F) -> None:
        return None

    return check
