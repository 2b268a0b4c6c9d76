"""Where a retrieval controller loses to the frozen pose: the diagnostics behind
``benchmarks/results/retrieval_lafan1_seeds.md`` (section "Where the error comes from").

On the windows of ``kinema eval`` (32 context + 300 free-running frames every 120 rows),
with the checkpoint's own database rebuilt from its config:

- ``speed``: the first-2-s joint error of the controller and of the frozen pose by thirds of
  the true root speed, with the joint speed and the distance from the start pose of both;
- ``damping``: the controller with each predicted position and rotation pulled toward an
  exponential average of its own past inputs (``pose += g (anchor - pose)``, time constant
  T; no retraining), by horizon, with its joint speed: how joint error rewards hedging;
- ``mask``: only the first 1, 2 or 4 of the k candidates fed (the rest masked);
- ``shift``: every candidate's positions and rotations shifted by (a share of) the mean
  offset between the context's true poses and their teacher-forced candidates.

    .venv/bin/python benchmarks/diagnose_retrieval.py models/retrieval_lafan1.safetensors \\
        [--clip ../shared/data/lafan1/push1_subject2.bvh] [--only speed,damping,mask,shift]

Default clips: those of ``kinema eval`` (the checkpoint's test clips, else its validation clips).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from kinema.control.retrieval.evaluate import open_database, window_starts
from kinema.control.retrieval.metrics import joint_positions, joint_speed, mean_pose_distance_cm, pose_slice
from kinema.control.retrieval.rollout import rollout, teacher_forced_candidates
from kinema.control.retrieval.sequences import Retriever
from kinema.control.retrieval.training import build_clips, validation_clips
from kinema.features.normalisation import Normaliser
from kinema.nn.checkpoint import load_checkpoint

HORIZONS = (15, 30, 60, 120, 300)
CONTEXT, FRAMES, STRIDE = 32, 300, 120


class ShiftedRetriever(Retriever):
    """Payload poses shifted by ``offset`` (B, P) normalised (None: unshifted)."""

    offset: np.ndarray | None = None

    def payload(self, rows, cost):
        p = super().payload(rows, cost)
        if self.offset is not None:
            width = self.db.pose_width
            p[..., :width] += self.offset.reshape(self.offset.shape[:1] + (1,) * (p.ndim - 2) + (width,))
        return p


class Damped(torch.nn.Module):
    """The controller with its pose outputs pulled toward an average of its own inputs."""

    def __init__(self, model, gain: float, seconds: float, fps: float, columns: torch.Tensor):
        super().__init__()
        self.model, self.gain, self.beta, self.columns = model, gain, 1.0 / (seconds * fps), columns
        self.use_retrieval = model.use_retrieval

    def forward(self, control, pose, candidates=None, mask=None):
        self.anchor = pose[:, -1].clone()
        return self.model(control, pose, candidates, mask)

    def step(self, state, control, pose, candidates=None, mask=None):
        out, state = self.model.step(state, control, pose, candidates, mask)
        self.anchor = (1 - self.beta) * self.anchor + self.beta * pose
        damped = out["pose"] + self.gain * (self.anchor - out["pose"])
        return {**out, "pose": torch.where(self.columns, damped, out["pose"])}, state


class Masked(torch.nn.Module):
    """The controller fed only its first ``keep`` candidates."""

    def __init__(self, model, keep: int):
        super().__init__()
        self.model, self.keep, self.use_retrieval = model, keep, model.use_retrieval

    def forward(self, *args):
        return self.model(*args)

    def step(self, state, control, pose, candidates=None, mask=None):
        if candidates is not None:
            keep = torch.zeros(candidates.shape[:-1], dtype=torch.bool)
            keep[:, :self.keep] = True
            mask = keep if mask is None else mask.bool() & keep
        return self.model.step(state, control, pose, candidates, mask)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--clip", nargs="+", default=None)
    ap.add_argument("--only", default="speed,damping,mask,shift")
    args = ap.parse_args()
    model, meta = load_checkpoint(args.checkpoint)
    db = open_database(None, meta)
    norm = Normaliser.from_json(meta["normalisation"]["pose"])
    retriever = ShiftedRetriever.for_checkpoint(db, norm, meta)
    clips = args.clip or validation_clips(meta)
    source = build_clips([Path(c) for c in clips], db.config, False, like=db)
    starts = window_starts(source, CONTEXT + FRAMES + 1, STRIDE)
    own = db.clip_ids(source.clip_names)
    exclude = np.broadcast_to(own, (len(starts), len(own))) if len(own) else None
    frozen = joint_positions(db, source.pose[starts + CONTEXT - 1])[:, None]

    def run(m):
        with torch.no_grad():
            r = rollout(m, retriever, source, starts, CONTEXT, FRAMES, exclude=exclude)
        return joint_positions(db, norm.denormalise(r.pose.numpy())), joint_positions(db, source.pose[r.rows])

    def error(pred, true):  # (W, F) cm
        return np.linalg.norm(pred - true, axis=-1).mean(-1) * 100

    def speed(x):  # (W,) cm/s
        return joint_speed(x, db.fps)

    def row(name, pred, true):
        e = error(pred, true)
        print(f"{name:28}" + "".join(f"{e[:, :h].mean():8.2f}" for h in HORIZONS)
              + f"{speed(pred).mean():10.1f}{speed(true).mean():8.1f}")

    header = f"{'':28}" + "".join(f"{h:8d}" for h in HORIZONS) + f"{'speed':>10}{'truth':>8}"
    print(f"{len(starts)} windows of {', '.join(source.clip_names)}; joint error (cm) over the first N frames, "
          "joint speed (cm/s)")
    only = set(args.only.split(","))
    pred, true = run(model)
    if "speed" in only:
        root_v = np.linalg.norm(source.pose[starts[:, None] + CONTEXT + np.arange(FRAMES)]
                                [..., pose_slice(db, "root_velocity")][..., [0, 2]], axis=-1).mean(1)
        ec, ef = error(pred, true)[:, :120].mean(1), error(frozen, true)[:, :120].mean(1)
        drift = lambda x: error(x, frozen)[:, :120].mean(1)  # noqa: E731
        print("\nby root speed (first 2 s): windows, controller, frozen | joint speed controller, truth | "
              "distance from the start pose controller, truth")
        for part in np.array_split(np.argsort(root_v), 3):
            print(f"  {root_v[part].min():.2f}-{root_v[part].max():.2f} m/s: {len(part):3d} {ec[part].mean():7.2f} "
                  f"{ef[part].mean():7.2f} | {speed(pred)[part].mean():6.1f} {speed(true)[part].mean():6.1f} | "
                  f"{drift(pred)[part].mean():6.1f} {drift(true)[part].mean():6.1f}")
    if "damping" in only:
        cols = torch.zeros(db.pose_width, dtype=torch.bool)
        cols[pose_slice(db, "joint_positions")] = cols[pose_slice(db, "joint_rotations_6d")] = True
        print("\ndamping toward the average of the controller's own inputs\n" + header)
        row("shipped", pred, true)
        for g, t in ((0.05, 1.0), (0.05, 2.0), (0.1, 1.0), (0.2, 1.0), (0.2, 3.0), (0.3, 3.0)):
            row(f"g {g}, T {t} s", *run(Damped(model, g, t, db.fps, cols)))
        row("frozen pose", np.broadcast_to(frozen, true.shape), true)
    if "mask" in only:
        print("\nonly the first candidates fed\n" + header)
        for keep in (4, 2, 1):
            row(f"{keep} of {retriever.k}", *run(Masked(model, keep)))
    if "shift" in only:
        ctx = starts[:, None] + np.arange(CONTEXT)[None]
        cands = teacher_forced_candidates(retriever, source, ctx, exclude, None)[..., :db.pose_width]
        cols = np.zeros(db.pose_width, np.float32)
        cols[pose_slice(db, "joint_positions")] = cols[pose_slice(db, "joint_rotations_6d")] = 1.0
        offset = (norm.normalise(source.pose[ctx])[:, :, None] - cands).mean((1, 2)) * cols
        print("\ncandidates shifted by the context's posture offset (last column: collapse toward the "
              "training mean pose, cm)\n" + header)
        for share in (0.0, 0.5, 1.0):
            retriever.offset = (share * offset).astype(np.float32)
            p, t = run(model)
            collapse = (mean_pose_distance_cm(db, norm, t) - mean_pose_distance_cm(db, norm, p)).mean()
            row(f"shift x{share} (collapse {collapse:.1f})", p, t)
        retriever.offset = None


if __name__ == "__main__":
    main()
