"""``kinema demo NAME``: run one of the demos in ``kinema/demos``.

A demo is a module ``kinema/demos/<name>.py`` defining::

    DESCRIPTION = "one line"
    def add_arguments(parser) -> None   # its own options (--headless, --frames, --out, ...)
    def run(args) -> int
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil

import kinema.demos

HELP = "run a demo (kinema demo --list shows them)"


def demo_names() -> list[str]:
    """Names of every demo module in kinema.demos, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(kinema.demos.__path__) if not m.name.startswith("_"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list", action="store_true", help="list the demos and exit")
    parser.add_argument("name", nargs="?", help="demo to run")
    parser.add_argument("demo_args", nargs=argparse.REMAINDER, help="options passed to the demo")


def run(args: argparse.Namespace) -> int:
    names = demo_names()
    if args.list or not args.name:
        for name in names:
            mod = importlib.import_module(f"kinema.demos.{name}")
            print(f"{name:14s} {getattr(mod, 'DESCRIPTION', '')}")
        return 0 if args.list else 2
    if args.name not in names:
        print(f"kinema demo: unknown demo {args.name!r}; available: {', '.join(names)}")
        return 2
    mod = importlib.import_module(f"kinema.demos.{args.name}")
    parser = argparse.ArgumentParser(prog=f"kinema demo {args.name}", description=mod.DESCRIPTION)
    mod.add_arguments(parser)
    return int(mod.run(parser.parse_args(args.demo_args)) or 0)
