"""Helpers shared by the benchmark scripts: timing and ratio tables.

Each benchmark is a script ``benchmarks/bench_<name>.py`` with a ``main(argv=None)``
that measures kinema against a peer in the same run and prints a table via
:func:`print_table`. ``benchmarks/run.py`` runs one or all of them.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence


def timeit(fn: Callable[[], object], repeat: int = 5, warmup: int = 1, min_time: float = 0.0) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeat`` runs after ``warmup`` runs.

    With ``min_time`` > 0, each measurement loops ``fn`` until that many seconds pass and
    reports the per-call time (for very fast functions).
    """
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= min_time:
                break
        times.append(dt / n)
    return statistics.median(times)


def cpu_time(fn: Callable[[], object], repeat: int) -> float:
    """Fastest process CPU time of ``fn()`` over ``repeat`` runs, in seconds: the one-core
    cost, which other programs on a shared machine disturb far less than wall time."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a plain-text table (markdown-compatible) with a title line."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(str(c)), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(f"\n## {title}\n")
    print("| " + " | ".join(str(c).ljust(w) for c, w in zip(columns, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells:
        print("| " + " | ".join(v.rjust(w) for v, w in zip(r, widths)) + " |")


def _fmt(v: object) -> str:
    if isinstance(v, float):
        if v == 0 or 0.01 <= abs(v) < 1e6:
            return f"{v:,.2f}"
        return f"{v:.3g}"
    return str(v)
