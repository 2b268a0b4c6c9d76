"""``kinema demo crowd``: N characters on their own scripted sticks through one batched
controller (the bundled sample's retrieval model, and motion matching), headless: metrics
per character, every character follows its own stick, and the MP4 shows the crowd."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kinema.cli.demo import run_demo
from kinema.demos.crowd import crowd_sticks, grid

SAMPLE = Path(__file__).resolve().parents[2] / "models" / "retrieval_sample_games105.safetensors"


def test_sticks_are_per_character_and_stop_now_and_then():
    seeds = np.random.default_rng(0).random((16, 4))
    s = np.stack([crowd_sticks(t, seeds) for t in np.arange(0, 16, 1 / 60)])   # (T, N, 2)
    assert s.shape == (960, 16, 2) and np.all(np.linalg.norm(s, axis=-1) <= 1 + 1e-9)
    assert np.all((np.linalg.norm(s, axis=-1) < 1e-12).mean(0) > 0.1)          # each one stops
    assert np.ptp(s[300], axis=0).min() > 0.1                                  # and they differ
    g = grid(10, 2.0)
    assert g.shape == (10, 3) and len(np.unique(g, axis=0)) == 10 and np.allclose(g[:, 1], 0)


@pytest.mark.parametrize("controller", ["retrieval", "matching"])
def test_headless_crowd_writes_per_character_metrics(tmp_path, sample_data, controller):
    n, frames = 9, 150
    m = run_demo("crowd", ["--headless", "--frames", str(frames), "--count", str(n), "--controller", controller,
                           "--checkpoint", str(SAMPLE), "--cache", str(tmp_path / "cache"), "--out",
                           str(tmp_path / "out"), "--width", "320", "--height", "192", "--render-every", "10"])
    assert json.loads((tmp_path / "out" / "metrics.json").read_text()) == json.loads(json.dumps(m))
    assert m["controller"] == controller and m["count"] == n and m["frames"] == frames and m["all_finite"]
    per = m["characters"]
    assert [c["character"] for c in per] == list(range(n))
    travelled = np.array([c["travelled_m"] for c in per])
    assert travelled.min() > 0.5 and np.ptp(travelled) > 0.05        # everyone moved, each its own way
    assert m["root_error_m"] < 1.0 and m["step_ms"]["median"] > 0
    if m["video"] is not None:
        import imageio.v2 as imageio
        with imageio.get_reader(m["video"]) as reader:
            last = np.asarray(list(reader.iter_data())[-1], np.float32)
        assert last.shape == (192, 320, 3) and last.std() > 5
