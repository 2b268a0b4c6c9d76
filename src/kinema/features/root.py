"""The ground-projected root ("simulation bone") of a character, per frame.

The root sits on the floor (y = 0) under a chosen joint (hips or spine) and turns only
about the vertical axis, so that the character's forward axis (+Z in the rest pose) maps
to its facing direction. Facing comes from the hip and shoulder lines (left minus right,
crossed with up), or from one joint's local axis. Optional smoothing (Savitzky-Golay or
Gaussian, over frames) removes the sway of the hips from the trajectory.

Everything is plain arrays: ``compute_root(global_positions (F,J,3), global_rotations
(F,J,4), skeleton, config) -> Root`` and helpers that express world quantities in the
root's space (:func:`to_root_space`, :func:`vectors_to_root_space`,
:func:`rotations_to_root_space`) and back.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

from kinema.errors import KinemaError
from kinema.maths import angles, quat

JointRef = str | int
Smoothing = Literal["none", "savgol", "gaussian"]


@dataclass(frozen=True)
class RootConfig:
    """How to place and turn the root.

    Attributes:
        position_joint: joint (name or index) whose floor projection is the root position.
        facing: ``"lines"`` (hip and shoulder lines) or ``"axis"`` (``facing_joint``'s
            local ``facing_axis`` in world space, projected on the floor).
        left_hip, right_hip, left_shoulder, right_shoulder: joints of the two lines;
            either pair may be None to use only the other.
        facing_joint, facing_axis: joint and its local axis (3,) for ``facing="axis"``.
        smoothing: ``"none"``, ``"savgol"`` (``window`` frames, odd, polynomial ``order``)
            or ``"gaussian"`` (``sigma`` frames), applied over time to the position and
            to the facing direction before normalising it.
    """

    position_joint: JointRef = 0
    facing: Literal["lines", "axis"] = "lines"
    left_hip: JointRef | None = None
    right_hip: JointRef | None = None
    left_shoulder: JointRef | None = None
    right_shoulder: JointRef | None = None
    facing_joint: JointRef | None = None
    facing_axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    smoothing: Smoothing = "none"
    window: int = 31
    order: int = 3
    sigma: float = 4.0

    @classmethod
    def lafan1(cls, **changes) -> RootConfig:
        """LaFAN1 (22 joints): position under Spine2 (as Motion Matching's simulation bone),
        facing from LeftUpLeg/RightUpLeg and LeftShoulder/RightShoulder, Savitzky-Golay
        31 frames order 3 (at 30 fps)."""
        return replace(cls(position_joint="Spine2", facing="lines", left_hip="LeftUpLeg",
                           right_hip="RightUpLeg", left_shoulder="LeftShoulder",
                           right_shoulder="RightShoulder", smoothing="savgol", window=31, order=3),
                       **changes)

    @classmethod
    def bandai(cls, **changes) -> RootConfig:
        """Bandai-Namco dataset (joint_Root + 21 joints): position under Hips, facing
        from UpperLeg_L/UpperLeg_R and Shoulder_L/Shoulder_R, Savitzky-Golay 31/3."""
        return replace(cls(position_joint="Hips", facing="lines", left_hip="UpperLeg_L",
                           right_hip="UpperLeg_R", left_shoulder="Shoulder_L",
                           right_shoulder="Shoulder_R", smoothing="savgol", window=31, order=3),
                       **changes)

    @classmethod
    def guess(cls, skeleton, **changes) -> RootConfig:
        """A config guessed from joint names and the hierarchy, for any biped or quadruped:
        position under the first joint with three or more children (the pelvis), facing
        from the left/right pair hanging from it (the hips; one level deeper when that pair
        sits on the pelvis) and the first left/right pair named shoulder/clavicle (else
        arm). Falls back to the pelvis' +Z axis when no pair is found. No smoothing."""
        import re
        parents = np.asarray(skeleton.parents)
        counts = np.bincount(parents[parents >= 0], minlength=len(parents))
        pelvis = int(np.argmax(counts >= 3)) if (counts >= 3).any() else 0
        try:
            twin = skeleton.mirror_map()
        except Exception:  # noqa: BLE001 - any naming the map cannot pair: no lines
            twin = np.arange(len(parents))
        offsets = np.linalg.norm(np.asarray(skeleton.offsets), axis=-1)

        def pair(candidates):
            for j in candidates:
                if twin[j] != j:
                    name = skeleton.names[j].lower()
                    left = "left" in name or re.search(r"(^l|_l$|\bl_)", name) is not None
                    return (j, int(twin[j])) if left else (int(twin[j]), j)
            return None

        hips = pair([c for c in range(len(parents)) if parents[c] == pelvis])
        if hips is not None and offsets[hips[0]] < 0.01:
            deeper = pair([c for c in range(len(parents)) if parents[c] in hips])
            hips = deeper or hips
        shoulders = None
        for pattern in ("shoulder|clavicle", "arm"):
            shoulders = pair([j for j, n in enumerate(skeleton.names) if re.search(pattern, n, re.I)])
            if shoulders:
                break
        if hips is None and shoulders is None:
            return replace(cls(position_joint=pelvis, facing="axis", facing_joint=pelvis), **changes)
        hips = hips or (None, None)
        shoulders = shoulders or (None, None)
        return replace(cls(position_joint=pelvis, left_hip=hips[0], right_hip=hips[1],
                           left_shoulder=shoulders[0], right_shoulder=shoulders[1]), **changes)


@dataclass(eq=False)
class Root:
    """Root transform per frame.

    Attributes:
        positions: (F, 3) on the floor (y = 0), metres.
        rotations: (F, 4) yaw-only quaternions (w, x, y, z) mapping +Z to the facing.
        directions: (F, 3) unit facing directions on the floor (y = 0).
    """

    positions: np.ndarray
    rotations: np.ndarray
    directions: np.ndarray

    @classmethod
    def from_directions(cls, positions: np.ndarray, directions: np.ndarray) -> Root:
        """A root from floor positions (F, 3) and facing directions (F, 3) (made planar
        and unit here)."""
        positions = np.array(positions, dtype=np.float32)
        positions[..., 1] = 0
        d = _planar_unit(np.asarray(directions, np.float64))
        return cls(positions, yaw_quaternions(d).astype(np.float32), d.astype(np.float32))

    @property
    def num_frames(self) -> int:
        return int(self.positions.shape[0])

    def velocities(self, fps: float) -> np.ndarray:
        """World root velocities (F, 3), m/s, central differences (one-sided at ends)."""
        return finite_difference(self.positions, fps)

    def yaw_rates(self, fps: float) -> np.ndarray:
        """Turning rate about +Y (F,), rad/s, central differences of the unwrapped yaw."""
        yaw = np.unwrap(angles.yaw(self.directions).astype(np.float64))
        return finite_difference(yaw, fps).astype(np.float32)

    def mirror(self, axis: int = 0) -> Root:
        """The mirrored root (positions and directions with coordinate ``axis`` negated)."""
        if axis == 1:
            raise KinemaError("a floor root cannot be mirrored across the floor (axis 1)")
        s = np.ones(3, np.float32)
        s[axis] = -1
        return Root.from_directions(self.positions * s, self.directions * s)

    def __getitem__(self, frames) -> Root:
        return Root(self.positions[frames], self.rotations[frames], self.directions[frames])


def resolve_joint(skeleton, joint: JointRef) -> int:
    """Index of ``joint`` (a name looked up in ``skeleton``, or an index)."""
    if isinstance(joint, (int, np.integer)):
        return int(joint)
    if skeleton is None:
        raise KinemaError(f"joint {joint!r} is given by name but no skeleton was passed")
    try:
        return skeleton.index(joint)
    except KeyError as e:
        raise KinemaError(str(e.args[0])) from None


def finite_difference(x: np.ndarray, fps: float) -> np.ndarray:
    """Time derivative of ``x`` (F, ...) per second: central differences inside, one-sided
    at both ends (zeros for a single frame). float32 out."""
    x = np.asarray(x, np.float64)
    if x.shape[0] < 2:
        return np.zeros(x.shape, np.float32)
    return (np.gradient(x, axis=0) * fps).astype(np.float32)


def smooth(x: np.ndarray, mode: Smoothing, window: int = 31, order: int = 3, sigma: float = 4.0) -> np.ndarray:
    """Smooth ``x`` (F, ...) over frames: Savitzky-Golay (``window`` odd frames, ``order``)
    or Gaussian (``sigma`` frames); edges by polynomial fit / reflection. float64 out."""
    x = np.asarray(x, np.float64)
    if mode == "none" or x.shape[0] < 2:
        return x
    if mode == "savgol":
        w = min(int(window), x.shape[0] if x.shape[0] % 2 else x.shape[0] - 1)
        if w <= order:
            return x
        return _savgol(x, w, int(order))
    if mode == "gaussian":
        from scipy.ndimage import gaussian_filter1d
        return gaussian_filter1d(x, float(sigma), axis=0, mode="nearest")
    raise KinemaError(f"unknown smoothing {mode!r}; use 'none', 'savgol' or 'gaussian'")


@lru_cache(maxsize=32)
def _savgol_matrices(window: int, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Savitzky-Golay smoothing weights (window,) for the centre sample, and the
    (half, window) map from the first ``window`` samples to the fitted values of the first
    ``half`` samples (the polynomial fit scipy's ``mode="interp"`` uses at the edges)."""
    half = window // 2
    t = np.arange(window, dtype=np.float64) - half
    vander = t[:, None] ** np.arange(order + 1)[None, :]
    fit = np.linalg.pinv(vander)                      # (order+1, window): samples -> coefficients
    centre = fit[0]                                   # value of the fit at t = 0
    edge = vander[:half] @ fit                        # fitted values at the first half samples
    return centre, edge


def _savgol(x: np.ndarray, window: int, order: int) -> np.ndarray:
    """Savitzky-Golay filter over axis 0 with polynomial-fit edges (scipy's
    ``savgol_filter(x, window, order, axis=0, mode="interp")``), without a fit per call."""
    from scipy.ndimage import correlate1d
    centre, edge = _savgol_matrices(window, order)
    half = window // 2
    out = correlate1d(x, centre, axis=0, mode="nearest")
    flat = x.reshape(x.shape[0], -1)
    o = out.reshape(x.shape[0], -1)
    o[:half] = edge @ flat[:window]
    o[-half:] = (edge @ flat[::-1][:window])[::-1]
    return out


def _planar_unit(d: np.ndarray) -> np.ndarray:
    """Project directions (F, 3) on the floor and normalise; degenerate frames take the
    last valid direction (the first valid one before it, +Z when none is valid)."""
    d = np.array(d, np.float64)
    d[..., 1] = 0
    n = np.linalg.norm(d, axis=-1)
    ok = n > 1e-8
    if not ok.all():
        if not ok.any():
            out = np.zeros_like(d)
            out[..., 2] = 1
            return out
        idx = np.where(ok, np.arange(len(d)), 0)
        idx = np.maximum.accumulate(idx)
        first = int(np.argmax(ok))
        idx[:first] = first
        d, n = d[idx], n[idx]
    return d / n[..., None]


def yaw_quaternions(directions: np.ndarray) -> np.ndarray:
    """Yaw-only quaternions (..., 4) rotating +Z onto unit floor ``directions`` (..., 3)."""
    half = 0.5 * angles.yaw(directions)
    q = np.zeros(directions.shape[:-1] + (4,), np.float64)
    q[..., 0] = np.cos(half)
    q[..., 2] = np.sin(half)
    return q


def facing_directions(global_positions: np.ndarray, global_rotations: np.ndarray | None,
                      skeleton, config: RootConfig) -> np.ndarray:
    """Raw (unsmoothed, not normalised) facing vectors (F, 3) per ``config``."""
    p = np.asarray(global_positions, np.float64)
    if config.facing == "axis":
        if global_rotations is None or config.facing_joint is None:
            raise KinemaError("facing='axis' needs global rotations and a facing_joint")
        j = resolve_joint(skeleton, config.facing_joint)
        axis = np.asarray(config.facing_axis, np.float64)
        return quat.rotate(np.asarray(global_rotations[:, j], np.float64), np.broadcast_to(axis, p.shape[:1] + (3,)))
    if config.facing != "lines":
        raise KinemaError(f"unknown facing rule {config.facing!r}; use 'lines' or 'axis'")
    across = np.zeros(p.shape[:1] + (3,))
    pairs = [(config.left_hip, config.right_hip), (config.left_shoulder, config.right_shoulder)]
    used = 0
    for left, right in pairs:
        if left is None or right is None:
            continue
        v = p[:, resolve_joint(skeleton, left)] - p[:, resolve_joint(skeleton, right)]
        v[:, 1] = 0
        across += v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-8)
        used += 1
    if not used:
        raise KinemaError("facing='lines' needs left/right hip or shoulder joints in RootConfig")
    # The character's left is +X when it faces +Z with +Y up: forward = left x up.
    return np.cross(across, np.array([0.0, 1.0, 0.0]))


def compute_root(global_positions: np.ndarray, global_rotations: np.ndarray | None,
                 skeleton=None, config: RootConfig | None = None) -> Root:
    """The ground-projected root of every frame.

    Args:
        global_positions: (F, J, 3) world joint positions, metres.
        global_rotations: (F, J, 4) world joint rotations (only used by ``facing="axis"``;
            may be None otherwise).
        skeleton: anything with ``index(name)`` (a :class:`kinema.motion.Skeleton`) to
            resolve joint names; may be None when the config uses indices.
        config: the rule (default: :meth:`RootConfig.guess` from ``skeleton``).
    Returns:
        :class:`Root` with positions (F, 3) at y = 0, yaw rotations (F, 4), directions (F, 3).
    """
    if config is None:
        if skeleton is None:
            raise KinemaError("compute_root needs a RootConfig or a skeleton to guess one from")
        config = RootConfig.guess(skeleton)
    p = np.asarray(global_positions)
    if p.ndim != 3 or p.shape[-1] != 3:
        raise KinemaError(f"global_positions must be (F, J, 3), got {p.shape}")
    pos = p[:, resolve_joint(skeleton, config.position_joint)].astype(np.float64)
    face = facing_directions(p, global_rotations, skeleton, config)
    pos = smooth(pos, config.smoothing, config.window, config.order, config.sigma)
    face = smooth(_planar_unit(face), config.smoothing, config.window, config.order, config.sigma)
    return Root.from_directions(pos, face)


# -- root space -------------------------------------------------------------------------

def yaw_rotate(directions: np.ndarray, v: np.ndarray, inverse: bool = False) -> np.ndarray:
    """Rotate vectors ``v`` (..., 3) by the yaw that maps +Z to unit floor ``directions``
    (..., 3) (broadcast), or by its inverse. Cheaper than a quaternion rotation."""
    s, c = directions[..., 0], directions[..., 2]
    if inverse:
        s = -s
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    out = np.empty(np.broadcast_shapes(v.shape, directions.shape), np.result_type(v, directions))
    out[..., 0] = c * x + s * z
    out[..., 1] = y
    out[..., 2] = c * z - s * x
    return out


def _expand(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Root array (F, k) reshaped to broadcast against ``like`` (F, ..., k)."""
    return a.reshape(a.shape[:1] + (1,) * (like.ndim - 2) + a.shape[1:])


def to_root_space(root: Root, positions: np.ndarray) -> np.ndarray:
    """World positions (F, ..., 3) relative to each frame's root (root space), metres."""
    positions = np.asarray(positions)
    return yaw_rotate(_expand(root.directions, positions), positions - _expand(root.positions, positions),
                      inverse=True)


def from_root_space(root: Root, positions: np.ndarray) -> np.ndarray:
    """Root-space positions (F, ..., 3) back to world space."""
    positions = np.asarray(positions)
    return yaw_rotate(_expand(root.directions, positions), positions) + _expand(root.positions, positions)


def vectors_to_root_space(root: Root, vectors: np.ndarray) -> np.ndarray:
    """World vectors (velocities, directions) (F, ..., 3) rotated into each frame's root."""
    vectors = np.asarray(vectors)
    return yaw_rotate(_expand(root.directions, vectors), vectors, inverse=True)


def vectors_from_root_space(root: Root, vectors: np.ndarray) -> np.ndarray:
    """Root-space vectors (F, ..., 3) rotated back to world space."""
    vectors = np.asarray(vectors)
    return yaw_rotate(_expand(root.directions, vectors), vectors)


def rotations_to_root_space(root: Root, rotations: np.ndarray) -> np.ndarray:
    """World rotations (F, ..., 4) relative to each frame's root: ``inv(root) * q``."""
    rotations = np.asarray(rotations)
    r = _expand(root.rotations, rotations).astype(rotations.dtype)
    return quat.mul(quat.inv(r), rotations)


def rotations_from_root_space(root: Root, rotations: np.ndarray) -> np.ndarray:
    """Root-space rotations (F, ..., 4) back to world space: ``root * q``."""
    rotations = np.asarray(rotations)
    return quat.mul(_expand(root.rotations, rotations).astype(rotations.dtype), rotations)
