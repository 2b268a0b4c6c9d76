"""Trajectories over a time window, in the current root's space.

A :class:`TimeSeries` names the sample times around the current frame (past and future
seconds, ``samples`` evenly spaced samples, the AI4AnimationPy convention); at a frame
rate it becomes integer frame offsets. For every current frame ``n`` and offset ``o``
the features read frame ``clamp(n + o, lo, hi - 1)`` (the clip's bounds, so windows never
cross into another clip) and express it in the root space of frame ``n``:

- root trajectory: positions, facing directions and velocities (N, S, 3);
- joint trajectory: positions (N, S, K, 3), rotations as 6D (two columns of the rotation
  matrix, N, S, K, 6) and velocities (N, S, K, 3) of K chosen joints.

All of it is a few fancy-indexing and elementwise NumPy expressions over the whole batch:
no loop over samples. Mirroring (across the root's YZ plane) is a cheap operation on the
features: :meth:`RootTrajectory.mirror` / :meth:`JointTrajectory.mirror` give exactly the
features of the mirrored motion (tested), so augmentation needs no second pass.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kinema.errors import KinemaError
from kinema.features.root import Root, finite_difference, yaw_rotate


@dataclass(frozen=True)
class TimeSeries:
    """Sample times around the current frame.

    Attributes:
        past: seconds before the current frame (>= 0).
        future: seconds after it (>= 0).
        samples: number of samples, evenly spaced over ``[-past, future]`` inclusive.
    """

    past: float
    future: float
    samples: int

    def __post_init__(self) -> None:
        if self.past < 0 or self.future < 0 or self.samples < 1:
            raise KinemaError(f"TimeSeries needs past, future >= 0 and samples >= 1, got {self}")
        if self.samples == 1 and self.past and self.future:
            raise KinemaError("a TimeSeries with one sample needs past or future = 0")

    @property
    def times(self) -> np.ndarray:
        """(S,) sample times in seconds relative to the current frame."""
        if self.samples == 1:
            return np.array([self.future if self.future else -self.past], np.float64)
        return np.linspace(-self.past, self.future, self.samples)

    def offsets(self, fps: float) -> np.ndarray:
        """(S,) int frame offsets at ``fps`` (rounded sample times)."""
        return np.round(self.times * fps).astype(np.int64)


def as_offsets(series: TimeSeries | Sequence[int] | np.ndarray, fps: float | None = None) -> np.ndarray:
    """Frame offsets (S,) from a TimeSeries (needs ``fps``) or a sequence of ints."""
    if isinstance(series, TimeSeries):
        if fps is None:
            raise KinemaError("a TimeSeries needs fps to become frame offsets")
        return series.offsets(fps)
    return np.asarray(series, np.int64).reshape(-1)


def sample_indices(frames: np.ndarray, offsets: np.ndarray, lo=0, hi=None) -> np.ndarray:
    """(N, S) frame indices ``clip(frames[:, None] + offsets, lo, hi - 1)``.

    ``lo``/``hi`` are the clip bounds of each frame (ints or (N,) arrays); ``hi`` is
    exclusive and required.
    """
    if hi is None:
        raise KinemaError("sample_indices needs the clip end (hi)")
    idx = np.asarray(frames, np.int64)[:, None] + np.asarray(offsets, np.int64)[None, :]
    lo = np.asarray(lo, np.int64)
    hi = np.asarray(hi, np.int64)
    lo = lo[:, None] if lo.ndim else lo
    hi = hi[:, None] if hi.ndim else hi
    return np.minimum(np.maximum(idx, lo), hi - 1)


def _frames_and_bounds(num_frames: int, frames, bounds) -> tuple[np.ndarray, object, object]:
    frames = np.arange(num_frames) if frames is None else np.asarray(frames, np.int64).reshape(-1)
    if bounds is None:
        lo, hi = 0, num_frames
    else:
        lo, hi = bounds
    if frames.size and (frames.min() < 0 or frames.max() >= num_frames):
        raise KinemaError(f"frames must lie in [0, {num_frames}), got {frames.min()}..{frames.max()}")
    return frames, lo, hi


def mirror_vectors(v: np.ndarray, axis: int = 0) -> np.ndarray:
    """Mirror root-space vectors (..., 3) across the plane normal to ``axis``."""
    out = np.array(v, copy=True)
    out[..., axis] *= -1
    return out


def mirror_sixd(d: np.ndarray, axis: int = 0) -> np.ndarray:
    """Mirror 6D rotations (..., 6) (columns ``[c0, c1]`` of R) to those of ``M R M``.

    Column i of M R M is ``M c_i``, negated when i equals ``axis`` (M e_i = -e_i).
    """
    out = np.array(d, copy=True)
    out[..., axis] *= -1
    out[..., 3 + axis] *= -1
    if axis < 2:
        out[..., 3 * axis:3 * axis + 3] *= -1
    return out


def subset_mirror_map(mirror_map: np.ndarray, joints: Sequence[int]) -> np.ndarray:
    """Positions within ``joints`` of each joint's mirror twin (K,), for features that
    cover a subset of the skeleton; raises when a twin is not in the subset."""
    joints = [int(j) for j in joints]
    where = {j: i for i, j in enumerate(joints)}
    try:
        return np.array([where[int(mirror_map[j])] for j in joints], np.int64)
    except KeyError as e:
        raise KinemaError(f"joint {e.args[0]} is the mirror twin of a chosen joint but is not chosen itself") from None


@dataclass(eq=False)
class RootTrajectory:
    """Root trajectory features, each (N, S, 3), in the root space of the current frame.

    Attributes:
        positions: future/past root positions minus the current root, rotated (metres; y = 0).
        directions: facing directions (unit, y = 0).
        velocities: root velocities (m/s; y = 0).
    """

    positions: np.ndarray
    directions: np.ndarray
    velocities: np.ndarray

    def mirror(self, axis: int = 0) -> RootTrajectory:
        """Features of the mirrored motion."""
        return RootTrajectory(mirror_vectors(self.positions, axis), mirror_vectors(self.directions, axis),
                              mirror_vectors(self.velocities, axis))


@dataclass(eq=False)
class JointTrajectory:
    """Joint trajectory features in the root space of the current frame.

    Attributes:
        positions: (N, S, K, 3) metres.
        rotations: (N, S, K, 6) 6D rotations (columns 0 and 1 of the rotation matrix).
        velocities: (N, S, K, 3) m/s.
    """

    positions: np.ndarray
    rotations: np.ndarray
    velocities: np.ndarray

    def mirror(self, mirror_map: np.ndarray, axis: int = 0) -> JointTrajectory:
        """Features of the mirrored motion; ``mirror_map`` (K,) gives, for each of the K
        joints, the position of its twin among them (see :func:`subset_mirror_map`)."""
        m = np.asarray(mirror_map)
        return JointTrajectory(mirror_vectors(self.positions[..., m, :], axis),
                               mirror_sixd(self.rotations[..., m, :], axis),
                               mirror_vectors(self.velocities[..., m, :], axis))


def root_trajectory(root: Root, series, fps: float, frames=None, bounds=None,
                    velocities: np.ndarray | None = None) -> RootTrajectory:
    """Root positions, directions and velocities at the series' offsets.

    Args:
        root: per-frame root (F frames).
        series: :class:`TimeSeries` or int frame offsets (S,).
        fps: frame rate (for the TimeSeries and velocities).
        frames: (N,) current frames (default: all F).
        bounds: ``(lo, hi)`` clip bounds (ints or (N,) arrays) for clamping (default the
            whole array, 0..F).
        velocities: (F, 3) precomputed world root velocities (default: central
            differences of ``root.positions``; pass them when F spans several clips).
    Returns:
        :class:`RootTrajectory` of (N, S, 3) arrays.
    """
    offsets = as_offsets(series, fps)
    frames, lo, hi = _frames_and_bounds(root.num_frames, frames, bounds)
    idx = sample_indices(frames, offsets, lo, hi)
    vel = root.velocities(fps) if velocities is None else velocities
    d = root.directions[frames][:, None, :]
    pos = yaw_rotate(d, root.positions[idx] - root.positions[frames][:, None, :], inverse=True)
    dirs = yaw_rotate(d, root.directions[idx], inverse=True)
    vels = yaw_rotate(d, vel[idx], inverse=True)
    return RootTrajectory(pos.astype(np.float32), dirs.astype(np.float32), vels.astype(np.float32))


def quat_to_sixd(q: np.ndarray) -> np.ndarray:
    """6D rotations (..., 6): columns 0 and 1 of the rotation matrix of ``q`` (..., 4)
    (w, x, y, z), flattened ``[c0, c1]`` (the layout of ``kinema.maths.sixd``)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y),
                     2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)], axis=-1)


def sixd_to_root_space(directions: np.ndarray, d: np.ndarray) -> np.ndarray:
    """World 6D rotations (..., 6) expressed in the root given by unit floor
    ``directions`` (broadcast (..., 3)): both columns rotated by the inverse yaw."""
    cols = d.reshape(d.shape[:-1] + (2, 3))
    return yaw_rotate(directions[..., None, :], cols, inverse=True).reshape(d.shape)


def joint_trajectory(global_positions: np.ndarray, global_rotations: np.ndarray, root: Root, series,
                     fps: float, frames=None, joints: Sequence[int] | None = None, bounds=None,
                     velocities: np.ndarray | None = None) -> JointTrajectory:
    """Positions, 6D rotations and velocities of ``joints`` at the series' offsets.

    Args:
        global_positions: (F, J, 3) world positions, metres.
        global_rotations: (F, J, 4) world quaternions, or (F, J, 6) world 6D rotations
            (precomputed with :func:`quat_to_sixd`, cheaper for repeated sampling).
        root: per-frame root.
        series: :class:`TimeSeries` or int frame offsets (S,).
        fps: frame rate.
        frames: (N,) current frames (default all).
        joints: K joint indices (default all J).
        bounds: clip bounds as in :func:`root_trajectory`.
        velocities: (F, J, 3) precomputed world joint velocities (default central
            differences of ``global_positions``).
    Returns:
        :class:`JointTrajectory` with (N, S, K, 3), (N, S, K, 6), (N, S, K, 3), float32.
    """
    offsets = as_offsets(series, fps)
    frames, lo, hi = _frames_and_bounds(root.num_frames, frames, bounds)
    idx = sample_indices(frames, offsets, lo, hi)
    sel = slice(None) if joints is None else np.asarray(joints, np.int64)
    vel = finite_difference(global_positions, fps) if velocities is None else velocities
    d = root.directions[frames][:, None, None, :]
    p = global_positions[idx][:, :, sel] if joints is None else global_positions[:, sel][idx]
    pos = yaw_rotate(d, p - root.positions[frames][:, None, None, :], inverse=True)
    r = global_rotations[:, sel][idx] if joints is not None else global_rotations[idx]
    if r.shape[-1] == 4:
        r = quat_to_sixd(r)
    elif r.shape[-1] != 6:
        raise KinemaError(f"global_rotations must end in 4 (quaternions) or 6 (6D), got {r.shape}")
    rot = sixd_to_root_space(d, r)
    v = vel[:, sel][idx] if joints is not None else vel[idx]
    vels = yaw_rotate(d, v, inverse=True)
    return JointTrajectory(pos.astype(np.float32), rot.astype(np.float32), vels.astype(np.float32))
