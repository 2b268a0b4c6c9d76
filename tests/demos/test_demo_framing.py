"""Demo cameras frame the subject: the default camera of ``kinema demo locomotion`` (placed
from the character's bounds, following its root) keeps the walking character inside the
image in every sampled frame while it walks the scripted track for metres, and the
character covers a stated share of the image."""
from __future__ import annotations

import json

import imageio.v3 as iio
import numpy as np
import pytest

from kinema.cli.main import main

W, H = 320, 180


def test_locomotion_keeps_the_walker_in_frame(tmp_path):
    out = tmp_path / "loco"
    assert main(["demo", "locomotion", "--headless", "--controller", "retrieval", "--frames", "420",
                 "--render-every", "20", "--no-gui", "--width", str(W), "--height", str(H),
                 "--out", str(out), "--cache", str(tmp_path / "cache")]) == 0
    m = json.loads((out / "metrics.json").read_text())["controllers"]["retrieval"]
    if m.get("video") is None:
        pytest.skip("no OpenGL context here (the runner then writes metrics only)")
    views = m["rendered_frames"]
    assert len(views) == 21 and m["distance_travelled_m"] > 4.0
    hips = np.array([v["hips"] for v in views])
    assert np.ptp(hips[:, [0, 2]], axis=0).max() > 3.0              # it walks away from its start
    for v in views:
        x0, y0, x1, y1 = v["joints_box_px"]
        assert v["joints_visible"] == 1.0, v                          # every drawn joint inside the image
        assert (y1 - y0) / H > 0.3, v                                 # a figure, not a speck
        assert (y1 - y0) / H < 0.9 and (x1 - x0) / W < 0.6, v         # nor a close-up
    # the video shows it there: inside the joints' box the frame differs from the sky/floor
    # outside it (the shaded body), in every sampled frame
    frames = iio.imread(m["video"], index=None)
    assert len(frames) == len(views)
    for img, v in zip(frames, views):
        x0, y0, x1, y1 = (int(round(c)) for c in v["joints_box_px"])
        box = img[max(y0, 0):y1 + 1, max(x0, 0):x1 + 1].astype(np.float32)
        rows = img[max(y0, 0):y1 + 1].astype(np.float32)          # the same rows: same sky/floor mix
        assert np.abs(box - np.median(rows, axis=1, keepdims=True)).mean() > 4.0, v
