"""kinema's motion ``.npz`` format, and reading AI4AnimationPy's ``.npz``.

kinema motion npz (``format == "kinema.motion"``, ``format_version`` 1), plain arrays that
any NumPy program reads with ``np.load(path, allow_pickle=False)``:

==================  ============  ======================================================
key                 shape, dtype  meaning
==================  ============  ======================================================
format              () str        "kinema.motion"
format_version      () int64      1
name                () str        clip name
fps                 () float64    frames per second
joint_names         (J,) str      joint names
parents             (J,) int64    parent index per joint, -1 for the root
offsets             (J, 3) f32    rest offsets from the parent, metres
rotations           (F, J, 4) f32 local rotations, quaternions (w, x, y, z)
positions           (F, J, 3) f32 local translations, metres
global_rotations    (F, J, 4) f32 world rotations (w, x, y, z), for other tools
global_positions    (F, J, 3) f32 world positions, metres, for other tools
metadata            () str        JSON object (source file, format, BVH channel layout...)
==================  ============  ======================================================

AI4AnimationPy npz (detected by its keys ``positions``, ``quaternions``, ``bone_names``,
``parent_indices``, ``framerate``): world positions (metres) and world quaternions in
(x, y, z, w) order; kinema converts them to local space with
:func:`kinema.motion.kinematics.inverse`. Its ``parent_names`` key is an object array that
needs pickle; it is never read.
"""
from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

import numpy as np

from kinema.errors import FormatError, KinemaError, MissingFileError, SkeletonError
from kinema.io import atomic
from kinema.io.validate import check_fps, check_motion, check_npz_members, finite_float32, parse_json
from kinema.limits import DEFAULT, Limits
from kinema.motion import Motion, Skeleton, kinematics

FORMAT = "kinema.motion"
FORMAT_VERSION = 1
KINEMA_KEYS = ("format_version", "joint_names", "parents", "offsets", "fps", "rotations", "positions")
AI4ANIMATION_KEYS = ("positions", "quaternions", "bone_names", "parent_indices", "framerate")


def save(motion: Motion, path: str | Path, *, compress: bool = True) -> None:
    """Write ``motion`` as a kinema motion npz, atomically (temp file + rename).

    Args:
        motion: the motion; ``motion.metadata`` must be JSON-serialisable (NumPy scalars
            and arrays are converted to numbers and lists).
        path: destination (``.npz``).
        compress: zip-deflate the arrays (smaller, slower to write).
    """
    try:
        meta = json.dumps(motion.metadata, default=_json_default, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise FormatError(f"motion metadata is not JSON-serialisable: {exc}", path) from exc
    grot, gpos = motion.global_transforms()
    arrays = {
        "format": np.asarray(FORMAT),
        "format_version": np.asarray(FORMAT_VERSION, np.int64),
        "name": np.asarray(str(motion.name)),
        "fps": np.asarray(motion.fps, np.float64),
        "joint_names": np.asarray(list(motion.joint_names), dtype=str),
        "parents": np.asarray(motion.parents, np.int64),
        "offsets": np.asarray(motion.skeleton.offsets, np.float32),
        "rotations": np.asarray(motion.rotations, np.float32),
        "positions": np.asarray(motion.positions, np.float32),
        "global_rotations": np.asarray(grot, np.float32),
        "global_positions": np.asarray(gpos, np.float32),
        "metadata": np.asarray(meta),
    }
    if len(motion.joint_names) == 0:
        arrays["joint_names"] = np.zeros(0, "<U1")
    writer = np.savez_compressed if compress else np.savez
    with atomic.open_atomic(Path(path)) as f:
        writer(f, **arrays)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON-serialisable")


def kind(path: str | Path, limits: Limits = DEFAULT) -> str:
    """"kinema" or "ai4animation": which npz this is, by its keys; FormatError otherwise."""
    with _open(path, limits) as z:
        return _kind(set(z.files), path)


def _kind(keys: set[str], path) -> str:
    if "format_version" in keys or keys.issuperset(KINEMA_KEYS):
        return "kinema"
    if keys.issuperset(AI4ANIMATION_KEYS):
        return "ai4animation"
    raise FormatError(f"not a motion npz: keys {sorted(keys)} match neither kinema's motion format "
                      f"({', '.join(KINEMA_KEYS)}) nor AI4AnimationPy's ({', '.join(AI4ANIMATION_KEYS)})", path)


_READ_ERRORS = (ValueError, OSError, KeyError, zipfile.BadZipFile, zlib.error, EOFError)


def _open(path: str | Path, limits: Limits = DEFAULT):
    """The NpzFile of ``path`` after its zip directory and array headers passed the limits."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError("no such file", path)
    if path.is_file():
        with path.open("rb") as f:
            zipped = f.read(4).startswith(b"PK")
        if zipped:
            check_npz_members(path, limits)
    try:
        z = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise MissingFileError("no such file", path) from None
    except _READ_ERRORS as exc:
        raise FormatError(f"not a readable npz file: {exc}", path) from exc
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise FormatError("a single .npy array, not an npz archive of named arrays", path)
    return z


def load(path: str | Path, *, name: str | None = None, limits: Limits = DEFAULT) -> Motion:
    """Read a kinema motion npz or an AI4AnimationPy npz (detected by keys).

    Never unpickles: object arrays are refused (and AI4AnimationPy's ``parent_names``,
    the only one it writes, is not read). Member sizes are checked against ``limits``
    from the zip directory before any array is inflated.
    """
    path = Path(path)
    with _open(path, limits) as z:
        which = _kind(set(z.files), path)
        with _read_errors(path):
            if which == "kinema":
                motion = _load_kinema(z, path, name, limits)
            else:
                motion = _load_ai4animation(z, path, name, limits)
    return check_motion(motion, path, limits)


class _read_errors:
    """Context manager: reading errors of a damaged archive become FormatError."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or isinstance(exc, KinemaError) or not isinstance(exc, _READ_ERRORS):
            return False
        raise FormatError(f"corrupted or unreadable motion npz: {type(exc).__name__}: {exc}",
                          self.path) from exc


def _array(z, key: str, path, dtype=None, shape: tuple | None = None) -> np.ndarray:
    if key not in z.files:
        raise FormatError(f"missing key {key!r}", path)
    try:
        a = z[key]
    except ValueError as exc:
        if "pickle" in str(exc):
            raise FormatError(f"key {key!r} is an object array (needs pickle; refused)", path) from exc
        raise
    if a.dtype == object:
        raise FormatError(f"key {key!r} is an object array (needs pickle; refused)", path)
    if dtype is not None:
        try:
            with np.errstate(over="ignore", invalid="ignore"):     # inf is refused by the finite checks
                a = a.astype(dtype, copy=False)
        except (TypeError, ValueError) as exc:
            raise FormatError(f"key {key!r} has dtype {a.dtype}, expected {np.dtype(dtype)}", path) from exc
    if shape is not None:
        ok = len(shape) == a.ndim and all(s is None or s == d for s, d in zip(shape, a.shape))
        if not ok:
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise FormatError(f"key {key!r} has shape {a.shape}, expected {want}", path)
    return a


def _scalar_str(z, key: str, default: str = "") -> str:
    if key not in z.files:
        return default
    try:
        a = z[key]
    except ValueError:
        return default
    if a.dtype.kind not in "US" or a.ndim != 0:
        return default
    return str(a[()])


def _skeleton(names, parents, offsets, path) -> Skeleton:
    try:
        return Skeleton([str(n) for n in names], parents, offsets)
    except SkeletonError as exc:
        raise FormatError(f"bad skeleton: {exc}", path) from exc


def _check_finite(path, **arrays) -> None:
    for k, a in arrays.items():
        if not np.isfinite(a).all():
            raise FormatError(f"key {k!r} holds NaN or infinite values", path)


def _load_kinema(z, path: Path, name: str | None, limits: Limits = DEFAULT) -> Motion:
    version = int(_array(z, "format_version", path, np.int64, ()))
    if version > FORMAT_VERSION:
        raise FormatError(f"motion npz format_version {version} is newer than this kinema "
                          f"reads ({FORMAT_VERSION}); upgrade kinema", path)
    names = _array(z, "joint_names", path, None, (None,))
    if names.dtype.kind not in "US":
        raise FormatError(f"key 'joint_names' must hold strings, has dtype {names.dtype}", path)
    j = names.shape[0]
    parents = _array(z, "parents", path, np.int64, (j,))
    offsets = _array(z, "offsets", path, np.float32, (j, 3))
    rot = _array(z, "rotations", path, np.float32, (None, j, 4))
    pos = _array(z, "positions", path, np.float32, (rot.shape[0], j, 3))
    fps = check_fps(_array(z, "fps", path, np.float64, ()), path, limits)
    _check_finite(path, offsets=offsets, rotations=rot, positions=pos)
    meta = parse_json(_scalar_str(z, "metadata", "{}") or "{}", path, "metadata", limits)
    if not isinstance(meta, dict):
        raise FormatError("metadata must be a JSON object", path)
    skeleton = _skeleton(names, parents, offsets, path)
    return Motion(skeleton, fps, rot, pos, name=_scalar_str(z, "name", path.stem) if name is None else name,
                  metadata=meta)


def _load_ai4animation(z, path: Path, name: str | None, limits: Limits = DEFAULT) -> Motion:
    names = _array(z, "bone_names", path, None, (None,))
    if names.dtype.kind not in "US":
        raise FormatError(f"key 'bone_names' must hold strings, has dtype {names.dtype}", path)
    j = names.shape[0]
    parents = _array(z, "parent_indices", path, np.int64, (j,))
    gpos = _array(z, "positions", path, np.float64, (None, j, 3))
    gq = _array(z, "quaternions", path, np.float64, (gpos.shape[0], j, 4))
    fps = check_fps(_array(z, "framerate", path, np.float64, ()), path, limits, "framerate")
    _check_finite(path, positions=gpos, quaternions=gq)
    finite_float32(gpos, path, "positions")
    if gpos.shape[0] == 0:
        raise FormatError("the file holds no frames", path)
    norms = np.linalg.norm(gq, axis=-1)
    if np.abs(norms - 1).max() > 1e-2:
        raise FormatError(f"quaternions are not unit length (norms {norms.min():.3g}..{norms.max():.3g})", path)
    bad = np.nonzero((parents >= np.arange(j)) | (parents < -1))[0]
    if bad.size:
        raise FormatError(f"bone {str(names[bad[0]])!r} has parent index {parents[bad[0]]}: every "
                          "parent must come before its child", path)
    gq = gq[..., [3, 0, 1, 2]] / norms[..., None]          # x,y,z,w -> w,x,y,z, unit
    rot, pos = kinematics.inverse(gq, gpos, parents)
    skeleton = _skeleton(names, parents, pos[0], path)
    meta = {"source": str(path), "format": "ai4animation-npz"}
    return Motion(skeleton, fps, rot, pos, name=_scalar_str(z, "name", path.stem) if name is None else name,
                  metadata=meta)


def info(path: str | Path) -> dict:
    """Extra facts for ``kinema info``: which npz kind and its version."""
    with _open(path) as z, _read_errors(Path(path)):
        which = _kind(set(z.files), path)
        if which == "kinema":
            return {"format": "kinema-npz",
                    "format_version": int(_array(z, "format_version", path, np.int64, ()))}
        return {"format": "ai4animation-npz"}
