"""The ``kinema`` command: one entry point, one module per subcommand.

Each subcommand lives in ``kinema/cli/<name>.py`` and defines::

    HELP = "one line"
    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int: ...

Subcommand modules are imported only when listed in COMMANDS and present, so a layer
can add its command without touching the others.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import traceback
import warnings
from pathlib import Path

from kinema._version import __version__
from kinema.data import ENV_VAR
from kinema.errors import KinemaError

COMMANDS = ["info", "convert", "retarget", "view", "render", "demo", "db", "train", "eval", "card", "serve"]


def _available() -> dict[str, object]:
    mods = {}
    for name in COMMANDS:
        modname = f"kinema.cli.{name}"
        if importlib.util.find_spec(modname) is not None:
            mods[name] = importlib.import_module(modname)
    return mods


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kinema", description="kinema: neural character animation toolkit")
    parser.add_argument("--version", action="version", version=f"kinema {__version__}")
    parser.add_argument("--debug", action="store_true", help="on an error, print the full traceback")
    parser.add_argument("--data", metavar="DIR", default=None,
                        help="the shared data folder (sets KINEMA_DATA for the command and what it starts; "
                             "default: $KINEMA_DATA, else ../shared/data beside the repository)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, mod in _available().items():
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="on an error, print the full traceback")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


# optional dependency (top-level module) -> the extra that installs it
_EXTRAS = {"pyray": "render", "raylib": "render", "imageio": "render", "imageio_ffmpeg": "render",
           "torch": "train", "safetensors": "train", "matplotlib": "train", "viser": "serve",
           "pygltflib": "io", "ufbx": "io"}


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings as the user reads them: ``kinema: warning: ...`` (no source line)."""
    return f"kinema: warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    if args.data is not None:
        os.environ[ENV_VAR] = str(Path(args.data).expanduser().resolve())
    warnings.formatwarning = _one_line_warning
    try:
        return int(args._run(args) or 0)
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"kinema {args.command}: error: this needs {exc.name}, which is not installed: "
              f"pip install 'kinema[{extra}]'", file=sys.stderr)
        return 1
    except (KinemaError, FileNotFoundError) as exc:
        if getattr(args, "debug", False):
            traceback.print_exc()
        # one line: a message with newlines (e.g. a quoted file line) is folded
        print(f"kinema {args.command}: error: " + " ".join(str(exc).split()), file=sys.stderr)
        return 1
    except BrokenPipeError:
        # the reader went away (e.g. `kinema info x --json | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
