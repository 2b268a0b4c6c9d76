"""FABRIK on a posed skeleton: solved positions turned back into joint rotations.

:func:`solve_pose` runs :func:`kinema.ik.fabrik.solve` on the world positions of a pose,
then rotates each solved joint by the smallest rotation (swing) taking its old bone
direction(s) to the new one(s) (Kabsch fit for a joint with several solved children),
sets effector rotations to their targets when given, and carries every other descendant
rigidly with its parent (its local transform is unchanged). Joints outside the IK root's
subtree are untouched.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kinema.ik.fabrik import between, solve
from kinema.maths import quat


@dataclass(eq=False)
class PoseResult:
    """World rotations (..., J, 4) and positions (..., J, 3) after IK, with the solve's
    ``iterations`` and effector ``errors`` (..., E)."""

    rotations: np.ndarray
    positions: np.ndarray
    iterations: int
    errors: np.ndarray


def _fit_rotation(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Rotation (B, 4) best taking old vectors (B, C, 3) to new ones (Kabsch)."""
    h = np.einsum("bci,bcj->bij", old, new)
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(np.einsum("bji,bkj->bik", vt, u)))
    fix = np.ones(u.shape[:-2] + (3,))
    fix[..., 2] = d
    r = np.einsum("bji,bj,bkj->bik", vt, fix, u)
    from scipy.spatial.transform import Rotation
    return Rotation.from_matrix(r).as_quat()[..., [3, 0, 1, 2]]


def solve_pose(global_rotations: np.ndarray, global_positions: np.ndarray, parents: Sequence[int], root: int,
               targets: Mapping[int, np.ndarray], *, target_rotations: Mapping[int, np.ndarray] | None = None,
               poles: Mapping[int, np.ndarray] | None = None, max_iterations: int = 20,
               tolerance: float = 1e-4) -> PoseResult:
    """Solve IK on a pose and return the whole new world pose.

    Args:
        global_rotations: (..., J, 4) world rotations (w, x, y, z).
        global_positions: (..., J, 3) world positions, metres.
        parents: (J,) parent indices.
        root: the fixed joint the chains hang from (e.g. the upper leg for a leg).
        targets: effector joint -> target position (..., 3).
        target_rotations: effector joint -> world rotation (..., 4) to give it; effectors
            without one keep their world rotation.
        poles: inner joint -> pole position (..., 3) (see :func:`kinema.ik.fabrik.solve`).
        max_iterations, tolerance: solve limits.
    Returns:
        :class:`PoseResult` (float64 arrays).
    """
    rot = np.asarray(global_rotations, np.float64)
    pos = np.asarray(global_positions, np.float64)
    parents = np.asarray(parents, np.int64)
    res = solve(pos, parents, root, targets, poles=poles, max_iterations=max_iterations, tolerance=tolerance)
    batch = pos.shape[:-2]
    nj = pos.shape[-2]
    rot2 = rot.reshape(-1, nj, 4)
    pos2 = pos.reshape(-1, nj, 3)
    new_pos = res.positions.reshape(-1, nj, 3).copy()
    b = pos2.shape[0]
    solved = set()
    for e in targets:
        j = int(e)
        while True:
            solved.add(j)
            if j == root:
                break
            j = int(parents[j])
    inv_par = np.where(parents >= 0, parents, 0)
    local_rot = quat.mul(quat.inv(rot2[:, inv_par]), rot2)
    local_pos = quat.rotate(quat.inv(rot2[:, inv_par]), pos2 - pos2[:, inv_par])
    new_rot = rot2.copy()
    subtree = np.zeros(nj, bool)
    subtree[root] = True
    for j in range(nj):
        if parents[j] >= 0 and subtree[parents[j]]:
            subtree[j] = True
    trot = {int(k): np.broadcast_to(np.asarray(v, np.float64), batch + (4,)).reshape(b, 4)
            for k, v in (target_rotations or {}).items()}
    for j in range(nj):
        if not subtree[j]:
            continue
        if j in solved:
            kids = [c for c in range(nj) if parents[c] == j and c in solved]
            if j in trot:
                new_rot[:, j] = trot[j]
            elif len(kids) == 1:
                c = kids[0]
                swing = between(pos2[:, c] - pos2[:, j], new_pos[:, c] - new_pos[:, j])
                new_rot[:, j] = quat.mul(swing, rot2[:, j])
            elif len(kids) > 1:
                old = np.stack([pos2[:, c] - pos2[:, j] for c in kids], 1)
                new = np.stack([new_pos[:, c] - new_pos[:, j] for c in kids], 1)
                new_rot[:, j] = quat.mul(_fit_rotation(old, new), rot2[:, j])
        else:  # carried rigidly by its parent
            pj = parents[j]
            new_rot[:, j] = quat.mul(new_rot[:, pj], local_rot[:, j])
            new_pos[:, j] = new_pos[:, pj] + quat.rotate(new_rot[:, pj], local_pos[:, j])
    new_rot = quat.normalize(new_rot)
    return PoseResult(new_rot.reshape(batch + (nj, 4)), new_pos.reshape(batch + (nj, 3)), res.iterations,
                      res.errors)
