"""Three-point tracking: the full body from the head and both wrists (as a VR headset and two
controllers give them), learned from real biped mocap.

Frames of reference: every quantity is expressed in the *head root* of the current frame:
the head projected on the floor, turned about +Y to the head's facing (the head's local
``facing_axis``, measured from the data so that it agrees on average with the body's hip and
shoulder facing). Only the tracked points are needed to build it, so the same frame works at
run time.

- Input (``HISTORY`` frames back, now first): per tracked point its position (3) and
  rotation (6D, 6) in the current head root: ``len(HISTORY) * 3 * 9`` numbers.
- Output: the hips position (3) and every joint's world rotation in the head root (6D,
  ``J * 6``). Poses are rebuilt by forward kinematics on the performer's skeleton (bone
  lengths are known, as after a calibration step), so bones never stretch.

The model is :class:`kinema.nn.MLP` (normalisation inside); checkpoints are safetensors with
the joint names, tracked joints, history and facing axis in the metadata.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import kinema.io
from kinema.errors import KinemaError
from kinema.features.root import (
    Root,
    RootConfig,
    compute_root,
    from_root_space,
    rotations_from_root_space,
    rotations_to_root_space,
    to_root_space,
)
from kinema.ik.pose import solve_pose
from kinema.maths import quat
from kinema.motion import kinematics

TRACKED = ("Head", "LeftHand", "RightHand")
HISTORY = (0, 1, 2, 4, 8, 16)           # frames back at 30 fps: now .. 0.53 s ago
FPS = 30.0
TRAIN_CLIPS = ("walk4_subject1", "obstacles1_subject1", "obstacles1_subject2", "obstacles3_subject3",
               "multipleActions1_subject1", "push1_subject2")
HELD_OUT_CLIPS = ("multipleActions1_subject2",)


def default_checkpoint() -> Path:
    """``models/tracking_lafan1.safetensors`` in the source checkout."""
    return Path(__file__).resolve().parents[3] / "models" / "tracking_lafan1.safetensors"


def head_root(g_rot: np.ndarray, g_pos: np.ndarray, head: int, facing_axis) -> Root:
    """The head root (F frames) from world rotations (F, J, 4) and positions (F, J, 3)."""
    cfg = RootConfig(position_joint=head, facing="axis", facing_joint=head,
                     facing_axis=tuple(float(a) for a in facing_axis), smoothing="none")
    return compute_root(g_pos, g_rot, None, cfg)


def fit_facing_axis(motions, head_name: str = "Head") -> np.ndarray:
    """The head's local axis (3,) that points, on average, where the body faces (hip and
    shoulder lines, :meth:`RootConfig.guess`), projected to unit length."""
    acc = np.zeros(3)
    for m in motions:
        g_rot, g_pos = m.global_transforms()
        body = compute_root(g_pos, g_rot, m.skeleton, RootConfig.guess(m.skeleton, smoothing="none"))
        h = g_rot[:, m.skeleton.index(head_name)].astype(np.float64)
        acc += quat.inv_rotate(h, body.directions.astype(np.float64)).sum(0)
    return (acc / np.linalg.norm(acc)).astype(np.float32)


def _history_index(num_frames: int, start: int) -> np.ndarray:
    """(N, H) frame indices of the history of frames ``start .. num_frames-1``."""
    now = np.arange(start, num_frames)
    return now[:, None] - np.asarray(HISTORY)[None, :]


def tracker_inputs(g_rot: np.ndarray, g_pos: np.ndarray, tracked: np.ndarray, root: Root, start: int) -> np.ndarray:
    """(N, H * T * 9) float32 inputs of frames ``start..F-1``: tracked points of the history in
    each current frame's head root (position, 6D rotation)."""
    idx = _history_index(g_pos.shape[0], start)                    # (N, H)
    p = g_pos[:, tracked][idx]                                    # (N, H, T, 3)
    r = g_rot[:, tracked][idx]                                    # (N, H, T, 4)
    now = root[start:]
    p = to_root_space(now, p.reshape(len(idx), -1, 3)).reshape(p.shape)
    r = rotations_to_root_space(now, r.reshape(len(idx), -1, 4)).reshape(r.shape)
    six = quat.to_6d(r.astype(np.float64))
    return np.concatenate([p, six], -1).reshape(len(idx), -1).astype(np.float32)


def tracker_outputs(g_rot: np.ndarray, g_pos: np.ndarray, root: Root, start: int) -> np.ndarray:
    """(N, 3 + J * 6) float32 targets: hips position and all world rotations in the head root."""
    now = root[start:]
    hips = to_root_space(now, g_pos[start:, 0])
    rot = rotations_to_root_space(now, g_rot[start:])
    return np.concatenate([hips, quat.to_6d(rot.astype(np.float64)).reshape(len(hips), -1)], -1).astype(np.float32)


def decode(outputs: np.ndarray, root: Root, skeleton, root_offsets: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Network outputs (N, 3 + J * 6) in head roots (N frames) -> world (rotations (N, J, 4),
    positions (N, J, 3)) by forward kinematics on ``skeleton``'s bone offsets."""
    n, j = outputs.shape[0], skeleton.num_joints
    hips = from_root_space(root, outputs[:, :3].astype(np.float64))
    g = quat.from_6d(outputs[:, 3:].reshape(n, j, 6).astype(np.float64))
    g = quat.normalize(rotations_from_root_space(root, g))
    parents = np.asarray(skeleton.parents)
    local = g.copy()
    child = np.nonzero(parents >= 0)[0]
    local[:, child] = quat.mul(quat.inv(g[:, parents[child]]), g[:, child])
    pos = np.broadcast_to(np.asarray(skeleton.offsets, np.float64), (n, j, 3)).copy()
    pos[:, 0] = hips
    return kinematics.forward(local, pos, parents)


def fit_to_tracked(rot: np.ndarray, pos: np.ndarray, tracked_pos: np.ndarray, tracked_rot: np.ndarray, skeleton,
                   tracked_names=TRACKED) -> tuple[np.ndarray, np.ndarray]:
    """Use what is known exactly: translate each predicted pose (N, J, ...) so its head is on
    the tracked head, then solve each arm (upper arm -> forearm -> hand, FABRIK) so the hands
    reach the tracked wrists with their tracked rotations. ``tracked_*``: (N, 3, ...)
    in ``tracked_names`` order (head first)."""
    head = skeleton.index(tracked_names[0])
    pos = pos + (tracked_pos[:, :1] - pos[:, head:head + 1])
    parents = np.asarray(skeleton.parents)
    for k, name in enumerate(tracked_names[1:], start=1):
        hand = skeleton.index(name)
        upper = int(parents[parents[hand]])
        res = solve_pose(rot, pos, parents, upper, {hand: tracked_pos[:, k]},
                         target_rotations={hand: tracked_rot[:, k]}, max_iterations=10)
        rot, pos = res.rotations, res.positions
    return rot, pos


@dataclass
class Windows:
    """Training pairs from a set of motions: inputs (N, I), outputs (N, O), clip id (N,)."""

    inputs: np.ndarray
    outputs: np.ndarray
    clip: np.ndarray


def make_windows(motions, facing_axis, tracked_names=TRACKED) -> Windows:
    """Inputs and targets of every frame with a full history, of every motion (30 fps)."""
    xs, ys, ids = [], [], []
    start = max(HISTORY)
    for i, m in enumerate(motions):
        m = m.at_fps(FPS)
        tracked = np.array([m.skeleton.index(n) for n in tracked_names])
        g_rot, g_pos = m.global_transforms()
        root = head_root(g_rot, g_pos, tracked[0], facing_axis)
        xs.append(tracker_inputs(g_rot, g_pos, tracked, root, start))
        ys.append(tracker_outputs(g_rot, g_pos, root, start))
        ids.append(np.full(len(xs[-1]), i))
    return Windows(np.concatenate(xs), np.concatenate(ys), np.concatenate(ids))


def load_clips(names, root_dir: Path, mirror: bool = False) -> list:
    """LaFAN1 takes by name (and their mirrors when asked)."""
    out = []
    for name in names:
        path = Path(root_dir) / f"{name}.bvh"
        if not path.exists():
            raise KinemaError(f"{path}: LaFAN1 take not found")
        m = kinema.io.load(path)
        out.append(m)
        if mirror:
            out.append(m.mirror())
    return out


class Tracker:
    """A trained three-point tracker: ``Tracker.load(path).predict(motion)``."""

    def __init__(self, model, meta: dict) -> None:
        self.model = model
        extra = meta.get("tracking") or {}
        self.joint_names = list(extra["joint_names"])
        self.tracked_names = tuple(extra["tracked"])
        self.facing_axis = np.asarray(extra["facing_axis"], np.float32)
        if tuple(extra["history"]) != HISTORY:
            raise KinemaError(f"tracker checkpoint history {extra['history']} != this code's {HISTORY}")
        self.meta = meta

    @classmethod
    def load(cls, path: str | Path) -> Tracker:
        from kinema.nn.checkpoint import load_checkpoint
        path = Path(path)
        if not path.exists():
            raise KinemaError(f"{path}: no tracker checkpoint (train one: kinema demo tracking --train)")
        model, meta = load_checkpoint(path)
        if "tracking" not in meta:
            raise KinemaError(f"{path}: not a three-point tracking checkpoint")
        return cls(model, meta)

    def predict(self, motion, mean_pose: bool = False, fit: bool = True) -> dict:
        """Reconstruct ``motion`` from its tracked points (frames with a full history).

        ``mean_pose`` replaces the network by its output mean (the baseline a model must beat).
        ``fit`` moves the body so its head sits on the tracked head and bends both arms
        onto the tracked wrists (:func:`fit_to_tracked`).
        Returns ``start`` (first predicted frame), ``rotations``/``positions`` (N, J, ...)
        world predictions, ``truth`` (N, J, 3) and ``tracked`` (N, T, 3) world positions."""
        import torch
        if motion.joint_names != self.joint_names:
            raise KinemaError(f"{motion.name}: joints differ from the tracker's ({len(self.joint_names)} LaFAN1 joints)")
        m = motion.at_fps(FPS)
        tracked = np.array([m.skeleton.index(n) for n in self.tracked_names])
        g_rot, g_pos = m.global_transforms()
        root = head_root(g_rot, g_pos, tracked[0], self.facing_axis)
        start = max(HISTORY)
        x = tracker_inputs(g_rot, g_pos, tracked, root, start)
        if mean_pose:
            y = np.broadcast_to(self.model.output_norm.mean.numpy(), (len(x), self.model.output_norm.dim))
        else:
            with torch.no_grad():
                y = self.model(torch.from_numpy(x)).numpy()
        rot, pos = decode(y, root[start:], m.skeleton)
        if fit:
            rot, pos = fit_to_tracked(rot, pos, g_pos[start:, tracked], g_rot[start:, tracked], m.skeleton,
                                      self.tracked_names)
        return {"start": start, "rotations": rot.astype(np.float32), "positions": pos.astype(np.float32),
                "truth": g_pos[start:].astype(np.float32), "tracked": g_pos[start:, tracked].astype(np.float32),
                "motion": m}


def errors(result: dict) -> dict:
    """Per-frame and mean errors (metres) of a :meth:`Tracker.predict` result."""
    d = np.linalg.norm(result["positions"] - result["truth"], axis=-1)          # (N, J)
    return {"mpjpe_m": float(d.mean()), "per_frame_m": d.mean(1), "per_joint_m": d.mean(0),
            "max_joint_m": float(d.max())}


def train(data_root: Path, out: Path, epochs: int = 30, hidden: int = 512, seed: int = 0, dropout: float = 0.2,
          progress: bool = True) -> dict:
    """Train the tracker on LaFAN1 ``TRAIN_CLIPS`` (+ mirrors), validate on ``HELD_OUT_CLIPS``,
    write the checkpoint to ``out``; returns the training history."""
    import torch

    from kinema.nn.checkpoint import save_checkpoint
    from kinema.nn.models import MLP
    from kinema.nn.train import TrainConfig, Trainer, seed_everything

    seed_everything(seed)
    motions = load_clips(TRAIN_CLIPS, data_root, mirror=True)
    axis = fit_facing_axis(motions[::2])
    tr = make_windows(motions, axis)
    va = make_windows(load_clips(HELD_OUT_CLIPS, data_root), axis)
    model = MLP(tr.inputs.shape[1], tr.outputs.shape[1], hidden=(hidden, hidden), activation="elu", dropout=dropout)
    x, y = torch.from_numpy(tr.inputs), torch.from_numpy(tr.outputs)
    model.input_norm.fit(x)
    model.output_norm.fit(y)
    cfg = TrainConfig(epochs=epochs, batch_size=256, lr=1e-3, weight_decay=1e-4, restart_epochs=epochs,
                      seed=seed, progress=progress)
    trainer = Trainer(model, (x, y), (torch.from_numpy(va.inputs), torch.from_numpy(va.outputs)), cfg)
    history = trainer.fit()
    meta = {"tracking": {"joint_names": list(motions[0].joint_names), "tracked": list(TRACKED),
                         "history": list(HISTORY), "facing_axis": [float(a) for a in axis],
                         "train_clips": list(TRAIN_CLIPS), "held_out_clips": list(HELD_OUT_CLIPS),
                         "fps": FPS, "samples": int(len(x))},
            "config": {"epochs": epochs, "hidden": hidden, "seed": seed, "dropout": dropout, "batch_size": 256, "lr": 1e-3}}
    save_checkpoint(out, model.eval(), **meta)
    return history
