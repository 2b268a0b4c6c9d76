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


HEAVY = {"torch", "pyray", "raylib", "viser", "numba", "matplotlib", "scipy", "tqdm", "imageio", "safetensors",
         "pygltflib", "ufbx", "tensorboard"}


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_targets(node) -> list[str]:
    if isinstance(node, __import__("ast").Import):
        return [a.name for a in node.names]
    if node.module is None:
        return []
    return [node.module] + [f"{node.module}.{a.name}" for a in node.names]


def test_imports_stand_at_the_top_unless_they_load_a_heavy_dependency():
    """An import inside a function (or an if/try) of a kinema module is allowed only where
    that module loads an optional heavy dependency (torch, raylib, viser, numba, ...) when
    imported, or under ``if TYPE_CHECKING`` (type names only), or in the package facade's
    lazy loaders (``kinema/__init__.py``). Which kinema modules are heavy is read from the
    source: a module is heavy when its top-level imports reach a heavy package."""
    import ast

    src = Path(kinema.__file__).parent.parent
    trees = {_module_name(p, src): ast.parse(p.read_text()) for p in sorted((src / "kinema").rglob("*.py"))}
    top: dict[str, set[str]] = {}
    for name, tree in trees.items():
        top[name] = {t for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom) for t in _import_targets(n)}
    # heavy: a module whose top-level imports (or whose packages') reach a heavy package,
    # found as a fixed point (import cycles between kinema modules are allowed here)
    heavy = {n for n, targets in top.items() if any(t.split(".")[0] in HEAVY for t in targets)}
    grew = True
    while grew:
        grew = False
        for n, targets in top.items():
            parents = {".".join(n.split(".")[:i]) for i in range(1, n.count(".") + 1)}
            if n not in heavy and (targets | parents) & heavy:
                heavy.add(n)
                grew = True

    def is_heavy(name: str) -> bool:
        return name.split(".")[0] in HEAVY or name in heavy

    found = []
    for name, tree in trees.items():
        if name == "kinema":
            continue
        typing_only = {id(m) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.dump(n.test)
                       for m in ast.walk(n)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Import | ast.ImportFrom) and n not in tree.body and id(n) not in typing_only:
                targets = [t for t in _import_targets(n) if t.startswith("kinema")]
                if targets and not any(is_heavy(t) for t in targets):
                    found.append(f"{name}:{n.lineno} {ast.unparse(n)}")
    assert not found, "imports of light kinema modules inside functions (move them to the top):\n" + "\n".join(found)
