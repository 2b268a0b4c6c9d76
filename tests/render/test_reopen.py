"""A renderer can be closed and opened again in one process (the headless locomotion demo
renders each controller with its own renderer: the second open used to crash in glGetError
on GL pointers cached from the closed context)."""
from __future__ import annotations

import json
import subprocess
import sys

import imageio.v2 as imageio
import numpy as np


def test_headless_locomotion_demo_renders_every_controller(tmp_path):
    out = tmp_path / "loco"
    res = subprocess.run([sys.executable, "-X", "faulthandler", "-m", "kinema.cli", "demo", "locomotion",
                          "--headless", "--frames", "12", "--width", "320", "--height", "192",
                          "--out", str(out)], capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics
    videos = sorted(out.glob("locomotion_*.mp4"))
    assert len(videos) == 3, videos
    for v in videos:
        frames = list(imageio.get_reader(str(v)).iter_data())   # len() of the reader is inf
        assert len(frames) >= 2
        assert np.ptp(frames[-1]) > 30        # something is drawn, not a blank frame
        assert np.abs(frames[-1].astype(int) - frames[0].astype(int)).mean() > 0.05   # it moves


def test_reopen_in_one_process():
    code = ("import numpy as np\n"
            "from kinema.render import Renderer\n"
            "spreads = []\n"
            "for i in range(3):\n"
            "    r = Renderer(); r.open(160, 120, 'x', headless=True)\n"
            "    r.draw_sphere([0.0, 1.0, 0.0], 0.5, (1.0, 0.0, 0.0, 1.0))\n"
            "    r.begin_frame(); r.draw_sphere([0.0, 1.0, 0.0], 0.5, (1.0, 0.0, 0.0, 1.0)); r.begin_gui(); r.end_frame()\n"
            "    spreads.append(int(np.ptp(r.capture()))); r.close()\n"
            "print(spreads)\n"
            "assert min(spreads) > 30, spreads   # every context draws (sky, floor, sphere)\n")
    res = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
