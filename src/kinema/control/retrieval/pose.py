"""Pose vectors whose bones keep their lengths by construction.

A pose vector (:func:`kinema.matching.database.pose_layout`) carries root-space joint
positions *and* rotations; a network predicts both, and nothing ties them together, so a
free-running model can drift into poses whose positions stretch bones that its rotations
do not (the tear of an idle character). :func:`rigid_pose` rebuilds the positions from the
rotations by forward kinematics of the rest skeleton, anchored at the hips: every bone
then has its rest length whatever the network predicts. NumPy or torch (differentiable).

A database with mirrored clips holds poses of two skeletons: the mirror reflects the rest
offsets too (:meth:`kinema.motion.Motion.mirror`), and for a skeleton whose bone axes are
not symmetric (LaFAN1: the legs lie along local x) the same rotations place the joints
differently under the two. Each pose is therefore rebuilt with both offset sets and keeps
the one that lies nearer its own predicted positions (exact for every database row).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from kinema.matching.database import Database
from kinema.maths import quat
from kinema.maths.backend import Array, cat, is_torch
from kinema.motion.kinematics import positions_from_rotations
from kinema.motion.skeleton import Skeleton


def offset_sets(db: Database) -> tuple[np.ndarray, ...]:
    """Rest offsets (J, 3) of the database's skeleton, and of its mirror image (x-plane,
    left and right swapped) when it holds mirrored clips and that differs."""
    return _offset_sets(tuple(db.joint_names), tuple(int(p) for p in db.parents),
                        np.asarray(db.offsets, np.float64).tobytes(), bool(db.mirror))


@lru_cache(maxsize=16)
def _offset_sets(names: tuple[str, ...], parents: tuple[int, ...], offsets: bytes, mirror: bool
                 ) -> tuple[np.ndarray, ...]:
    # cached by skeleton: rigid_pose runs every runtime and rollout step, the name-based
    # mirror map need not
    base = np.frombuffer(offsets, np.float64).reshape(len(names), 3)
    if not mirror:
        return (base,)
    mirrored = base[Skeleton(list(names), np.asarray(parents), base).mirror_map()] * np.array([-1.0, 1.0, 1.0])
    return (base,) if np.allclose(mirrored, base, atol=1e-6) else (base, mirrored)


def rigid_pose(db: Database, poses: Array) -> Array:
    """Raw pose vectors (..., P) of ``db``'s layout with the joint positions replaced by
    forward kinematics of their own 6D rotations over ``db``'s rest offsets, the hips (and
    roots) kept where the pose puts them. Rotations, velocities and root motion unchanged."""
    lay = {name: (a, b) for name, a, b in db.pose_layout}
    j = db.num_joints
    pa, pb = lay["joint_positions"]
    ra, rb = lay["joint_rotations_6d"]
    lead = tuple(poses.shape[:-1])
    pos = poses[..., pa:pb].reshape(lead + (j, 3))
    rot = quat.from_6d(poses[..., ra:rb].reshape(lead + (j, 6)))
    if not is_torch(poses):
        rot = rot.astype(np.float64)
        pos = pos.astype(np.float64)
    anchors = [db.roles["hips"]]
    fk = None
    for offsets in offset_sets(db):
        cand = positions_from_rotations(rot, pos, db.parents, offsets, anchors=anchors)
        if fk is None:
            fk, best = cand, ((cand - pos) ** 2).sum((-1, -2))
            continue
        err = ((cand - pos) ** 2).sum((-1, -2))
        nearer = (err < best)[..., None, None]
        fk = torch.where(nearer, cand, fk) if is_torch(cand) else np.where(nearer, cand, fk)
        best = torch.minimum(err, best) if is_torch(err) else np.minimum(err, best)
    if not is_torch(poses):
        fk = fk.astype(poses.dtype)
    return cat([poses[..., :pa], fk.reshape(lead + (3 * j,)), poses[..., pb:]], axis=-1)


def rigid_pose_normalised(db: Database, poses_n: torch.Tensor, mean: torch.Tensor, std: torch.Tensor
                          ) -> torch.Tensor:
    """:func:`rigid_pose` of normalised pose vectors (..., P) (``(raw - mean) / std``),
    returned normalised: the model-space form training and rollouts use (differentiable)."""
    return (rigid_pose(db, poses_n * std + mean) - mean) / std
