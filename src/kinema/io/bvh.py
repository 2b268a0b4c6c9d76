"""BVH import and export.

``load(path)`` reads any channel order per joint, 0 to 6 channels on any joint, and End
Sites; it returns a :class:`kinema.motion.Motion` in metres (``scale``: by default
"auto", 0.01 for files in centimetres and 1.0 for files already in metres) with local
rotations from the intrinsic Euler angles in each joint's channel order
(``Zrotation Xrotation Yrotation`` is order "zxy": ``R = Rz Rx Ry``).
Position channels replace the joint's OFFSET; joints without them keep the OFFSET.

End Sites are dropped by default (their offsets stay in ``motion.metadata["bvh"]`` so
export writes them back); ``end_sites=True`` keeps them as joints named
``<Parent>Site`` (AI4AnimationPy's naming), with identity rotation.

The channel layout is kept in ``motion.metadata["bvh"]`` so ``save`` reproduces it; a
motion from another format is written with 6 channels (XYZ position, ZYX rotation) on the
root and 3 rotation channels (ZYX) elsewhere, plus position channels on any joint whose
translation changes over time, so the file re-imports to the same motion.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

from kinema.errors import FormatError
from kinema.io import atomic
from kinema.io.bvh_parse import BvhData, read
from kinema.io.validate import RENORMALISE_ABOVE, check_motion
from kinema.limits import DEFAULT, Limits
from kinema.maths import quat
from kinema.motion import Motion, Skeleton, kinematics

DEFAULT_SCALE = 0.01
# A skeleton whose longest root-to-leaf chain of OFFSETs is shorter than this many file
# units is taken to be in metres already (no character is 3 cm long; a human in metres is
# about 1 unit, in centimetres about 100).
METRES_IF_CHAIN_BELOW = 3.0
# Unit detection from the first pose's height (:func:`guess_scale`): a first pose shorter
# than PLAUSIBLE[0] or taller than PLAUSIBLE[1] metres is no creature kinema animates, and
# the file is read in the one of UNITS that makes it a person nearest the middle of
# PERSON_HEIGHT (the height is the joints' vertical extent x HEAD_TOP, which adds the skull
# above the head joint and the sole below the ankle; a crouched first pose comes out short).
PLAUSIBLE = (0.3, 2.5)
PERSON_HEIGHT = (1.4, 2.1)
HEAD_TOP = 1.1
# metres per unit: centimetres, metres, CMU ASF units (1/0.45 inch), inches, millimetres
UNITS = (0.01, 1.0, 2.54 / 45.0, 0.0254, 0.001)
DEFAULT_ROOT_CHANNELS = ["Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation"]
DEFAULT_CHANNELS = ["Zrotation", "Yrotation", "Xrotation"]
_AXIS = {"X": 0, "Y": 1, "Z": 2}


def load(path: str | Path, *, scale: float | str = "auto", end_sites: bool = False,
         name: str | None = None, limits: Limits = DEFAULT) -> Motion:
    """Read a BVH file.

    Args:
        path: the .bvh file.
        scale: multiplies OFFSETs and position channels (file units -> metres); 0.01
            for centimetres, 1.0 for files already in metres; "auto" (the default) picks
            0.01 unless the skeleton is clearly in metres, and another unit (CMU's
            1/0.45 inch, inches, millimetres) when the first pose would not be a person
            1.4-2.1 m tall (see :func:`guess_scale`).
        end_sites: keep End Sites as joints named ``<Parent>Site`` (default: drop them).
        name: motion name (default: the file stem).
        limits: size and frame-rate limits (:mod:`kinema.limits`).
    Returns:
        Motion with rotations (F, J, 4) and positions (F, J, 3) in metres, fps from
        "Frame Time" (snapped to a whole number when within 1e-4 relative of one).
    Raises:
        FormatError naming the file and line on malformed input.
    """
    data = read(path, limits)
    motion = to_motion(data, scale=scale, end_sites=end_sites, name=Path(path).stem if name is None else name)
    return check_motion(motion, path, limits, arrays_in_range=_in_range(motion, limits))


def _in_range(motion: Motion, limits: Limits) -> bool:
    """One compiled pass for :func:`check_motion`'s array checks (a dozen NumPy reductions)."""
    from kinema.io import bvh_kernels
    return bvh_kernels.motion_in_range(motion.skeleton.offsets, motion.positions, motion.rotations,
                                       float(limits.max_abs_position), RENORMALISE_ABOVE / 2)


def info(path: str | Path) -> dict:
    """Extra facts for ``kinema info``: channel count and End Sites."""
    data = read(path)
    return {"format": "bvh", "channels": int(data.values.shape[1]), "end_sites": len(data.end_sites),
            "frame_time": data.frame_time}


def fps_from_frame_time(frame_time: float) -> float:
    """1 / frame_time, snapped to the nearest whole fps when within 1e-4 relative."""
    fps = 1.0 / frame_time
    if not np.isfinite(fps):
        raise FormatError(f"Frame Time {frame_time!r} gives no finite frame rate")
    r = round(fps)
    return float(r) if r > 0 and abs(fps - r) <= 1e-4 * fps else fps


def rotation_order(channels: list[str]) -> tuple[str, list[int]]:
    """Euler order (3 lower-case letters) and the indices in ``channels`` of its angles.

    Axes without a channel are appended (their angle is 0); the index for them is -1.
    """
    axes = [c[0].lower() for c in channels if c.endswith("rotation")]
    idx = [i for i, c in enumerate(channels) if c.endswith("rotation")]
    for a in "xyz":
        if a not in axes:
            axes.append(a)
            idx.append(-1)
    return "".join(axes), idx


def guess_scale(data: BvhData, first_pose_height: float | None = None) -> float:
    """Metres per file unit, for a file that does not say.

    1.0 when the longest root-to-leaf chain of OFFSETs is shorter than
    ``METRES_IF_CHAIN_BELOW`` file units (the file is in metres), else 0.01 (centimetres).
    When ``first_pose_height`` (the vertical extent of the first frame's joints, in file
    units) makes that choice implausible (under 0.3 m or over 2.5 m: CMU files, whose unit
    is 1/0.45 inch, read as a 26 cm person), the one of :data:`UNITS` that makes the
    skeleton a person nearest the middle of 1.4-2.1 m is taken instead.
    """
    lengths = np.linalg.norm(data.offsets, axis=-1).tolist()
    chain: list[float] = []         # Python floats: the same double sums as NumPy's
    for j, p in enumerate(data.parents.tolist()):
        chain.append(lengths[j] + (chain[p] if p >= 0 else 0.0))
    scale = 1.0 if max(chain, default=0.0) < METRES_IF_CHAIN_BELOW else DEFAULT_SCALE
    if first_pose_height is None or not np.isfinite(first_pose_height) or first_pose_height <= 0:
        return scale
    if PLAUSIBLE[0] <= first_pose_height * scale <= PLAUSIBLE[1]:
        return scale
    middle = np.sqrt(PERSON_HEIGHT[0] * PERSON_HEIGHT[1])
    return min(UNITS, key=lambda u: abs(np.log(first_pose_height * u * HEAD_TOP / middle)))


def _first_pose_height(data: BvhData, rot0: np.ndarray, pos_joint, pos_axis, pos_col) -> float:
    """Vertical extent (file units) of the joints in the first frame."""
    if data.values.shape[0] == 0:
        return float("nan")
    local = data.offsets.astype(np.float64)          # a copy
    if pos_joint:
        local[pos_joint, pos_axis] = data.values[0, pos_col]
    _, g = kinematics.forward(rot0.astype(np.float64), local, data.parents)
    return float(g[:, 1].max() - g[:, 1].min()) if np.isfinite(g).all() else float("nan")


def to_motion(data: BvhData, *, scale: float | str = "auto", end_sites: bool = False,
              name: str = "") -> Motion:
    """Convert parsed BVH arrays to a Motion (see :func:`load`)."""
    if isinstance(scale, str) and scale != "auto":
        raise ValueError(f"scale must be a positive number or 'auto', got {scale!r}")
    if not isinstance(scale, str) and not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    values = data.values
    frames, num_joints = values.shape[0], len(data.names)
    plan = _plan(tuple(map(tuple, data.channels)))
    pos_joint, pos_axis, pos_col = plan.pos_joint, plan.pos_axis, plan.pos_col
    rot = _rotations(values, plan, frames, num_joints)
    if isinstance(scale, str):
        scale = guess_scale(data, _first_pose_height(data, rot[0] if frames else rot, pos_joint, pos_axis, pos_col))
    offsets = data.offsets * scale
    pos = np.empty((frames, num_joints, 3), np.float32)
    pos[:] = offsets
    if pos_joint:
        with np.errstate(over="ignore"):           # beyond float32: refused by check_motion
            pos[:, pos_joint, pos_axis] = values[:, pos_col] * scale

    names = list(data.names)
    parents = data.parents.copy()
    site_names: list[str] = []
    if end_sites and data.end_sites:
        names, parents, offsets, rot, pos, site_names = _insert_sites(data, scale, names, parents,
                                                                       offsets, rot, pos)
    metadata = {
        "source": data.path,
        "format": "bvh",
        "bvh": {
            "scale": float(scale),
            "frame_time": float(data.frame_time),
            "channels": {n: list(c) for n, c in zip(data.names, data.channels)},
            "end_sites": [[data.names[j], [float(v) for v in off]] for j, off, _ in data.end_sites],
            "site_joints": site_names,
        },
    }
    skeleton = Skeleton(names, parents, offsets)
    return Motion(skeleton, fps_from_frame_time(data.frame_time), rot, pos, name=name, metadata=metadata)


def _rotations(values: np.ndarray, plan: _Plan, frames: int, num_joints: int) -> np.ndarray:
    """(F, J, 4) float32 local rotations from the Euler angles (degrees) in ``values``;
    identity for joints without rotation channels.

    Float32 (the storage type): NumPy's float32 sin/cos are several times faster and the
    error (~2e-7) is far below what the file's decimals carry. The bits are those of
    ``quat.from_euler(np.radians(angles).astype(np.float32), order)`` per Euler order, in
    two compiled passes around NumPy's sin and cos instead of some 30 ufunc calls per order.
    """
    from kinema.io import bvh_kernels
    half = np.empty((frames, num_joints, 3), np.float32)
    bvh_kernels.half_angles(np.ascontiguousarray(values, np.float64), plan.cols, half)
    rot = np.empty((frames, num_joints, 4), np.float32)
    bvh_kernels.euler_quaternions(np.cos(half), np.sin(half), plan.axes, rot)
    return rot


class _Plan(NamedTuple):
    """Where a channel layout's values go (:func:`_plan`).

    Attributes:
        cols: (J, 3) int64 value column of each joint's Euler angles in its order; -1 for
            an axis without a channel and for joints without rotation channels.
        axes: (J, 3) int64 axis (0-2) of each joint's angles in its order; -1 rows for
            joints without rotation channels.
        pos_joint, pos_axis, pos_col: joint, axis (0-2) and value column of every
            position channel.
    """

    cols: np.ndarray
    axes: np.ndarray
    pos_joint: list[int]
    pos_axis: list[int]
    pos_col: list[int]


@lru_cache(maxsize=64)
def _plan(channels: tuple[tuple[str, ...], ...]) -> _Plan:
    """The value columns of each joint's rotation and position channels, per joint's
    channel list in file order (cached: the files of one data set share one layout)."""
    cols = np.full((len(channels), 3), -1, np.int64)
    axes = np.full((len(channels), 3), -1, np.int64)
    pos_joint, pos_axis, pos_col = [], [], []
    start = 0
    for j, chans in enumerate(channels):
        if any(c.endswith("rotation") for c in chans):
            order, idx = rotation_order(list(chans))
            axes[j] = [_AXIS[a.upper()] for a in order]
            cols[j] = [start + i if i >= 0 else -1 for i in idx]
        for i, c in enumerate(chans):
            if c.endswith("position"):
                pos_joint.append(j)
                pos_axis.append(_AXIS[c[0]])
                pos_col.append(start + i)
        start += len(chans)
    cols.flags.writeable = axes.flags.writeable = False
    return _Plan(cols, axes, pos_joint, pos_axis, pos_col)


def _insert_sites(data: BvhData, scale, names, parents, offsets, rot, pos):
    """Insert End Sites as joints at their place in the file's depth-first order."""
    frames = rot.shape[0]
    taken = set(names)
    # new index of old joint j = j + number of sites read before joint j
    site_at = np.asarray([at for _, _, at in data.end_sites])
    old_new = np.arange(len(names)) + np.searchsorted(site_at, np.arange(len(names)), side="right")
    total = len(names) + len(data.end_sites)
    new_names = [""] * total
    new_parents = np.zeros(total, np.int64)
    new_offsets = np.zeros((total, 3))
    new_rot = np.zeros((frames, total, 4), np.float32)
    new_rot[..., 0] = 1.0
    new_pos = np.zeros((frames, total, 3), np.float32)
    for j, n in enumerate(names):
        new_names[old_new[j]] = n
    new_parents[old_new] = np.where(parents >= 0, old_new[parents], -1)
    new_offsets[old_new] = offsets
    new_rot[:, old_new] = rot
    new_pos[:, old_new] = pos
    is_site = np.ones(total, bool)
    is_site[old_new] = False
    site_names = []
    for slot, (j, off, _) in zip(np.nonzero(is_site)[0], data.end_sites):
        base = f"{names[j]}Site"
        n, k = base, 2
        while n in taken:
            n, k = f"{base}{k}", k + 1
        taken.add(n)
        site_names.append(n)
        new_names[slot] = n
        new_parents[slot] = old_new[j]
        new_offsets[slot] = off * scale
        new_pos[:, slot] = off * scale
    return new_names, new_parents, new_offsets, new_rot, new_pos, site_names


# --------------------------------------------------------------------------- export

def save(motion: Motion, path: str | Path, *, scale: float | None = None, precision: int = 6) -> None:
    """Write ``motion`` as BVH (atomically: a temporary file renamed into place).

    Args:
        motion: the motion to write.
        path: destination .bvh file.
        scale: metres per file unit (default: the scale the motion was read with, else 0.01,
            i.e. the file is in centimetres).
        precision: decimals for positions (file units) and angles (degrees).

    Joints are written depth-first (children in index order), which is the joint order
    of the motion for any motion read from BVH.
    """
    text = to_text(motion, scale=scale, precision=precision)
    atomic.write_bytes(Path(path), text.encode("utf-8"))


def _layout(motion: Motion, meta: dict) -> tuple[list[list[str]], set[str], dict[str, list[list[float]]]]:
    """Channels per joint, the names written as End Sites, End Site offsets per joint."""
    names, parents = motion.joint_names, motion.parents
    channels_meta = meta.get("channels", {}) if isinstance(meta.get("channels"), dict) else {}
    has_child = np.zeros(len(names), bool)
    has_child[parents[parents >= 0]] = True
    sites = {n for n in meta.get("site_joints", []) if n in names and not has_child[names.index(n)]}
    rot = motion.rotations
    pos = motion.positions
    channels = []
    for j, n in enumerate(names):
        if n in sites:
            channels.append([])
            continue
        chans = channels_meta.get(n)
        if chans is None or not isinstance(chans, list):
            chans = list(DEFAULT_ROOT_CHANNELS if parents[j] < 0 else DEFAULT_CHANNELS)
        chans = list(chans)
        if not any(c.endswith("rotation") for c in chans):
            # identity everywhere? otherwise add rotation channels so nothing is lost
            if np.abs(np.abs(rot[:, j, 0]) - 1).max(initial=0) > 1e-7:
                chans += DEFAULT_CHANNELS
        missing = [a for a in "XYZ" if f"{a}position" not in chans]
        if missing:
            moving = np.abs(pos[:, j] - motion.skeleton.offsets[j]).max(axis=0) > 1e-7
            if any(moving[_AXIS[a]] for a in missing):
                chans = [c for c in chans if c.endswith("position")] + \
                    [f"{a}position" for a in missing] + [c for c in chans if c.endswith("rotation")]
        channels.append(chans)
    ends: dict[str, list[list[float]]] = {}
    for item in meta.get("end_sites", []):
        try:
            jn, off = item
            ends.setdefault(str(jn), []).append([float(v) for v in off])
        except (TypeError, ValueError):
            continue
    return channels, sites, ends


def to_text(motion: Motion, *, scale: float | None = None, precision: int = 6) -> str:
    """The BVH text of ``motion`` (see :func:`save`)."""
    meta = motion.metadata.get("bvh", {}) if isinstance(motion.metadata.get("bvh"), dict) else {}
    if scale is None:
        scale = float(meta.get("scale", DEFAULT_SCALE))
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    names, parents = motion.joint_names, motion.parents
    offsets = motion.skeleton.offsets.astype(np.float64) / scale
    channels, sites, ends = _layout(motion, meta)
    children: list[list[int]] = [[] for _ in names]
    roots = []
    for j, p in enumerate(parents):
        (children[p] if p >= 0 else roots).append(j)
    if len(roots) != 1:
        raise FormatError(f"BVH holds one skeleton with one root; this motion has {len(roots)} roots")

    lines = ["HIERARCHY"]
    order: list[int] = []       # joints in the order their channels are written
    fmt = f"%.{precision}f"

    def off_text(v) -> str:
        return " ".join(fmt % x for x in v)

    stack: list[tuple[int, int, bool]] = [(roots[0], 0, False)]
    while stack:
        j, depth, closing = stack.pop()
        ind = "\t" * depth
        if closing:
            kids = [c for c in children[j] if names[c] not in sites]
            site_kids = [c for c in children[j] if names[c] in sites]
            for c in site_kids:
                lines += [f"{ind}\tEnd Site", f"{ind}\t{{", f"{ind}\t\tOFFSET {off_text(offsets[c])}", f"{ind}\t}}"]
            if not kids and not site_kids:
                for off in ends.get(names[j], [[0.0, 0.0, 0.0]]):
                    lines += [f"{ind}\tEnd Site", f"{ind}\t{{", f"{ind}\t\tOFFSET {off_text(off)}", f"{ind}\t}}"]
            lines.append(f"{ind}}}")
            continue
        order.append(j)
        lines.append(f"{ind}{'ROOT' if parents[j] < 0 else 'JOINT'} {names[j]}")
        lines.append(f"{ind}{{")
        lines.append(f"{ind}\tOFFSET {off_text(offsets[j])}")
        lines.append(f"{ind}\tCHANNELS {len(channels[j])}" + "".join(" " + c for c in channels[j]))
        stack.append((j, depth, True))
        for c in reversed(children[j]):
            if names[c] not in sites:
                stack.append((c, depth + 1, False))

    values = _channel_values(motion, order, channels, scale)
    lines += ["MOTION", f"Frames: {motion.num_frames}", f"Frame Time: {1.0 / motion.fps:.10g}"]
    head = "\n".join(lines) + "\n"
    if values.shape[1] == 0:
        return head + "\n" * motion.num_frames
    row = " ".join([fmt] * values.shape[1]) + "\n"
    return head + "".join([row % tuple(r) for r in values.tolist()])


def _channel_values(motion: Motion, order: list[int], channels: list[list[str]], scale: float) -> np.ndarray:
    """(F, C) values in written column order: positions / scale, Euler angles in degrees."""
    frames = motion.num_frames
    cols: list[np.ndarray] = []
    rot = motion.rotations.astype(np.float64)
    pos = motion.positions.astype(np.float64) / scale
    # Euler angles for every joint with rotation channels, one to_euler call per order.
    by_order: dict[str, list[int]] = {}
    for j in order:
        if any(c.endswith("rotation") for c in channels[j]):
            by_order.setdefault(rotation_order(channels[j])[0], []).append(j)
    euler: dict[int, np.ndarray] = {}
    for o, joints in by_order.items():
        angles = np.degrees(quat.to_euler(rot[:, joints], o))      # (F, Jg, 3)
        for k, j in enumerate(joints):
            euler[j] = angles[:, k]
    for j in order:
        chans = channels[j]
        if not chans:
            continue
        o, idx = rotation_order(chans)
        for i, c in enumerate(chans):
            if c.endswith("position"):
                cols.append(pos[:, j, _AXIS[c[0]]])
            else:
                cols.append(euler[j][:, idx.index(i)])
    if not cols:
        return np.zeros((frames, 0))
    return np.stack(cols, axis=1)
