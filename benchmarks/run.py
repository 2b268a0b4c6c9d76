"""Run kinema's benchmarks: ``python benchmarks/run.py [NAME ...]`` (default: all).

Each ``benchmarks/bench_<NAME>.py`` defines ``main(argv=None)`` and prints its tables.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))


def run(name: str) -> None:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"bench_{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(HERE))
    spec.loader.exec_module(mod)
    mod.main([])


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available()}")
        return 2
    for name in names:
        print(f"\n# benchmark: {name}")
        run(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
