"""``kinema demo ecs`` in headless and manual mode, with and without scripted input."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kinema.cli.demo import run_demo
from kinema.cli.main import main as kinema_main


def _run(tmp_path, *argv: str) -> dict:
    assert run_demo("ecs", [*argv, "--no-video", "--out", str(tmp_path)])
    return json.loads((tmp_path / "metrics.json").read_text())


def test_headless_metrics(tmp_path):
    m = _run(tmp_path, "--headless", "--frames", "300")
    assert m["mode"] == "headless" and m["steps"] == 300
    assert m["sim_seconds"] == pytest.approx(5.0)
    assert m["max_moon_radius_error_m"] < 1e-4  # moons stay on their orbit through 3 levels of parents
    assert m["comets_launched"] == 10 and 0 < m["comets_alive"] <= 9  # 4 s lifetime: old ones destroyed
    assert m["components"]["Spin"] == 1 + 6 + 6 + 6 * 3
    assert {"Spin", "Bob", "Comet", "program"} <= set(m["profile_ms_per_frame"])


def test_manual_mode_matches_headless(tmp_path):
    a = _run(tmp_path / "a", "--headless", "--frames", "120", "--planets", "2", "--moons", "1")
    b = _run(tmp_path / "b", "--mode", "manual", "--frames", "120", "--planets", "2", "--moons", "1")
    assert b["mode"] == "manual" and b["steps"] == 120
    for key in ("sim_seconds", "entities", "comets_launched", "comets_alive", "max_moon_radius_error_m"):
        assert a[key] == b[key]


def test_scripted_input_pauses_and_speeds_up(tmp_path):
    track = tmp_path / "keys.json"
    track.write_text(json.dumps({"version": 1, "fps": 60, "keyframes": [
        {"time": 0.0}, {"time": 1.0, "keys": ["space"]}, {"time": 1.1},  # pause at 1 s
        {"time": 2.0, "keys": ["space"]}, {"time": 2.1},                 # resume at 2 s
    ]}))
    m = _run(tmp_path, "--headless", "--frames", "180", "--input", str(track))
    assert m["steps"] == 180 and m["sim_seconds"] == pytest.approx(2.0, abs=1e-9)  # 1 s of 3 was paused


def test_cli_entry(tmp_path, capsys):
    assert kinema_main(["demo", "ecs", "--headless", "--frames", "10", "--out", str(tmp_path)]) == 0
    assert "10 steps" in capsys.readouterr().out and (tmp_path / "metrics.json").exists()


def _demo_with_display(tmp_path, with_display, *argv: str) -> dict:
    """Run the demo in a subprocess (raylib keeps one GL context per process), under
    xvfb-run when there is no display; returns its metrics."""
    import subprocess
    import sys

    cmd = with_display([sys.executable, "-m", "kinema.cli", "demo", "ecs", *argv, "--width", "480", "--height", "320",
                        "--out", str(tmp_path)], "640x480x24")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((tmp_path / "metrics.json").read_text())


def test_standalone_window_through_the_real_renderer(tmp_path, with_display):
    m = _demo_with_display(tmp_path, with_display, "--mode", "standalone", "--frames", "15", "--profiler")
    assert m["mode"] == "standalone" and m["steps"] >= 1  # real-time steps while 15 frames were shown
    assert m["max_moon_radius_error_m"] < 1e-4 and "Body" in m["profile_ms_per_frame"]
    assert m["profile_ms_per_frame"]["Body"]["draw"] > 0


def test_renders_offscreen_through_the_real_renderer(tmp_path, with_display):
    """Headless with --render: App + kinema.render.Renderer; every visible body is drawn where
    it projects."""
    import imageio.v3 as iio

    m = _demo_with_display(tmp_path, with_display, "--headless", "--frames", "60", "--png", "--render-every", "30", "--no-gui")
    assert len(m["frames_written"]) == 2 and m["steps"] == 60
    img = iio.imread(m["frames_written"][-1]).astype(int)
    assert img.shape == (320, 480, 3)
    saturation = img.max(-1) - img.min(-1)  # the floor and sky are grey-ish, every body is coloured
    checked = 0
    for name, (x, y) in m["last_frame_pixels"].items():
        if 40 <= x < 470 and 40 <= y < 310:  # inside the frame, clear of the FPS overlay
            x, y = int(round(x)), int(round(y))
            assert saturation[y - 2:y + 3, x - 2:x + 3].max() > 40, name  # 5x5: robust to a highlight
            checked += 1
    assert checked >= 3
    assert np.median(saturation) < 25  # and most of the image is not a body
