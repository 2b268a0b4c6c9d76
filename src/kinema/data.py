"""Where kinema finds data: the shared real-mocap folder and the bundled sample.

The shared folder holds non-redistributable mocap used by tests, benchmarks, demos and
training. One rule finds it, the same for every command, demo and test, whatever the
current folder:

1. ``$KINEMA_DATA`` when set (``kinema --data DIR ...`` sets it for the command); a value
   that is not a folder is an error, never silently ignored;
2. else ``../shared/data`` beside the repository that holds this package (a checkout).

The bundled sample (a few permissively licensed clips and characters) ships inside the
package so the README demo runs on a fresh machine. Code that can do without a shared file
asks :func:`optional_path`, which warns (:class:`DataFallbackWarning`) saying what is
drawn instead; code that cannot asks :func:`require_path`, whose error names
``KINEMA_DATA``, ``--data`` and the folders looked in.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

from kinema.errors import KinemaError, MissingFileError

ENV_VAR = "KINEMA_DATA"
HINT = f"set {ENV_VAR}=/path/to/shared/data or pass kinema --data /path/to/shared/data"


class DataFallbackWarning(UserWarning):
    """A shared data file is absent and something else is used instead."""


def _candidates() -> list[Path]:
    """Folders the shared data may be in when ``$KINEMA_DATA`` is not set."""
    here = Path(__file__).resolve()
    return [p.parent / "shared" / "data" for p in here.parents[:4]]


def shared_root() -> Path | None:
    """The shared data folder, or None when it is not present (see the module rules).

    Raises:
        KinemaError: ``$KINEMA_DATA`` is set to something that is not a folder.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser().resolve()
        if not path.is_dir():
            raise KinemaError(f"{ENV_VAR}={env} is not a folder (it, or kinema --data, should name the shared data folder)")
        return path
    for c in _candidates():
        if c.is_dir():
            return c.resolve()
    return None


def searched() -> str:
    """Where :func:`shared_root` looks, for messages."""
    env = os.environ.get(ENV_VAR)
    if env:
        return f"{ENV_VAR}={env}"
    return f"{ENV_VAR} not set; looked in " + ", ".join(str(c) for c in _candidates())


def _where() -> str:
    """The folder looked in and why, for messages."""
    root = shared_root()
    if root is None:
        return f"no shared data folder ({searched()})"
    how = f"from {ENV_VAR}" if os.environ.get(ENV_VAR) else "beside the repository"
    return f"not in {root} ({how})"


def shared_path(*parts: str) -> Path | None:
    """A path inside the shared data folder, or None when the folder or file is absent."""
    root = shared_root()
    if root is None:
        return None
    path = root.joinpath(*parts)
    return path if path.exists() else None


def require_path(*parts: str, what: str | None = None) -> Path:
    """A path inside the shared data folder that the caller cannot do without.

    Raises:
        MissingFileError: naming ``what`` (default: the relative path), the folder looked
            in and how to point kinema at the data.
    """
    path = shared_path(*parts)
    if path is not None:
        return path
    rel = "/".join(parts)
    raise MissingFileError(f"{what or rel} ({rel}) not found: {_where()}; {HINT}")


def optional_path(*parts: str, what: str | None = None, instead: str = "") -> Path | None:
    """A path inside the shared data folder, or None with a :class:`DataFallbackWarning`
    saying what is missing, where kinema looked and what is used ``instead``."""
    path = shared_path(*parts)
    if path is None:
        rel = "/".join(parts)
        warnings.warn(f"{what or rel} ({rel}) not found: {_where()}; using {instead or 'nothing'} instead ({HINT})",
                      DataFallbackWarning, stacklevel=2)
    return path


def sample_root() -> Path:
    """The sample data bundled with the package (always present)."""
    return Path(__file__).resolve().parent / "assets" / "sample"


def sample_path(*parts: str) -> Path:
    """A file of the bundled sample; raises FileNotFoundError naming it when missing."""
    path = sample_root().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"bundled sample file not found: {path}")
    return path


PREFIXES = ("shared:", "sample:")


def expand_data_pattern(pattern: str) -> list[Path]:
    """The paths a command-line ``pattern`` names: a ``shared:REL`` or ``sample:REL`` prefix
    resolves in the shared data folder or the bundled sample (whatever the current folder),
    and a glob (``*``, ``?``, ``[``) expands, sorted; anything else is the path itself.

    Raises:
        MissingFileError: ``shared:`` without a shared data folder (naming where kinema
            looked), or a glob that matches nothing.
    """
    import glob

    root: Path | None = None
    if pattern.startswith("shared:"):
        root = shared_root()
        if root is None:
            raise MissingFileError(f"{pattern}: no shared data folder ({searched()}); {HINT}")
    elif pattern.startswith("sample:"):
        root = sample_root()
    rel = pattern.split(":", 1)[1] if root is not None else pattern
    full = str(root / rel) if root is not None else rel
    if not glob.has_magic(full):
        return [Path(full)]
    hits = sorted(Path(p) for p in glob.glob(full))
    if not hits:
        raise MissingFileError(f"{pattern}: no file matches" + (f" under {root}" if root is not None else ""))
    return hits


def data_path(arg: str | Path) -> str | Path:
    """A command-line path argument: ``shared:REL`` or ``sample:REL`` becomes that path in
    the shared data folder or the bundled sample, whatever the current folder (the rule of
    :func:`expand_data_pattern`, without globbing); anything else is returned unchanged
    (a path relative to the current folder, or a name such as a demo's or a skeleton preset's).

    Raises:
        MissingFileError: ``shared:`` without a shared data folder (naming where kinema looked).
    """
    text = str(arg)
    if text.startswith("shared:"):
        root = shared_root()
        if root is None:
            raise MissingFileError(f"{text}: no shared data folder ({searched()}); {HINT}")
        return root / text.split(":", 1)[1]
    if text.startswith("sample:"):
        return sample_root() / text.split(":", 1)[1]
    return arg


def data_relative(path: str | Path) -> str:
    """``path`` as a command line writes it independent of the current folder:
    ``shared:REL`` inside the shared data folder, ``sample:REL`` inside the bundled sample,
    else the absolute path (a glob in ``path`` is kept)."""
    full = Path(path).expanduser().resolve()
    for prefix, root in (("shared:", shared_root()), ("sample:", sample_root())):
        if root is not None and full.is_relative_to(root):
            return prefix + full.relative_to(root).as_posix()
    return str(full)


def portable_path(path: str | Path) -> str:
    """``path`` as a record (a card, an evaluation's JSON) should name it: ``shared:REL`` or
    ``sample:REL`` inside the data (:func:`data_relative`), else relative to the current
    folder when inside it (a command run from the repository root), else absolute."""
    named = data_relative(path)
    if named.startswith(PREFIXES):
        return named
    full, cwd = Path(named), Path.cwd().resolve()
    return full.relative_to(cwd).as_posix() if full.is_relative_to(cwd) else named
