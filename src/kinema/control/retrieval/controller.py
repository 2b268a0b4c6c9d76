"""Runtime character controller around a retrieval checkpoint (one character, per frame).

Three modes share one character state (pose vector, root on the floor) so they can be
switched live:

- ``"retrieval"``: the retrieval-augmented Mamba, candidates searched every ``refresh``
  frames from the character's own pose and the joystick, advanced one row per frame;
- ``"no_retrieval"``: a model trained without retrieval when one is given, else the same
  model fed only its learned null token;
- ``"matching"``: motion-matching playback from the same database (search every
  ``refresh`` frames, play the best row's successors).

The joystick is the 12-d trajectory request relative to the character's root
(:meth:`kinema.control.trajectory.Prediction.features` gives it from a gamepad).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kinema.control.retrieval.metrics import joint_positions
from kinema.control.retrieval.pose import rigid_pose
from kinema.control.retrieval.rollout import CandidateStream, integrate_root, query, root_motion
from kinema.control.retrieval.sequences import PoseNormaliser, Retriever
from kinema.errors import KinemaError
from kinema.features.root import yaw_rotate
from kinema.matching.database import Database, pose_layout
from kinema.maths import quat
from kinema.nn.checkpoint import load_checkpoint

MODES = ("retrieval", "no_retrieval", "matching")
ADJUST_HALFLIFE = 0.2   # s, position and facing pulled toward the simulation object
ADJUST_CLAMP = 0.5      # m, the root never lags the simulation object by more


def pose_to_world(pose: np.ndarray, num_joints: int, root_position, root_direction
                  ) -> tuple[np.ndarray, np.ndarray]:
    """World (rotations (J, 4) w,x,y,z, positions (J, 3) metres) of a database pose vector
    (P,) (root-space layout of :func:`kinema.matching.database.pose_layout`) placed at the
    root ``root_position`` (3,) facing the floor direction ``root_direction`` (3,)."""
    layout = {name: (a, b) for name, a, b in pose_layout(num_joints)}
    a, b = layout["joint_rotations_6d"]
    local = quat.from_6d(np.asarray(pose[a:b], np.float64).reshape(-1, 6))
    a, b = layout["joint_positions"]
    d = np.asarray(root_direction, np.float64)
    yaw = np.arctan2(d[0], d[2])
    ry = np.array([np.cos(yaw / 2), 0.0, np.sin(yaw / 2), 0.0])
    pos = quat.rotate(ry, np.asarray(pose[a:b], np.float64).reshape(-1, 3)) + np.asarray(root_position, np.float64)
    return quat.mul(ry, local).astype(np.float32), pos.astype(np.float32)


class RetrievalController:
    """Drive one character with a retrieval checkpoint (see the module docstring).

    Args:
        checkpoint: path of a RetrievalMamba checkpoint trained with retrieval.
        db: its database (fingerprint checked).
        baseline: optional checkpoint trained without retrieval (same database).
        start_row: database row whose pose starts the character (default: first row).
        rigid: rebuild the joint positions of every predicted pose from its rotations
            (:func:`kinema.control.retrieval.pose.rigid_pose`): no drawn pose can stretch a
            bone (False: draw the network's positions as predicted).
    """

    def __init__(self, checkpoint: str | Path, db: Database, baseline: str | Path | None = None,
                 start_row: int = 0, mode: str = "retrieval", rigid: bool = True):
        self.model, meta = load_checkpoint(checkpoint)
        if meta.get("fingerprint") != db.fingerprint:
            raise KinemaError(f"{checkpoint}: trained on database {meta.get('fingerprint')}, got {db.fingerprint}")
        self.base = None
        if baseline is not None:
            self.base, bmeta = load_checkpoint(baseline)
            if bmeta.get("fingerprint") != db.fingerprint:
                raise KinemaError(f"{baseline}: trained on database {bmeta.get('fingerprint')}, got {db.fingerprint}")
        self.db = db
        self.norm = PoseNormaliser.from_json(meta["normalisation"]["pose"])
        self.retriever = Retriever.for_checkpoint(db, self.norm, meta)
        self.mode = mode
        self.rigid = rigid
        self.reset(start_row)

    def reset(self, row: int = 0, position=(0.0, 0.0, 0.0), direction=(0.0, 0.0, 1.0)) -> None:
        """Put the character in database row ``row``'s pose at a root on the floor."""
        self.pose = self.db.pose[row].copy()
        self.root_pos = np.array([position], np.float32)
        self.root_dir = np.array([direction], np.float32)
        self.state = self.model.initial_state(1)
        self.base_state = None if self.base is None else self.base.initial_state(1)
        self.stream = CandidateStream(self.retriever, None, None)
        self.frame = 0
        self.played = None
        self.contacts = np.zeros(2, np.float32)

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise KinemaError(f"unknown controller mode {mode!r}; choose from {MODES}")
        self.mode = mode
        self.played = None

    @torch.no_grad()
    def step(self, control: np.ndarray) -> np.ndarray:
        """Advance one frame (1/60 s) with the joystick ``control`` (12,); returns the raw
        pose vector (P,)."""
        ctrl = np.asarray(control, np.float32).reshape(1, 12)
        pose_n = torch.as_tensor(self.norm.normalise(self.pose[None]))
        c = torch.as_tensor(ctrl)
        _, cand = self.stream(self.frame, self.pose[None], ctrl)
        out, self.state = self.model.step(self.state, c, pose_n, torch.as_tensor(cand) if self.mode == "retrieval" else None)
        if self.base is not None:
            bout, self.base_state = self.base.step(self.base_state, c, pose_n)
        if self.mode == "matching":
            if self.played is None or self.frame % self.retriever.refresh == 0:
                idx, _ = self.db.search(query(self.retriever, self.pose[None], ctrl), 1)
                self.played, self.since = int(idx[0, 0]), 0
            self.since += 1
            row = int(self.db.successor(np.array([self.played]), self.since)[0])
            new = self.db.pose[row].copy()
            self.contacts = self.db.contacts[row].astype(np.float32)
        else:
            o = bout if (self.mode == "no_retrieval" and self.base is not None) else out
            new = self.norm.denormalise(o["pose"].numpy())[0]
            if self.rigid:
                new = rigid_pose(self.db, new)
            self.contacts = (torch.sigmoid(o["contact_logits"])[0].numpy() > 0.5).astype(np.float32)
        if not np.all(np.isfinite(new)):
            raise KinemaError(f"the {self.mode} controller produced a non-finite pose at frame {self.frame}")
        self.pose = new
        self.root_pos, self.root_dir = integrate_root(self.root_pos, self.root_dir, root_motion(self.db, new[None]),
                                                      self.db.fps)
        self.frame += 1
        return new

    def adjust_toward(self, position: np.ndarray, direction: np.ndarray, dt: float) -> None:
        """Motion Matching's adjustment and clamping (NOTES.md 1.5): the character's root
        moves toward the simulation object at ``position`` (3,) with a damper of
        ADJUST_HALFLIFE and never lags it by more than ADJUST_CLAMP; its facing turns toward
        ``direction`` (3,) the same way."""
        a = 1.0 - 0.5 ** (dt / ADJUST_HALFLIFE)
        goal = np.asarray(position, np.float32) * [1, 0, 1]
        pos = self.root_pos[0] + a * (goal - self.root_pos[0])
        off = pos - goal
        dist = float(np.linalg.norm(off))
        if dist > ADJUST_CLAMP:
            pos = pos - off * (1 - ADJUST_CLAMP / dist)
        yaw = np.arctan2(self.root_dir[0, 0], self.root_dir[0, 2])
        want = np.arctan2(direction[0], direction[2])
        yaw += a * ((want - yaw + np.pi) % (2 * np.pi) - np.pi)
        self.root_pos[0] = pos.astype(np.float32)
        self.root_dir[0] = np.array([np.sin(yaw), 0.0, np.cos(yaw)], np.float32)

    def world_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World pose (rotations (J, 4), positions (J, 3)) of the current pose vector."""
        return pose_to_world(self.pose, self.db.num_joints, self.root_pos[0], self.root_dir[0])

    def joint_positions(self) -> np.ndarray:
        """World joint positions (J, 3) of the current pose."""
        return yaw_rotate(self.root_dir[0], joint_positions(self.db, self.pose)) + self.root_pos[0]

    @property
    def root(self) -> tuple[np.ndarray, np.ndarray]:
        """Root position and facing direction (3,), (3,)."""
        return self.root_pos[0].copy(), self.root_dir[0].copy()
