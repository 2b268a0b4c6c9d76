"""``kinema demo ik`` headless: runs through the CLI, writes metrics that hold up."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def test_demo_ik_headless_metrics(tmp_path):
    out = tmp_path / "ik"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run([sys.executable, "-m", "kinema.cli", "demo", "ik", "--headless", "--frames", "400",
                           "--no-video", "--out", str(out)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["frames"] == 400
    assert 0 < m["reachable_frames"] < 400          # the target leaves the reach part of the time
    assert m["reached_within_1mm"] == 1.0
    assert m["max_bone_length_drift_m"] < 1e-9
    assert m["max_bend_when_out_of_reach_m"] < 1e-9  # straight toward unreachable targets
    assert m["nan"] is False


def test_the_target_is_dragged_with_the_mouse(tmp_path):
    """A scripted mouse presses on the target's pixel and drags: the target follows the
    mouse ray (in the plane facing the camera), stays where it was let go, and the chain
    reaches it. The window's camera and size are the demo's defaults."""
    import numpy as np

    from kinema.demos.ik import ChainProgram, target_path
    from kinema.render.camera import Camera, project

    w, h = 640, 360
    cam = Camera(np.array([2.0, 1.8, 2.6]), np.array([0.0, 1.1, 0.0]))
    vp = cam.view_projection(w / h)
    reach = ChainProgram(6, 20, 1e-4).reach
    start = target_path(np.array([1 / 60]), reach)[0]          # where it is when the press comes
    goal_world = start + np.array([-0.25, -0.3, 0.1])
    goal_world -= (goal_world - start) @ (start - cam.position) / np.sum((start - cam.position) ** 2) \
        * (start - cam.position)                                  # in the drag plane
    p0, p1 = project(start, vp, w, h)[0], project(goal_world, vp, w, h)[0]
    frames = [{"mouse_position": p0.tolist()}] * 2
    frames += [{"mouse_position": (p0 + (p1 - p0) * min(1.0, k / 40)).tolist(), "mouse_buttons": ["left"]}
               for k in range(60)]
    frames += [{"mouse_position": p1.tolist()}] * 30               # released: the target stays
    track = tmp_path / "drag.json"
    track.write_text(json.dumps({"version": 1, "fps": 60, "frames": frames}))
    out = tmp_path / "ik"
    proc = subprocess.run([sys.executable, "-m", "kinema.cli", "demo", "ik", "--headless", "--frames", str(len(frames)),
                           "--width", str(w), "--height", str(h), "--input", str(track), "--out", str(out)],
                          capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "metrics.json").read_text())
    assert m["video"] is not None, "needs an OpenGL context (xvfb-run)"
    assert m["dragged_frames"] >= 55
    final = np.array(m["final_target_m"])
    assert np.linalg.norm(final - goal_world) < 0.01, (final, goal_world)
    assert m["final_error_m"] < 1e-3                              # within reach: the chain gets there
