"""The lint rules and the layer contracts in pyproject.toml hold for the whole tree.

Both tools come with the ``test`` extra; they run here as a future change would meet them
in CI: ruff over src/, tests/ and benchmarks/, import-linter's contracts over the installed
(or ``PYTHONPATH``) kinema package.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kinema

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd: str) -> subprocess.CompletedProcess:
    # the kinema that import-linter analyses is the one this test imports
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(kinema.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def test_ruff_finds_nothing():
    done = _run(sys.executable, "-m", "ruff", "check", "--no-cache", "src", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_layer_contracts_are_kept():
    done = _run(sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                "sys.exit(lint_imports_command())", "--no-cache")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Contracts: 1 kept, 0 broken." in done.stdout, done.stdout[-2000:]
