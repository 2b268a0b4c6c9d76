"""Live style switching on the real Bandai walks: after each switch the measured gait
features (speed, cadence, lean, arm swing, head height) change, and they are those of the
style switched to (nearest among the styles' own source clips)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import kinema
from kinema.cli.demo import demo_parser, run_demo
from kinema.control import styles as st
from kinema.demos import styles as styles_demo

KEYS = ("speed_m_s", "cadence_steps_s", "head_height_m", "lean_m", "arm_swing_m")


@pytest.fixture(scope="module")
def library(shared_data):
    if not (shared_data / "bandai_namco" / "dataset-1").exists():
        pytest.skip("bandai_namco/dataset-1 not in the shared data folder")
    return st.StyleLibrary.load(st.DEFAULT_STYLES)


def test_switching_changes_features_to_the_new_styles(library, tmp_path):
    ref, labels = [], []                      # every source take is a reference of its style
    for style in st.DEFAULT_STYLES:
        for path in st.style_files(style):
            m = kinema.load(path)
            if m.num_frames >= st.MIN_FRAMES:
                f = st.style_gait_features(m.global_positions()[20:-20], m.skeleton, m.fps)
                ref.append([f[k] for k in KEYS])
                labels.append(style)
    ref = np.array(ref)
    scale = ref.std(0)

    player = st.StylePlayer(library, "normal")
    measured = {}
    for style in ("normal", "old", "proud", "angry", "tired", "normal"):
        player.set_style(style)
        poses = np.array([player.step(0.0)[1] for _ in range(150)])
        feats = st.style_gait_features(poses[30:], library.skeleton)      # after the blend
        v = np.array([feats[k] for k in KEYS])
        nearest = labels[int(np.argmin((((ref - v) / scale) ** 2).sum(1)))]
        assert nearest == style, (style, feats)
        measured.setdefault(style, []).append(v)
    # a switch changes the motion measurably, and coming back restores it
    assert abs(measured["old"][0][0] - measured["normal"][0][0]) > 0.3          # speed, m/s
    assert measured["old"][0][3] > measured["normal"][0][3] + 0.08              # old walks bent forward
    assert np.all(np.abs(measured["normal"][1] - measured["normal"][0]) / scale < 0.5)
    assert player.switches == 5               # set_style("normal") at the start changes nothing


def test_switch_is_continuous(library):
    """Inertialized switch: no joint jumps more between two frames than walking moves it."""
    player = st.StylePlayer(library, "normal")
    prev = np.array([player.step(0.0)[1] for _ in range(40)])
    jumps = np.linalg.norm(np.diff(prev, axis=0), axis=-1).max()
    player.set_style("old")
    after = np.array([player.step(0.0)[1] for _ in range(10)])
    across = np.linalg.norm(after[0] - prev[-1], axis=-1).max()
    assert across < 2.0 * jumps, (across, jumps)


def test_demo_headless_metrics(tmp_path, shared_data):
    run_demo("styles", ["--headless", "--frames", "360", "--every", "120", "--styles", "normal,old,proud",
                        "--no-video", "--out", str(tmp_path)])
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert [s["style"] for s in m["segments"]] == ["normal", "old", "proud"]
    speeds = [s["speed_m_s"] for s in m["segments"]]
    assert speeds[0] > speeds[1] + 0.3


def test_served_live_walker_switches_style(shared_data):
    """``kinema serve styles``: the live clip walks and takes a new style while it plays."""
    _, parser = demo_parser("styles")
    live, recorded = styles_demo.served_clips(parser.parse_args(["--frames", "40", "--styles", "normal,old"]))
    assert getattr(live, "live", False) and recorded.num_frames == 40
    hips = []
    for i in range(90):
        if i == 45:
            live.player.set_style("old")
        live.step()
        hips.append(live.poses()[1][0, live.player.hips])
    hips = np.array(hips)
    fast = np.linalg.norm(hips[40, [0, 2]] - hips[10, [0, 2]])
    slow = np.linalg.norm(hips[89, [0, 2]] - hips[59, [0, 2]])
    assert live.player.style == "old" and slow < 0.8 * fast, (fast, slow)


def test_the_whole_body_travels_with_the_walker(library):
    """joint_Root goes along under the hips: the body keeps its size however far it walks
    (it used to stay at the world origin, so bodies drawn from the pose grew with distance)."""
    player = st.StylePlayer(library, "normal")
    h = player.hips
    for _ in range(600):
        rot, pos = player.step(heading=0.3)
    assert np.linalg.norm(pos[h, [0, 2]]) > 5.0                         # it walked away
    spread = np.linalg.norm(pos - pos[h], axis=1).max()
    assert spread < 1.5, spread                                          # no joint left behind
    assert np.linalg.norm((pos[0] - pos[h])[[0, 2]]) < 0.5 and abs(pos[0, 1]) < 0.05
