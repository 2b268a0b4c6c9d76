"""``kinema demo training``: a network learns to anticipate motion while the clip plays.

Every frame the demo advances the playback of a real mocap clip by one frame and runs
``--steps-per-frame`` optimisation steps of a :class:`~kinema.nn.models.SequenceMLP` that
predicts the next ``--horizon`` frames of joint positions (relative to the hips' ground
position now) from the current pose and joint velocities. Training runs inside the engine's update loop
(:class:`kinema.engine.app.App` with an :class:`AnticipationProgram` whose ``update`` calls
:meth:`kinema.nn.train.Trainer.step`), so drawing and learning share one process.

Headless it writes ``loss.png`` every ``--plot-every`` frames and ``metrics.json`` at the
end (losses, validation error of the last predicted frame in metres against copying the
current pose, step rate) plus ``model.safetensors`` and ``training.mp4`` (every
``--render-every`` frames; ``--png`` also as PNG files) of the character (white), the true
future pose (green) and the predicted one (orange). Playback shows the held-out last 20% of
the clip, which is never trained on.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import kinema.io
from kinema.data import optional_path, sample_path

DESCRIPTION = "a network learns to anticipate future motion on real mocap, live"
OUT, FRAMES, FPS, RENDER_EVERY = "out/demo_training", 1200, 30.0, 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clip", type=Path, default=None,
                        help="motion file (default: LaFAN1 walk from the shared data, else the bundled CMU walk)")
    parser.add_argument("--fps", type=float, default=30.0, help="rate the clip is resampled to")
    parser.add_argument("--horizon", type=int, default=10, help="future frames to predict")
    parser.add_argument("--steps-per-frame", type=int, default=4, help="training steps per frame")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot-every", type=int, default=100, help="frames between loss plots")


def default_clip() -> Path:
    """LaFAN1 walk from the shared data when present, else the bundled CMU walk."""
    return (optional_path("lafan1", "walk4_subject1.bvh", what="the LaFAN1 walk",
                          instead="the bundled CMU walk (cmu/02_01.bvh)") or sample_path("cmu", "02_01.bvh"))


def make_samples(positions: np.ndarray, fps: float, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs and targets from world joint positions (F, J, 3), metres.

    Every frame t in [1, F - horizon) gives input ``[pose_t, velocity_t]`` (2 J 3) and target
    ``pose_{t+1..t+horizon}`` (horizon, J 3), all relative to the hips' ground point at t
    (x and z of joint 0). Returns (x, y, t indices).
    """
    f, j, _ = positions.shape
    t = np.arange(1, f - horizon)
    origin = positions[t, 0].copy()
    origin[:, 1] = 0.0
    pose = positions[t] - origin[:, None]
    vel = (positions[t] - positions[t - 1]) * fps
    x = np.concatenate([pose.reshape(len(t), -1), vel.reshape(len(t), -1)], -1)
    fut = np.stack([positions[t + k] for k in range(1, horizon + 1)], 1) - origin[:, None, None]
    return x.astype(np.float32), fut.reshape(len(t), horizon, j * 3).astype(np.float32), t


class AnticipationProgram:
    """Engine program: each fixed step trains ``steps_per_frame`` steps and advances the
    playback of the held-out frames; ``draw`` shows the character, its true future pose and
    the predicted one."""

    def __init__(self, trainer, x: np.ndarray, y: np.ndarray, split: int, parents, steps_per_frame: int,
                 plot_every: int, out: Path, clip: Path, horizon: int, fps: float):
        self.trainer, self.x, self.y, self.split, self.parents = trainer, x, y, split, parents
        self.steps_per_frame, self.plot_every, self.out = steps_per_frame, max(plot_every, 1), out
        self.clip, self.horizon, self.fps = clip, horizon, fps
        self.frame = 0
        self.sample = split
        self.view = None   # the camera framing the three figures (first drawn frame)
        self.t0 = time.perf_counter()

    def start(self, app) -> None:
        self.t0 = time.perf_counter()

    def on_stop(self) -> None:
        """The last loss plot and the trained model (``out/loss.png``, ``out/model.safetensors``)."""
        from kinema.nn.checkpoint import save_checkpoint
        from kinema.nn.train import plot_losses

        self.seconds = time.perf_counter() - self.t0
        plot_losses(self.trainer.history, self.out / "loss.png")
        save_checkpoint(self.out / "model.safetensors", self.trainer.model,
                        config={"demo": "training", "clip": str(self.clip), "horizon": self.horizon, "fps": self.fps},
                        normalisation={"inputs": "pose+velocity, hips-relative"})

    def metrics(self) -> dict:
        xv, yv = self.trainer.val_data
        return _metrics(self.trainer.model, self.trainer, xv, yv, self.frame,
                        getattr(self, "seconds", time.perf_counter() - self.t0), self.clip)

    def update(self, dt: float) -> None:
        from kinema.nn.train import plot_losses

        for _ in range(self.steps_per_frame):
            self.trainer.step()
        self.sample = self.split + self.frame % (len(self.x) - self.split)  # held-out frames
        self.frame += 1
        if self.frame % self.plot_every == 0:
            plot_losses(self.trainer.history, self.out / "loss.png")

    def gui(self, ui) -> None:
        h = self.trainer.history
        loss = h["step_loss"][-1] if h.get("step_loss") else float("nan")
        val = h["val"][-1] if h.get("val") else None
        ui.lines("training", [f"step {len(h.get('step_loss', []))}  ({self.steps_per_frame} per frame)  "
                              f"loss {loss:.4f}" + ("" if val is None else f"  validation {val:.4f}"),
                              f"held-out frame {self.sample}, predicting +{self.horizon} frames",
                              "white: now   green: true future   orange: predicted"])

    def draw(self, renderer) -> None:
        import torch

        model = self.trainer.model
        j = self.y.shape[-1] // 3
        was_training = model.training
        model.eval()
        with torch.no_grad():
            pred = model(torch.from_numpy(self.x[self.sample][None]))[0, -1].numpy().reshape(j, 3)
        model.train(was_training)
        now = self.x[self.sample, : j * 3].reshape(j, 3)
        renderer.draw_skeleton(now.astype(np.float32), self.parents, width=5.0, joint_size=10.0)
        renderer.draw_skeleton(self.y[self.sample, -1].reshape(j, 3).astype(np.float32), self.parents,
                               color=(0.3, 0.9, 0.4, 1.0), width=3.0)
        renderer.draw_skeleton(pred.astype(np.float32), self.parents, color=(1.0, 0.6, 0.2, 1.0), width=3.0)
        from kinema.render.camera import frame_subject  # a renderer exists: raylib is there
        # the pose and its true future (not the prediction: an untrained one may be anywhere); in place: closer
        self.view = frame_subject(renderer, self.view, now, self.y[self.sample, -1].reshape(j, 3),
                                  yaw=float(np.arctan2(2.5, 3.0)), scale=0.85)


def programs(args: argparse.Namespace) -> list[tuple[str, AnticipationProgram]]:
    import torch

    from kinema.nn.models import SequenceMLP
    from kinema.nn.train import TrainConfig, Trainer, seed_everything

    torch.set_num_threads(min(2, torch.get_num_threads()))
    clip = args.clip or default_clip()
    motion = kinema.io.load(clip)
    motion = motion.at_fps(args.fps, tolerance=1e-6)
    x, y, _ = make_samples(motion.global_positions(), args.fps, args.horizon)
    split = int(0.8 * len(x))
    xt, yt = torch.from_numpy(x[:split]), torch.from_numpy(y[:split])
    xv, yv = torch.from_numpy(x[split:]), torch.from_numpy(y[split:])
    seed_everything(args.seed)
    model = SequenceMLP(x.shape[1], y.shape[2], args.horizon, hidden=(256, 256))
    model.input_norm.fit(xt)
    model.output_norm.fit(yt)
    config = TrainConfig(batch_size=min(args.batch, split), lr=args.lr, seed=args.seed, progress=False,
                         restart_epochs=10, epochs=10**9)
    trainer = Trainer(model, (xt, yt), (xv, yv), config)
    args.out.mkdir(parents=True, exist_ok=True)
    return [("training", AnticipationProgram(trainer, x, y, split, motion.parents, args.steps_per_frame,
                                             args.plot_every, args.out, clip, args.horizon, args.fps))]


def report(m: dict) -> str:
    return (f"{m['frames']} frames, {m['steps']} steps, loss {m['initial_loss']:.3g} -> {m['final_loss']:.3g}; "
            f"validation error at the last predicted frame {100 * m['val_error_last_frame_m']:.1f} cm "
            f"(copying the pose: {100 * m['copy_pose_error_last_frame_m']:.1f} cm)")


def _metrics(model, trainer, xv, yv, frames: int, seconds: float, clip) -> dict:
    import torch

    model.eval()
    with torch.no_grad():
        pred = model(xv)
    j3 = yv.shape[-1]
    err = (pred[:, -1] - yv[:, -1]).reshape(len(yv), j3 // 3, 3).norm(dim=-1).mean()
    copy = (xv[:, :j3] - yv[:, -1]).reshape(len(yv), j3 // 3, 3).norm(dim=-1).mean()
    losses = trainer.history["step_loss"]
    head = min(10, len(losses))
    return {
        "clip": str(clip),
        "frames": frames,
        "steps": trainer.global_step,
        "epochs": trainer.epoch,
        "train_samples": int(trainer.num_samples),
        "val_samples": int(len(xv)),
        "initial_loss": float(np.mean(losses[:head])) if losses else None,
        "final_loss": float(np.mean(losses[-head:])) if losses else None,
        "val_loss": trainer.history["val"],
        "val_error_last_frame_m": float(err),
        "copy_pose_error_last_frame_m": float(copy),
        "seconds": seconds,
        "steps_per_second": trainer.global_step / max(seconds, 1e-9),
    }
