"""``kinema demo tracking``: the full body from three tracked points (head and both wrists,
as a VR headset and two controllers give them).

The tracked points are replayed from a held-out LaFAN1 take (never seen in training); a
small MLP (``models/tracking_lafan1.safetensors``, :mod:`kinema.control.tracking`)
reconstructs every joint. The window shows the prediction (the skinned LaFAN1 character
from the data folder, else the bundled Geno retargeted) with the tracked points as red spheres, the ground truth
1.2 m to its right (green), and the error. Headless (``--headless --frames N --out DIR``)
writes ``metrics.json`` (mean per-joint position error of the model and of a mean-pose
baseline, per joint, tracked points) and ``tracking.mp4`` when an OpenGL context exists.

Train the shipped checkpoint again (2-4 min on one CPU core)::

    nice kinema demo tracking --train --epochs 30 --checkpoint models/tracking_lafan1.safetensors
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import kinema.io
from kinema.control import tracking as tp
from kinema.data import optional_path, require_path, sample_path
from kinema.motion import Motion
from kinema.retargeting import character_pose, fit
from kinema.serve import ServedClip

DESCRIPTION = "three-point tracking: full body from head + wrists (held-out LaFAN1, learned MLP)"
OUT, FRAMES, FPS = "out/demo_tracking", 300, tp.FPS
SIDE = np.array([1.2, 0.0, 0.0], np.float32)   # ground truth is drawn this far to the side


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="tracker checkpoint (default models/tracking_lafan1.safetensors)")
    parser.add_argument("--clip", default=tp.HELD_OUT_CLIPS[0],
                        help="LaFAN1 take name or BVH path whose head/wrists are replayed (default: held out)")
    parser.add_argument("--start", type=int, default=0, help="first frame of the clip to replay")
    parser.add_argument("--train", action="store_true", help="train the checkpoint instead of running the demo")
    parser.add_argument("--epochs", type=int, default=30, help="--train: epochs")
    parser.add_argument("--seed", type=int, default=0, help="--train: random seed")
    parser.add_argument("--dropout", type=float, default=0.2, help="--train: dropout after each hidden block")
    parser.add_argument("--threads", type=int, default=1, help="--train: torch CPU threads")


def _clip_path(clip: str) -> Path:
    p = Path(clip)
    if p.suffix.lower() == ".bvh" and p.exists():
        return p
    return require_path("lafan1", f"{clip}.bvh", what=f"the LaFAN1 take {clip!r}")


def reconstruct(args: argparse.Namespace) -> dict:
    """Load the tracker and the replayed clip; predict every frame; errors of model and baseline."""
    tracker = tp.Tracker.load(args.checkpoint or tp.default_checkpoint())
    motion = kinema.io.load(_clip_path(args.clip))
    motion = motion[max(0, args.start):]
    result = tracker.predict(motion)
    result["baseline"] = tp.errors(tracker.predict(motion, mean_pose=True))
    result["errors"] = tp.errors(result)
    result["tracker"] = tracker
    return result


class TrackingProgram:
    """Replays the reconstruction frame by frame; draws prediction, tracked points, truth."""

    def __init__(self, result: dict, character=None, clip: str = "", checkpoint: str = "") -> None:
        self.r, self.character, self.clip, self.checkpoint = result, character, clip, checkpoint
        self.frame = 0
        self.view = None   # the camera framing prediction and truth (first drawn frame)
        self.errors: list[float] = []
        self.parents = np.asarray(result["motion"].parents)
        if character is not None:   # retargeted when the character's skeleton is not LaFAN1's
            m = Motion.from_global(result["motion"].skeleton, tp.FPS, result["rotations"], result["positions"])
            self.char_pose = character_pose(character, fit(m, character))

    def start(self, app) -> None:
        self.app = app

    def update(self, dt: float) -> None:
        n = len(self.r["positions"])
        self.frame = (self.frame + 1) % n
        self.errors.append(float(self.r["errors"]["per_frame_m"][self.frame]))

    def draw(self, renderer) -> None:
        f = self.frame
        if self.character is not None:
            renderer.draw_character(self.character, self.char_pose[0][f], self.char_pose[1][f])
        else:
            renderer.draw_body(self.r["positions"][f], self.parents, color=(0.9, 0.6, 0.3, 1.0))
        renderer.draw_body(self.r["truth"][f] + SIDE, self.parents, color=(0.35, 0.75, 0.4, 1.0))
        renderer.draw_sphere(self.r["tracked"][f], 0.06, (0.95, 0.15, 0.15, 1.0))
        renderer.draw_sphere(self.r["tracked"][f] + SIDE, 0.06, (0.95, 0.15, 0.15, 1.0))
        from kinema.render.camera import frame_subject  # a renderer exists: raylib is there
        self.view = frame_subject(renderer, self.view, self.r["positions"][f], self.r["truth"][f] + SIDE,
                                  yaw=float(np.arctan2(0.3, 3.6)), pitch=0.2)

    def gui(self, ui) -> None:
        e = self.r["errors"]
        # top left like every demo's panel, three rows: clear of the two figures the camera centres
        ui.lines("three-point tracking", [
            f"frame {self.frame}  error now {1000 * e['per_frame_m'][self.frame]:.0f} mm",
            f"clip mean {1000 * e['mpjpe_m']:.0f} mm (mean pose {1000 * self.r['baseline']['mpjpe_m']:.0f} mm)",
            "left: prediction, tracked points red  right: truth"])

    def metrics(self) -> dict:
        e, names = self.r["errors"], self.r["motion"].joint_names
        shown = np.asarray(self.errors) if self.errors else e["per_frame_m"]
        return {"clip": self.clip, "frames_predicted": len(e["per_frame_m"]),
                "mpjpe_m": e["mpjpe_m"], "mpjpe_shown_frames_m": float(np.mean(shown)),
                "baseline_mean_pose_mpjpe_m": self.r["baseline"]["mpjpe_m"],
                "per_joint_m": dict(zip(names, e["per_joint_m"])),
                "tracked_points_error_m": {n: float(e["per_joint_m"][names.index(n)]) for n in tp.TRACKED},
                "checkpoint": self.checkpoint}


def _character():
    """The LaFAN1 character, else the bundled Geno (retargeted from the LaFAN1 prediction)."""
    path = optional_path("characters", "lafan1_character", "character.bin", what="the LaFAN1 character",
                         instead="the bundled Geno, retargeted")
    return kinema.io.load_character(path if path is not None else sample_path("geno", "geno.glb"))


def programs(args: argparse.Namespace) -> list[tuple[str, TrackingProgram]]:
    if args.train:
        root = require_path("lafan1", what="the LaFAN1 takes (to train)")
        out = args.checkpoint or tp.default_checkpoint()
        import torch
        torch.set_num_threads(max(1, args.threads))
        history = tp.train(root, out, epochs=args.epochs, seed=args.seed, dropout=args.dropout)
        print(f"tracker: {args.epochs} epochs, val loss {history['val'][-1]:.4f} -> {out}")
        return []
    checkpoint = str(args.checkpoint or tp.default_checkpoint())
    return [("tracking", TrackingProgram(reconstruct(args), _character(), args.clip, checkpoint))]


def report(m: dict) -> str:
    return (f"{m['clip']} MPJPE {1000 * m['mpjpe_m']:.1f} mm "
            f"(mean-pose baseline {1000 * m['baseline_mean_pose_mpjpe_m']:.1f} mm)")


def served_clips(args: argparse.Namespace) -> list:
    """``kinema serve tracking``: the prediction (skinned) with tracked points and the ground truth."""
    result = reconstruct(args)
    m = result["motion"]
    pred = Motion.from_global(m.skeleton, tp.FPS, result["rotations"], result["positions"], name="prediction")
    truth = result["truth"] + SIDE
    parents = np.asarray(m.parents)
    child = np.nonzero(parents >= 0)[0]
    bones = np.stack([truth[:, parents[child]], truth[:, child]], axis=2)
    t = result["tracked"]
    cross = np.eye(3, dtype=np.float32) * 0.06
    marks = np.stack([t[:, :, None] - cross, t[:, :, None] + cross], axis=3).reshape(len(t), -1, 2, 3)
    extras = {"truth": (bones, (60, 180, 90)), "tracked": (marks, (230, 30, 30))}
    return [ServedClip(f"tracking {args.clip}", pred, _character(), extras=extras)]
