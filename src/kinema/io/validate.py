"""Checks applied to whatever a loader reads from an untrusted file.

Every loader ends with :func:`check_motion`, so a motion that loads is usable: at least
one frame, finite values after conversion to the float32 storage dtype (5e38 is finite
in float64 and ``inf`` in float32), unit quaternions (near-unit ones are normalised,
zero-length or far-from-unit ones refused) and a frame rate inside
``[Limits.min_fps, Limits.max_fps]``. :func:`check_motion_size` refuses declared sizes
before anything is allocated, and :func:`parse_json` reads JSON metadata with bounded
size and depth. All raise :class:`kinema.errors.FormatError` (or its subclass
:class:`kinema.errors.LimitError`) naming the file.
"""
from __future__ import annotations

import json
import tokenize
from pathlib import Path

import numpy as np

from kinema.errors import FormatError, KinemaError, LimitError, MissingFileError
from kinema.limits import DEFAULT, Limits

# |norm - 1| below this is rounding (normalised on load); above it the data is not a rotation.
QUAT_NORM_TOLERANCE = 0.1
# Quaternions whose norm is off by more than this are renormalised (float32 rounding of a
# unit quaternion stays well below it, so rotations computed by kinema keep their bits).
RENORMALISE_ABOVE = 1e-5


def check_motion_size(frames: int, joints: int, path, limits: Limits = DEFAULT) -> None:
    """Refuse ``frames`` x ``joints`` over the limits, before allocating (F, J, 4) arrays."""
    if frames > limits.max_frames:
        raise LimitError(f"{frames} frames declared, over {limits.max_frames}", path, "max_frames")
    if joints > limits.max_joints:
        raise LimitError(f"{joints} joints declared, over {limits.max_joints}", path, "max_joints")
    if frames * joints * 4 > limits.max_motion_values:
        raise LimitError(f"{frames} frames x {joints} joints x 4 = {frames * joints * 4} values, over "
                         f"{limits.max_motion_values}", path, "max_motion_values")


def check_fps(fps: float, path, limits: Limits = DEFAULT, what: str = "fps") -> float:
    """``fps`` as a float, refused unless finite and in ``[min_fps, max_fps]``."""
    try:
        value = float(fps)
    except (TypeError, ValueError, OverflowError):
        raise FormatError(f"{what} {fps!r} is not a number", path) from None
    if not (np.isfinite(value) and limits.min_fps <= value <= limits.max_fps):
        raise FormatError(f"{what} {value:g} is outside {limits.min_fps:g}..{limits.max_fps:g} "
                          "frames per second (kinema.limits.Limits.min_fps/max_fps)", path)
    return value


def finite_float32(array: np.ndarray, path, what: str) -> np.ndarray:
    """``array`` as float32, refused when any value is NaN or infinite after the cast."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.asarray(array, dtype=np.float32)
    if out.size and not _finite_extremes(out):
        bad = int(np.count_nonzero(~np.isfinite(out)))
        raise FormatError(f"{what}: {bad} values are NaN, infinite or beyond float32 range", path)
    return out


def unit_quaternions(q: np.ndarray, path, what: str = "rotations") -> np.ndarray:
    """(..., 4) float32 quaternions of unit length: those off by more than
    ``RENORMALISE_ABOVE`` are normalised, zero-length or far-from-unit ones refused."""
    q32 = np.asarray(q, np.float32)
    if q32.size and q32.shape[-1] == 4:
        # Fast pass: float32 squared norms (within ~3e-7 relative of the float64 ones). All
        # within (1 +- RENORMALISE_ABOVE / 2)^2 means every float64 norm is too: nothing to
        # fix, nothing to refuse, and the float64 pass below would return the same bits.
        sq = np.einsum("...i,...i->...", q32, q32)
        lo, hi = (1.0 - RENORMALISE_ABOVE / 2) ** 2, (1.0 + RENORMALISE_ABOVE / 2) ** 2
        if lo <= sq.min() and sq.max() <= hi:  # NaN: False
            return q32
    q64 = np.asarray(q, np.float64)
    norms = np.linalg.norm(q64, axis=-1)
    if norms.size and not np.all(np.abs(norms - 1.0) <= QUAT_NORM_TOLERANCE):
        flat = np.abs(norms - 1.0).ravel()
        i = int(np.argmax(np.where(np.isfinite(flat), flat, np.inf)))
        raise FormatError(f"{what}: quaternion norm {norms.ravel()[i]:.3g} is not unit "
                          f"(zero-length or corrupted; tolerance {QUAT_NORM_TOLERANCE})", path)
    off = np.abs(norms - 1.0) > RENORMALISE_ABOVE
    if not off.any():
        return np.asarray(q, np.float32)                 # bit-exact: nothing to fix
    out = np.array(q, np.float32)
    out[off] = (q64[off] / norms[off][:, None]).astype(np.float32)
    return out


def check_motion(motion, path, limits: Limits = DEFAULT, *, arrays_in_range: bool = False):
    """The loaded ``motion`` made safe to use, or FormatError naming ``path``.

    Checks: at least one frame, fps range, finite float32 rotations, positions and
    offsets; rotations normalised to unit length. Returns the same Motion object
    (rotations replaced in place when normalised). ``arrays_in_range``: the caller has
    found the float32 offsets and positions finite and within
    ``limits.max_abs_position`` and the rotations within ``RENORMALISE_ABOVE / 2`` of
    unit norm (:func:`kinema.io.bvh_kernels.motion_in_range`), so the array checks, which
    would pass and change nothing, are skipped.
    """
    if motion.num_frames < 1:
        raise FormatError("the motion has no frames", path)
    check_motion_size(motion.num_frames, motion.skeleton.num_joints, path, limits)
    motion.fps = check_fps(motion.fps, path, limits)
    if arrays_in_range:
        return motion
    bounded_positions(motion.skeleton.offsets, path, "offsets", limits)
    bounded_positions(motion.positions, path, "positions", limits)
    rot = finite_float32(motion.rotations, path, "rotations")
    motion.rotations = np.ascontiguousarray(unit_quaternions(rot, path))
    return motion


def _finite_extremes(a: np.ndarray) -> bool:
    """All of ``a`` (non-empty float) finite? Its min and max are (NaN propagates through
    both, an infinity is one of them): two reductions, no (N,) bool temporary."""
    return bool(np.isfinite(a.min()) and np.isfinite(a.max()))


def bounded_positions(array: np.ndarray, path, what: str, limits: Limits = DEFAULT) -> np.ndarray:
    """Finite float32 coordinates (metres) no larger than ``limits.max_abs_position``."""
    out = finite_float32(array, path, what)
    if out.size:
        peak = float(max(-out.min(), out.max()))  # max |x| without an abs() copy
        if peak > limits.max_abs_position:
            raise LimitError(f"{what}: a coordinate of {peak:.3g} m", path, "max_abs_position")
    return out


def check_character(character, path, limits: Limits = DEFAULT):
    """A loaded character made safe to use: at least one joint, finite bind pose, unit bind
    rotations, finite bounded vertices (metres). Returns the same object."""
    if character.skeleton.num_joints < 1:
        raise FormatError("the character has no joints", path)
    bounded_positions(character.bind_positions, path, "bind positions", limits)
    character.bind_rotations = unit_quaternions(
        finite_float32(character.bind_rotations, path, "bind rotations"), path, "bind rotations")
    finite_float32(character.inverse_bind, path, "inverse bind matrices")
    for mesh in character.meshes:
        bounded_positions(mesh.positions, path, f"mesh {mesh.name!r} positions", limits)
        finite_float32(mesh.normals, path, f"mesh {mesh.name!r} normals")
        finite_float32(mesh.weights, path, f"mesh {mesh.name!r} weights")
    return character


def json_depth(value) -> int:
    """Nesting depth of a parsed JSON value (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in children)
    return deepest


def parse_json(text: str | bytes, path, what: str = "metadata", limits: Limits = DEFAULT,
               error: type[KinemaError] = FormatError):
    """Parse JSON metadata of an untrusted file with bounded size and nesting depth.

    Args:
        text: the JSON text (bytes are decoded as UTF-8).
        path: the file, named in errors. what: which entry, e.g. "metadata".
        error: the KinemaError subclass to raise (e.g. CheckpointError); it is called
            as ``error(message)`` with the path in the message.
    """
    def fail(message: str):
        return error(f"{Path(path)}: {what}: {message}") if error is not FormatError \
            else FormatError(f"{what}: {message}", path)

    if len(text) > limits.max_json_bytes:
        raise fail(f"{len(text)} bytes of JSON, over the limit of {limits.max_json_bytes} "
                   "(kinema.limits.Limits.max_json_bytes)")
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        value = json.loads(text)
    except RecursionError:
        raise fail("JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:      # JSONDecodeError is a ValueError
        raise fail(f"not valid JSON ({e})") from None
    depth = json_depth(value)
    if depth > limits.max_json_depth:
        raise fail(f"JSON nested {depth} levels deep, over the limit of {limits.max_json_depth} "
                   "(kinema.limits.Limits.max_json_depth)")
    return value


def check_npz_members(path, limits: Limits = DEFAULT) -> dict[str, tuple[tuple[int, ...], str]]:
    """Shapes and dtypes of the arrays of an ``.npz`` archive, from its zip directory and
    each member's ``.npy`` header, refused before any array is read when they exceed
    ``limits`` (decompressed size per member and in total, compression ratio) or when a
    header declares more data than its member holds.

    Returns:
        {key: (shape, dtype string)} for every ``.npy`` member.
    Raises:
        MissingFileError, FormatError (not a zip, bad header), LimitError.
    """
    import zipfile
    import zlib


    out: dict[str, tuple[tuple[int, ...], str]] = {}
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            total = sum(i.file_size for i in infos)
            if total > limits.max_total_bytes:
                raise LimitError(f"npz members inflate to {total} bytes, over {limits.max_total_bytes}",
                                 path, "max_total_bytes")
            size = max(1, Path(path).stat().st_size)
            if total > max(limits.ratio_free_bytes, limits.max_compression_ratio * size):
                raise LimitError(f"npz members inflate to {total} bytes, {total / size:.0f}x the {size}-byte "
                                 f"file (a zip bomb?), over {limits.max_compression_ratio:g}x",
                                 path, "max_compression_ratio")
            for info in infos:
                _check_member_size(info, path, limits)
                if info.filename.endswith(".npy"):
                    with z.open(info) as member:
                        out[info.filename[:-4]] = _npy_header(member, info, path)
    except FileNotFoundError:
        raise MissingFileError("no such file", path) from None
    except KinemaError:
        raise
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError,
            RuntimeError, SyntaxError, tokenize.TokenError) as e:
        # RuntimeError: encrypted member; SyntaxError, TokenError: a garbled .npy header dict
        raise FormatError(f"not a readable npz file ({type(e).__name__}: {e})", path) from None
    return out


def _check_member_size(info, path, limits: Limits) -> None:
    size = info.file_size
    if size > limits.max_array_bytes:
        raise LimitError(f"npz member {info.filename!r} inflates to {size} bytes, over "
                         f"{limits.max_array_bytes}", path, "max_array_bytes")


def _npy_header(member, info, path) -> tuple[tuple[int, ...], str]:
    """(shape, dtype) of one ``.npy`` member, checked to fit inside the member's bytes."""
    fmt = np.lib.format
    version = fmt.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = fmt.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, _, dtype = fmt.read_array_header_2_0(member)
    else:
        raise FormatError(f"npz member {info.filename!r}: unsupported .npy version {version}", path)
    count = 1
    for d in shape:
        count *= int(d)
    nbytes = count * dtype.itemsize
    if dtype.hasobject:
        return tuple(shape), "object"
    if nbytes > info.file_size:
        raise FormatError(f"npz member {info.filename!r}: header declares shape {tuple(shape)} "
                          f"({nbytes} bytes) but the member holds {info.file_size} bytes", path)
    return tuple(int(d) for d in shape), dtype.str
