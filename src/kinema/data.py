"""Where kinema finds data: the shared real-mocap folder and the bundled sample.

The shared folder (``../shared/data`` next to the repository) holds non-redistributable
mocap used by tests, benchmarks and training; ``KINEMA_DATA`` overrides its location.
The bundled sample (a few permissively licensed clips and characters) ships inside the
package so the README demo runs on a fresh machine.
"""
from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "KINEMA_DATA"


def shared_root() -> Path | None:
    """The shared data folder, or None when it is not present.

    Looks at ``$KINEMA_DATA`` first, then ``../shared/data`` relative to the repository
    root (the folder holding ``pyproject.toml``) and to the current directory.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser()
        return path if path.is_dir() else None
    here = Path(__file__).resolve()
    candidates = [p.parent / "shared" / "data" for p in here.parents[:4]]
    candidates.append(Path.cwd().parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


def shared_path(*parts: str) -> Path | None:
    """A path inside the shared data folder, or None when the folder or file is absent."""
    root = shared_root()
    if root is None:
        return None
    path = root.joinpath(*parts)
    return path if path.exists() else None


def sample_root() -> Path:
    """The sample data bundled with the package (always present)."""
    return Path(__file__).resolve().parent / "assets" / "sample"


def sample_path(*parts: str) -> Path:
    """A file of the bundled sample; raises FileNotFoundError naming it when missing."""
    path = sample_root().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"bundled sample file not found: {path}")
    return path
