"""Foot locking: keep a planted foot where it landed, and let it go smoothly.

For every foot, contact labels (F,) split the clip into contact segments. During a
segment the foot's target is its position at the segment's first frame (kept within
``max_drift`` of the animated foot); for ``release_frames`` frames after the segment ends,
the target blends (smoothstep) from the locked position back to the animated one. Each leg (upper leg -> knee -> foot by
default) is then solved with FABRIK on every affected frame at once, the knee bending
toward where it was in the animation (pole), and toes carried rigidly with the foot.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kinema.errors import KinemaError
from kinema.ik.pose import solve_pose


@dataclass(eq=False)
class FootLockResult:
    """World rotations (F, J, 4), positions (F, J, 3) after locking, the foot targets
    (F, K, 3) and lock weights (F, K) in [0, 1] (1 = fully locked)."""

    rotations: np.ndarray
    positions: np.ndarray
    targets: np.ndarray
    weights: np.ndarray


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def lock_targets(foot_positions: np.ndarray, contacts: np.ndarray, release_frames: int = 5,
                 max_drift: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Locked targets and lock weights of one or more feet.

    A contact segment locks the foot where its target was on the segment's first frame
    (its animated position, or the blended target when the previous release is still
    running, so targets stay continuous). The target never lies more than ``max_drift``
    metres from the animated foot (a foot that really slides is followed at that
    distance). After the segment the target blends back to the animation with a
    smoothstep over ``release_frames`` frames.

    Args:
        foot_positions: (F, K, 3) animated world foot positions.
        contacts: (F, K) bool contact labels.
        release_frames: frames over which a released foot returns to its animation.
        max_drift: largest distance between target and animated foot, metres.
    Returns:
        ``(targets (F, K, 3), weights (F, K))``: weight 1 during contact, falling to 0 over
        the release, 0 elsewhere (where the target is the animation).
    """
    p = np.asarray(foot_positions, np.float64)
    c = np.asarray(contacts, bool)
    if c.shape != p.shape[:2]:
        raise KinemaError(f"contacts {c.shape} do not match foot positions {p.shape[:2]}")
    targets = p.copy()
    weights = np.zeros(c.shape)
    n = c.shape[0]
    for k in range(c.shape[1]):
        anim = p[:, k]
        edges = np.diff(np.concatenate([[0], c[:, k].astype(np.int8), [0]]))
        starts, stops = np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]
        for i, (s, e) in enumerate(zip(starts, stops)):
            lock = targets[s - 1, k] if s > 0 and weights[s - 1, k] > 0 else anim[s]
            off = lock - anim[s:e]
            dist = np.linalg.norm(off, axis=-1, keepdims=True)
            targets[s:e, k] = anim[s:e] + off * np.minimum(1.0, max_drift / np.maximum(dist, 1e-12))
            weights[s:e, k] = 1.0
            end = min(e + release_frames, starts[i + 1] if i + 1 < len(starts) else n)
            if end > e:
                w = _smoothstep(1.0 - (np.arange(e, end) - e + 1) / (release_frames + 1.0))
                weights[e:end, k] = w
                targets[e:end, k] = anim[e:end] + w[:, None] * (targets[e - 1, k] - anim[e:end])
    return targets, weights


def foot_lock(global_rotations: np.ndarray, global_positions: np.ndarray, parents: Sequence[int],
              feet: Sequence[int], contacts: np.ndarray, *, leg_roots: Sequence[int] | None = None,
              release_frames: int = 5, max_drift: float = 0.1, max_iterations: int = 10, tolerance: float = 1e-4) -> FootLockResult:
    """Lock planted feet in place over a clip.

    Args:
        global_rotations: (F, J, 4) world rotations.
        global_positions: (F, J, 3) world positions, metres.
        parents: (J,) parent indices.
        feet: K foot (ankle) joints.
        contacts: (F, K) bool contact labels of those feet.
        leg_roots: K fixed joints the legs hang from (default: each foot's grandparent,
            the upper leg of a hip -> knee -> ankle leg).
        release_frames: frames to blend back to the animation after a contact ends.
        max_drift: the most a locked target may lie from the animated foot, metres.
        max_iterations, tolerance: FABRIK limits.
    Returns:
        :class:`FootLockResult`; bone lengths are unchanged.
    """
    rot = np.asarray(global_rotations, np.float64).copy()
    pos = np.asarray(global_positions, np.float64).copy()
    parents = np.asarray(parents, np.int64)
    feet = [int(j) for j in feet]
    if leg_roots is None:
        leg_roots = []
        for j in feet:
            if parents[j] < 0 or parents[parents[j]] < 0:
                raise KinemaError(f"foot joint {j} has no grandparent to hang the leg from; pass leg_roots")
            leg_roots.append(int(parents[parents[j]]))
    targets, weights = lock_targets(pos[:, feet], contacts, release_frames, max_drift)
    for k, (foot, hip) in enumerate(zip(feet, leg_roots)):
        frames = np.nonzero(weights[:, k] > 0)[0]
        if frames.size == 0:
            continue
        poles = {}
        knee = int(parents[foot])
        if knee != hip:
            mid = 0.5 * (pos[frames, hip] + pos[frames, foot])
            poles[knee] = pos[frames, knee] + (pos[frames, knee] - mid)
        res = solve_pose(rot[frames], pos[frames], parents, hip, {foot: targets[frames, k]}, poles=poles or None,
                         max_iterations=max_iterations, tolerance=tolerance)
        rot[frames] = res.rotations
        pos[frames] = res.positions
    return FootLockResult(rot, pos, targets, weights)
