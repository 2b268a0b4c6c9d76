"""``kinema demo training`` headless: the model learns to anticipate real motion."""
from __future__ import annotations

import json

import torch

from kinema.cli.demo import run_demo
from kinema.demos import training
from kinema.nn.checkpoint import load_checkpoint


def test_headless_training_demo_learns_to_anticipate(tmp_path, shared_data):
    run_demo("training", ["--headless", "--frames", "30", "--steps-per-frame", "5", "--plot-every", "15", "--no-video",
                          "--clip", str(shared_data / "lafan1" / "walk4_subject1.bvh"), "--out", str(tmp_path)])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["steps"] == 150 and metrics["frames"] == 30
    assert metrics["final_loss"] < metrics["initial_loss"] / 3
    # on held-out frames the prediction 10 frames ahead beats copying the current pose
    assert metrics["val_error_last_frame_m"] < 0.7 * metrics["copy_pose_error_last_frame_m"]
    assert len(metrics["val_loss"]) == metrics["epochs"] >= 2
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"
    model, meta = load_checkpoint(tmp_path / "model.safetensors")
    assert meta["config"]["horizon"] == 10
    x = torch.randn(3, model.hparams["input_dim"])
    assert model(x).shape == (3, 10, model.hparams["frame_dim"])


def test_samples_are_hips_relative_and_aligned():
    rng = torch.Generator().manual_seed(0)
    pos = torch.randn(20, 3, 3, generator=rng).numpy()
    x, y, t = training.make_samples(pos, 30.0, 4)
    assert x.shape == (15, 18) and y.shape == (15, 4, 9) and t[0] == 1
    origin = pos[t[0], 0] * [1, 0, 1]
    assert abs(x[0, :9] - (pos[1] - origin).ravel()).max() < 1e-6
    assert abs(x[0, 9:] - ((pos[1] - pos[0]) * 30).ravel()).max() < 1e-4
    assert abs(y[0, 3] - (pos[5] - origin).ravel()).max() < 1e-6


def test_rendered_frames_show_character_truth_and_prediction(tmp_path, shared_data, with_display):
    """Offscreen frames through kinema.render (subprocess, under xvfb-run without a display):
    the white character, the green true future and the orange prediction are all drawn."""
    import subprocess
    import sys

    import imageio.v3 as iio
    import numpy as np

    cmd = [sys.executable, "-m", "kinema.cli", "demo", "training", "--headless", "--png", "--frames", "10",
           "--render-every", "10", "--steps-per-frame", "2", "--out", str(tmp_path),
           "--clip", str(shared_data / "lafan1" / "walk4_subject1.bvh")]
    done = subprocess.run(with_display(cmd), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert len(metrics["frames_written"]) == 1
    image = iio.imread(metrics["frames_written"][0]).astype(int)[..., :3]
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    orange = (r > 200) & (g > 110) & (g < 190) & (b < 100)
    green = (g > 180) & (r < 140) & (b < 140)
    assert orange.sum() > 50 and green.sum() > 50
    # both skeletons stand in the middle of the frame, where the character is
    for mask in (orange, green):
        ys, xs = np.nonzero(mask)
        assert 0.2 * image.shape[1] < xs.mean() < 0.8 * image.shape[1]
