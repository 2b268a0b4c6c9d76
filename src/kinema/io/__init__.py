"""File import and export. One loader per format, chosen by suffix.

Each format module exposes ``load(path, **options) -> Motion`` and, where supported,
``save(motion, path, **options)`` and ``load_character(path, **options) -> Character``.
Modules are imported lazily so a NumPy-only user never imports pygltflib or ufbx.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from kinema.errors import KinemaError, MissingFileError, UnsupportedFormatError

# suffix -> module implementing it. npz covers both kinema's motion npz and
# AI4AnimationPy's npz (kinema.io.npz detects which).
FORMATS: dict[str, str] = {
    ".bvh": "kinema.io.bvh",
    ".npz": "kinema.io.npz",
    ".glb": "kinema.io.gltf",
    ".gltf": "kinema.io.gltf",
    ".fbx": "kinema.io.fbx",
}


# Character-only formats: read by load_character but not scanned by `kinema convert`
# (".bin" is also glTF's external-buffer suffix).
CHARACTER_FORMATS: dict[str, str] = {
    ".bin": "kinema.io.character_bin",   # the LaFAN1 character.bin layout
}


def format_module(path: str | Path):
    """The module that reads/writes ``path``, by suffix; raises UnsupportedFormatError."""
    suffix = Path(path).suffix.lower()
    name = FORMATS.get(suffix)
    if name is None:
        raise UnsupportedFormatError(
            f"{path}: unsupported file type {suffix!r} (supported: {', '.join(sorted(FORMATS))})")
    return importlib.import_module(name)


def load(path: str | Path, **options):
    """Load a :class:`kinema.motion.Motion` from ``path`` (dispatch on suffix)."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError("no such file", path)
    return format_module(path).load(path, **options)


def save(motion, path: str | Path, **options) -> Path:
    """Save ``motion`` to ``path``; the format follows the suffix. Returns the path."""
    module = format_module(path)
    if not hasattr(module, "save"):
        raise UnsupportedFormatError(f"{path}: writing {Path(path).suffix} is not supported")
    module.save(motion, Path(path), **options)
    return Path(path)


def load_character(path: str | Path, **options):
    """Load a :class:`kinema.io.character.Character` (skeleton, skinned meshes, animations)."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError("no such file", path)
    name = CHARACTER_FORMATS.get(path.suffix.lower())
    module = importlib.import_module(name) if name else format_module(path)
    if not hasattr(module, "load_character"):
        raise UnsupportedFormatError(f"{path}: {path.suffix} files hold no character mesh")
    return module.load_character(path, **options)


MESH_SUFFIXES = frozenset({".glb", ".gltf", ".fbx"})   # motion files that may carry a skinned mesh


def mesh_character(path: str | Path):
    """The skinned character a motion file carries (a GLB, glTF or FBX with a mesh), or None
    when the file holds no mesh or no character can be read from it."""
    path = Path(path)
    if path.suffix.lower() not in MESH_SUFFIXES:
        return None
    try:
        character = load_character(path)
    except KinemaError:
        return None
    return character if character.has_mesh else None
