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
