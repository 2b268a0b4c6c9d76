"""``kinema render`` and ``kinema view`` as a user runs them (subprocesses: each opens its own context)."""
from __future__ import annotations

import os
import subprocess
import sys

import imageio.v2 as imageio
import numpy as np
import pytest

from kinema.data import sample_path, shared_path


def _kinema(*args, timeout=240, env=None, window=False):
    if window and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        pytest.skip("no display for a window: run under xvfb-run (./run.sh test does)")
    return subprocess.run([sys.executable, "-m", "kinema.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_render_mp4_frame_count_size_and_motion(tmp_path, shared_data):
    out = tmp_path / "walk.mp4"
    res = _kinema("render", shared_data / "lafan1" / "walk4_subject1.bvh", "-o", out, "--frames", 9,
                  "--size", "320x192", "--camera", "orbit", "--start", 100)
    assert res.returncode == 0, res.stderr
    frames = list(imageio.get_reader(str(out)).iter_data())   # len() of the reader is inf
    assert len(frames) == 9
    assert frames[0].shape == (192, 320, 3)
    diffs = [np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(frames, frames[1:])]
    assert min(diffs) > 0.2                      # the body walks and the camera orbits
    # the procedural body's colour shows up in the middle of the frame
    mid = frames[4][48:144, 100:220].astype(int)
    assert ((mid[..., 0] - np.maximum(mid[..., 1], mid[..., 2])) > 25).sum() > 100


def test_render_skinned_character_to_png_folder(tmp_path, shared_data):
    ch = shared_path("characters", "lafan1_character", "character.bin")
    if ch is None:
        pytest.skip("lafan1 character.bin not in the shared data")
    out = tmp_path / "frames"
    res = _kinema("render", shared_data / "lafan1" / "push1_subject2.bvh", "-o", out, "--frames", 3,
                  "--size", "256x160", "--character", ch, "--camera", "fixed", "--no-ssao", "--no-bloom")
    assert res.returncode == 0, res.stderr
    files = sorted(out.glob("frame_*.png"))
    assert len(files) == 3
    img = imageio.imread(files[0])
    assert img.shape == (160, 256, 3) and img.std() > 10


def test_render_rejects_bad_arguments(tmp_path):
    res = _kinema("render", sample_path("xia", "neutral_01_000.bvh"), "-o", tmp_path / "x.mp4", "--size", "big")
    assert res.returncode == 2 and "1280x720" in res.stderr
    res = _kinema("render", tmp_path / "missing.bvh", "-o", tmp_path / "x.mp4")
    assert res.returncode == 1 and "missing.bvh" in res.stderr


def test_view_runs_scripted_frames_and_saves_screenshot(tmp_path):
    shot = tmp_path / "view.png"
    video = tmp_path / "session.mp4"
    res = _kinema("view", sample_path("xia", "neutral_01_000.bvh"), "--frames", 4, "--size", "400x300",
                  "--screenshot", shot, "--no-ssao", "--record", video, window=True)
    assert res.returncode == 0, res.stderr
    frames = list(imageio.get_reader(str(video)).iter_data())     # standalone recording, from the framebuffer
    assert len(frames) == 4 and frames[0].shape == (300, 400, 3)
    img = imageio.imread(shot)
    assert img.shape == (300, 400, 3)
    # GUI panels on the right, the timeline slider at the bottom, the scene elsewhere
    assert img[40:120, 300:390].std() > 5 and img.std() > 10


def test_render_without_any_display_uses_osmesa(tmp_path, shared_data):
    """No DISPLAY at all: GLFW's null platform with an OSMesa context renders the same way."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    out = tmp_path / "frames"
    res = _kinema("render", shared_data / "lafan1" / "walk4_subject1.bvh", "-o", out, "--frames", 2,
                  "--size", "200x120", "--start", 100, env=env)
    if res.returncode != 0 and "osmesa" in res.stderr.lower():
        pytest.skip(f"OSMesa not installed: {res.stderr.strip()[-200:]}")
    assert res.returncode == 0, res.stderr
    img = imageio.imread(sorted(out.glob("frame_*.png"))[1])
    assert img.shape == (120, 200, 3)
    sky = img[2, 2].astype(int)
    assert sky[2] > sky[0] + 20                               # the sky colour
    body = (img[..., 0].astype(int) - np.maximum(img[..., 1], img[..., 2])) > 25
    assert body.sum() > 30                                    # the procedural body is in view
