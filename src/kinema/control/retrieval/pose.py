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

The hips translation is predicted freely, so rigid bones alone do not keep a body above
the floor: a free-running model can let its hips drift down until the legs, still their
rest length, pass through the ground (the LaFAN1 crowd had one character's feet 2.3 m
under it within 10 s). With ``ground`` (:func:`ground_height`: the lowest a toe reaches in
the database's rows) :func:`rigid_pose` lifts every pose whose lowest body joint lies below
it by the difference: no foot of a predicted pose goes lower than the data's feet do.
With ``reach`` (:func:`hips_reach`: the farthest the data's hips stray horizontally from the
root) the hips are likewise pulled back toward the root: session 28's LaFAN1 twin, started
from a lying pose, let its root-space hips drift sideways, the velocities rebuilt from that
drift fed it, and the hips were 1e10 m from the root after 5 s.

A 6D rotation decodes the same whatever the scale of its first column and the part of its
second along the first (:mod:`kinema.maths.sixd`), so nothing ties the raw 6D a network
predicts to the unit, orthogonal columns of the data's rows. A model that predicts each
pose as a change of the last (``model.kinematic``) and is fed its own output back lets that
unseen part drift: the session-20 LaFAN1 network's 6D columns grew linearly while it stood,
its inputs 250 standard deviations outside the data after two minutes, and after about
100 s it lifted off (`benchmarks/diagnose_long_idle.py`). With ``unit`` :func:`rigid_pose`
also replaces every 6D by that of the rotation it encodes (Gram-Schmidt), so the pose fed
back is, like every row of the data, a rotation and its positions.

The joint velocities are a third part nothing ties down: predicted beside the positions,
fed back, and read by the one-step kinematic prior (:mod:`kinema.nn.kinematic`), they
can drift while the rigid positions stay put (the session-25 twin's reached 89 standard
deviations outside the data after a minute standing, then diverged). With ``prev`` (the
pose drawn one frame before) :func:`rigid_pose` replaces them by the joints' own motion
from that pose (:func:`joint_steps` times the frame rate): a backward difference, where
the data's rows hold central ones (:func:`kinema.features.root.finite_difference`), so
they lag the data's by half a frame.
"""
from __future__ import annotations

import numpy as np
import torch

from kinema.control.retrieval.metrics import body_joints, joint_positions
from kinema.matching.database import Database, offset_sets
from kinema.maths import quat, sixd
from kinema.maths.backend import Array, cat, is_torch
from kinema.motion.kinematics import positions_from_rotations


def ground_height(db: Database) -> float:
    """The lowest root-space height (m) a toe reaches in the database's rows: the floor as
    the feet know it (LaFAN1 -3.2 cm, Bandai-Namco +3.8 cm: its toe joints sit above the
    sole), which :func:`rigid_pose` keeps every body joint of a predicted pose above. The
    data's own lying poses reach lower with other joints (LaFAN1's hands and spine, to
    -10 cm), so those rows are lifted by a few centimetres; every row on its feet is kept."""
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    y = joint_positions(db, db.pose)[:, toes, 1]
    return float(y.min())


def hips_reach(db: Database) -> float:
    """The farthest (m) the hips stray horizontally from the root in the database's rows, in
    root space (LaFAN1 0.33 m, its root a smoothed path under the hips; Bandai-Namco 2 cm):
    how far :func:`rigid_pose` lets a predicted pose's hips stray."""
    hips = joint_positions(db, db.pose)[:, db.roles["hips"]]
    return float(np.hypot(hips[:, 0], hips[:, 2]).max())


def joint_steps(db: Database, prev: Array, new: Array) -> Array:
    """World displacement (..., J, 3) in metres of every joint over one frame, from raw pose
    vectors ``prev`` to ``new`` (..., P), in ``new``'s root space. The root moves as
    :func:`kinema.control.retrieval.rollout.integrate_root` moves it (turn by ``new``'s yaw
    rate, then step by its root velocity), so a joint moves by
    ``p_new + u_new / fps - R(-w_new / fps) p_prev``."""
    lay = {name: (a, b) for name, a, b in db.pose_layout}
    lead = tuple(new.shape[:-1])
    pa, pb = lay["joint_positions"]
    p_new = new[..., pa:pb].reshape(lead + (db.num_joints, 3))
    p_old = prev[..., pa:pb].reshape(lead + (db.num_joints, 3))
    u = lay["root_velocity"][0]
    w = lay["root_angular_velocity"][0] + 1
    turn = new[..., w:w + 1] / db.fps                                    # (..., 1)
    lib = torch if is_torch(new) else np
    c, s = lib.cos(turn), lib.sin(turn)
    px, py, pz = p_old[..., 0], p_old[..., 1], p_old[..., 2]
    moved = lib.stack([c * px - s * pz, py, s * px + c * pz], -1)
    return p_new + new[..., None, u:u + 3] / db.fps - moved


def rigid_pose(db: Database, poses: Array, ground: float | None = None, unit: bool = False,
               prev: Array | None = None, reach: float | None = None) -> Array:
    """Raw pose vectors (..., P) of ``db``'s layout with the joint positions replaced by
    forward kinematics of their own 6D rotations over ``db``'s rest offsets, the hips (and
    roots) kept where the pose puts them. Velocities and root motion unchanged.

    ``ground`` (m, :func:`ground_height` of ``db``): a pose whose lowest body joint lies
    below it is lifted (every body joint, by the same height) until it touches it; None
    leaves the heights as predicted. ``unit``: the 6D rotations (..., J, 6) are replaced by
    their Gram-Schmidt frames' two columns (the rotation each encodes, in the data's form);
    False keeps them as predicted. ``prev`` (..., P): the raw pose drawn one frame before;
    the joint velocities are then the rebuilt joints' motion from it (:func:`joint_steps`
    times the frame rate); None keeps them as predicted. ``reach`` (m, :func:`hips_reach`):
    a pose whose hips lie farther from the root's vertical axis is moved back horizontally
    (every body joint, by the same step) until they lie at it; None leaves them."""
    lay = {name: (a, b) for name, a, b in db.pose_layout}
    j = db.num_joints
    pa, pb = lay["joint_positions"]
    ra, rb = lay["joint_rotations_6d"]
    lead = tuple(poses.shape[:-1])
    pos = poses[..., pa:pb].reshape(lead + (j, 3))
    frames = sixd.to_matrix(poses[..., ra:rb].reshape(lead + (j, 6)))   # Gram-Schmidt, once for both uses
    rot = quat.from_matrix(frames)
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
    if reach is not None:
        fk = _within_reach(db, fk, reach)
    if ground is not None:
        body = body_joints(db)
        up = np.zeros((db.num_joints, 3))
        up[body, 1] = 1.0
        if is_torch(fk):
            low = fk[..., torch.as_tensor(np.flatnonzero(body), device=fk.device), 1].amin(-1)
            lift = (ground - low).clamp(min=0.0)
            up = torch.as_tensor(up, dtype=fk.dtype, device=fk.device)
        else:
            lift = np.maximum(ground - fk[..., body, 1].min(-1), 0.0)
        fk = fk + lift[..., None, None] * up
    if not is_torch(poses):
        fk = fk.astype(poses.dtype)
    # pose_layout puts the positions before the rotations
    six = sixd.from_matrix(frames).reshape(lead + (6 * j,)) if unit else poses[..., ra:rb]
    parts = [poses[..., :pa], fk.reshape(lead + (3 * j,)), poses[..., pb:ra], six, poses[..., rb:]]
    out = cat(parts, axis=-1)
    if prev is None:
        return out
    va, vb = lay["joint_velocities"]
    vel = (joint_steps(db, prev, out) * db.fps).reshape(lead + (3 * j,))
    if not is_torch(out):
        vel = vel.astype(out.dtype)
    return cat([out[..., :va], vel, out[..., vb:]], axis=-1)


def _within_reach(db: Database, fk: Array, reach: float) -> Array:
    """Joint positions (..., J, 3) with every body joint moved horizontally, by the same
    step, until the hips lie within ``reach`` (m) of the root's vertical axis."""
    h = db.roles["hips"]
    flat = np.zeros((db.num_joints, 3))
    flat[body_joints(db)] = [1.0, 0.0, 1.0]
    hips = fk[..., h, :]
    if is_torch(fk):
        r = torch.sqrt(hips[..., 0] ** 2 + hips[..., 2] ** 2)
        pull = 1.0 - reach / r.clamp(min=reach)                              # 0 within reach
        flat = torch.as_tensor(flat, dtype=fk.dtype, device=fk.device)
    else:
        r = np.hypot(hips[..., 0], hips[..., 2])
        pull = 1.0 - reach / np.maximum(r, reach)
    return fk - (pull[..., None] * hips)[..., None, :] * flat


def rigid_pose_normalised(db: Database, poses_n: torch.Tensor, mean: torch.Tensor, std: torch.Tensor,
                          ground: float | None = None, unit: bool = False,
                          prev_n: torch.Tensor | None = None, reach: float | None = None) -> torch.Tensor:
    """:func:`rigid_pose` of normalised pose vectors (..., P) (``(raw - mean) / std``; the
    same for ``prev_n``), returned normalised: the model-space form training and rollouts
    use (differentiable)."""
    prev = None if prev_n is None else prev_n * std + mean
    return (rigid_pose(db, poses_n * std + mean, ground, unit, prev, reach) - mean) / std
