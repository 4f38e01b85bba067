"""``--pure`` and ``--compare`` for the ``scripts/bench_*`` benchmarks: compiled core vs pure-Python twins.

``--pure`` re-runs the script with ``ROCKETPY_NO_EXTENSIONS=1`` (``rocketpy._accel``) so the script and
every daemon it starts (they inherit the environment) run the pure-Python twins. ``--compare`` runs
the script twice back to back, compiled core first, then pure Python, prints both outputs and then
each figure line once with the pure figure and the compiled/pure ratio beside it.

Usage in a benchmark: ``bench_core.add_options(parser)`` before ``parse_args`` and
``bench_core.apply(args)`` right after it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from rocketpy._accel import LABEL, NO_EXTENSIONS_ENV, extensions_disabled

# A figure: 12,345.6 / 0.25 / 1e-05 (thousands separators allowed).
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?")


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--pure`` / ``--compare`` (mutually exclusive)."""
    group = parser.add_mutually_exclusive_group()
    pure_help = f"run on the pure-Python twins ({NO_EXTENSIONS_ENV}=1; started daemons inherit it)"
    group.add_argument("--pure", action="store_true", help=pure_help)
    compare_help = "run compiled core, then pure Python, and print the figures side by side"
    group.add_argument("--compare", action="store_true", help=compare_help)


def apply(args: argparse.Namespace) -> None:
    """Act on the options: ``--compare`` runs both and exits, ``--pure`` re-executes in pure mode."""
    if args.compare:
        sys.exit(compare([a for a in sys.argv[1:] if a != "--compare"]))
    if args.pure and not extensions_disabled():
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, NO_EXTENSIONS_ENV: "1"})
    print(f"core: {LABEL}", flush=True)


def _run(argv: list[str], pure: bool) -> tuple[int, list[str]]:
    env = {**os.environ, NO_EXTENSIONS_ENV: "1" if pure else "0"}
    print(f"=== {'pure Python' if pure else 'compiled core'} ===", flush=True)
    proc = subprocess.run([sys.executable, sys.argv[0], *argv], env=env, stdout=subprocess.PIPE, text=True)
    print(proc.stdout, end="", flush=True)
    return proc.returncode, proc.stdout.splitlines()


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _words(line: str) -> str:
    """The line's text before its first number, spacing ignored (columns shift with the figures)."""
    return " ".join(_NUMBER.sub("#", line).split("#")[0].split())


def side_by_side(compiled: list[str], pure: list[str]) -> list[str]:
    """Each line of ``compiled`` whose words match the same line of ``pure``, with the pure figures beside.

    Beside the compiled line: the pure line's figures in the same order, then compiled / pure of
    the first figure that differs (above 1: the compiled core is faster for a rate, slower for a
    time or a CPU cost).
    """
    out = []
    for c, p in zip(compiled, pure, strict=False):
        if "load average" in c or _words(c) != _words(p):
            continue
        c_numbers, p_numbers = _NUMBER.findall(c), _NUMBER.findall(p)
        for cn, pn in zip(c_numbers, p_numbers, strict=False):
            if cn != pn:
                ratio = _number(cn) / _number(pn) if _number(pn) else float("inf")
                out.append(
                    f"{c.rstrip()}   | pure: {' '.join(p_numbers)}  (first figure compiled/pure {ratio:.2f}x)"
                )
                break
    return out


def compare(argv: list[str]) -> int:
    """Run the script compiled then pure; print the side-by-side table; the worse exit status."""
    rc_c, compiled = _run(argv, pure=False)
    rc_p, pure = _run(argv, pure=True)
    print(f"=== compiled core vs pure Python (load average {os.getloadavg()[0]:.2f}) ===")
    for line in side_by_side(compiled, pure):
        print(line)
    return rc_c or rc_p
