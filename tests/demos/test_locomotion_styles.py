"""`kinema demo locomotion`: the Bandai styles mode (switched by a scripted schedule, the
measured gait changes with the style) and what is drawn (the bundled Geno retargeted for
the GAMES-105 sample model, the procedural body for the Bandai styles player, the skinned
LaFAN1 character for the LaFAN1 model), checked on the MP4 against an empty-floor render
from the same camera."""
from __future__ import annotations

import glob
import json

import imageio.v2 as imageio
import numpy as np
import pytest
from demo_frames import empty_floor, figure_contrast

from kinema.cli.main import main
from kinema.control.retrieval.evaluate import cached_database
from kinema.demos import locomotion as loco
from kinema.matching.database import pose_to_world
from kinema.retargeting.skin import skinned_character

W, H = 480, 270


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("loco_cache")


def _bandai(shared_data):
    if not (shared_data / "bandai_namco" / "dataset-1").exists():
        pytest.skip("bandai_namco/dataset-1 not in the shared data folder")


def _body_visible(video: str, views: list[dict], every: int = 15) -> tuple[np.ndarray, np.ndarray]:
    """Video against empty floor at the projected hips and at a floor corner, per sampled frame."""
    at, corner, _ = figure_contrast(video, views, every=every)
    return at[:, 0], corner


def test_styles_mode_switches_gait_and_shows_the_body(tmp_path, shared_data, cache):
    _bandai(shared_data)
    out = tmp_path / "styles"
    assert main(["demo", "locomotion", "--headless", "--controller", "styles", "--styles", "normal,old,proud",
                 "--style-every", "240", "--frames", "720", "--no-gui", "--width", str(W), "--height", str(H),
                 "--out", str(out), "--cache", str(cache)]) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert result["style_schedule"] == ["normal", "old", "proud"]
    m = result["controllers"]["styles"]
    assert m["finite"] and m["frames"] == 720 and m["switches"] == 2
    seg = {s["style"]: s for s in m["segments"]}
    assert [s["style"] for s in m["segments"]] == ["normal", "old", "proud"]
    # the style changes the measured gait (the Bandai clips: old walks slow and bent, proud slow and upright)
    assert seg["normal"]["speed_m_s"] > seg["old"]["speed_m_s"] + 0.3
    assert seg["old"]["lean_m"] > seg["normal"]["lean_m"] + 0.08
    assert seg["old"]["lean_m"] > seg["proud"]["lean_m"] + 0.08
    assert abs(seg["proud"]["cadence_steps_s"] - seg["normal"]["cadence_steps_s"]) > 0.3
    # the stick steers: the walker faces the simulation object's direction (turns of the track included)
    assert m["heading_error_deg"] < 25.0
    assert m["distance_travelled_m"] > 5.0
    at_hips, corner = _body_visible(m["video"], m["rendered_frames"])
    assert np.median(corner) < 8.0, corner           # same camera: the empty floor matches the video
    # the skinned (grey) walker covers the floor at the hips, well above the floor's noise
    assert (at_hips > 12.0).mean() >= 0.9 and np.median(at_hips) > 3 * np.median(corner), at_hips
    assert m["character"] == "skinned" and m["retargeted"], m.get("character")


def test_lafan1_model_draws_the_skinned_character(tmp_path, shared_data, cache):
    if not (shared_data / "characters" / "lafan1_character" / "character.bin").is_file():
        pytest.skip("characters/lafan1_character not in the shared data folder")
    if not (loco.MODEL_DIR / loco.LAFAN1_MODEL).is_file():
        pytest.skip("the LaFAN1 model is not in models/")
    out = tmp_path / "lafan1"
    assert main(["demo", "locomotion", "--headless", "--data", str(shared_data / "lafan1"), "--controller",
                 "matching", "--frames", "90", "--no-gui", "--width", str(W), "--height", str(H),
                 "--out", str(out), "--cache", str(cache)]) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert result["character"] == "skinned"
    m = result["controllers"]["matching"]
    at_hips, corner = _body_visible(m["video"], m["rendered_frames"], every=5)
    assert np.median(corner) < 8.0, corner
    # the grey character on the pale floor (as Geno's first-run check; its torn mirrored poses,
    # dark folded triangles, once differed more)
    assert (at_hips > 12.0).mean() >= 0.9 and np.median(at_hips) > 3 * np.median(corner), at_hips


def test_pose_vector_to_world_matches_forward_kinematics(shared_data):
    """The skinned character is posed from the controller's pose vector: its root-space 6D
    rotations and positions, put back at the root, are the clip's own world transforms."""
    from kinema.matching.config import DatabaseConfig
    from kinema.matching.database import build_database

    paths = sorted(glob.glob(str(shared_data / "lafan1" / "walk*.bvh")))
    if not paths:
        pytest.skip("no LaFAN1 walk in the shared data folder")
    import kinema
    m = kinema.load(paths[0]).resample(60.0)[:240]
    db = build_database([m], DatabaseConfig.preset("lafan1"), progress=False)
    gr, gp = m.global_rotations(), m.global_positions()
    for f in (10, 120, 230):
        rot, pos = pose_to_world(db.pose[f], m.skeleton.num_joints, db.root_positions[f], db.root_directions[f])
        assert np.abs(pos - gp[f]).max() < 1e-4
        assert np.abs(np.abs((rot * gr[f]).sum(-1)) - 1).max() < 1e-5     # same rotation (q or -q)
    # the LaFAN1 skeleton gets the LaFAN1 character by name; the bundled GAMES-105 one does not
    if (shared_data / "characters" / "lafan1_character" / "character.bin").is_file():
        assert skinned_character(m.joint_names) is not None
        from kinema.data import sample_path
        games = kinema.load(sample_path("games105", "walk60.bvh"))
        assert skinned_character(games.joint_names) is None


def test_live_switch_keeps_the_character_in_place(shared_data, cache):
    """Switching to the styles and back (as keys 4 and 1 do) keeps the root where it was."""
    _bandai(shared_data)
    from kinema.control.retrieval.controller import RetrievalController
    from kinema.control.styles import StyleLibrary

    checkpoint, baseline = loco.MODEL_DIR / loco.SAMPLE_MODEL, None
    ctl = RetrievalController(checkpoint, cached_database(checkpoint, cache), baseline, mode="matching")
    program = loco.Locomotion(ctl, script=loco.scripted_stick,
                              styles=loco.StyleDriver(StyleLibrary.load(["normal", "old"]), "normal"))
    program.reset()
    for _ in range(90):
        program.step(loco.scripted_stick(program.t), 1 / 60, True)
    before = ctl.root[0]
    assert np.linalg.norm(before) > 0.5
    program.set_mode("styles")
    program.step(np.array([0.0, 1.0]), 1 / 60, True)
    assert program.mode == "styles"
    assert np.linalg.norm(program.styles.root[0] - before) < 0.1
    hips = program.hips()
    assert np.linalg.norm((hips - before)[[0, 2]]) < 0.4 and 0.7 < hips[1] < 1.2
    for _ in range(60):
        program.step(np.array([0.0, 1.0]), 1 / 60, True)
    program.styles.set_style("old")
    for _ in range(60):
        program.step(np.array([0.0, 1.0]), 1 / 60, True)
    walked = program.styles.root[0]
    assert np.linalg.norm(walked - before) > 1.0
    program.set_mode("retrieval")
    assert ctl.mode == "retrieval" and np.allclose(ctl.root[0], walked)
    program.step(np.array([0.0, 1.0]), 1 / 60, True)
    assert np.linalg.norm(ctl.root[0] - walked) < 0.1


def test_first_run_draws_the_bundled_geno_without_debug_text(tmp_path, cache, monkeypatch):
    """./run.sh demo on a fresh clone (no shared data): the sample model drives the bundled
    Geno, skinned through retargeting; the skinned body covers the projected hips in the
    MP4 (against an empty-floor render from the same camera) and no FPS text is burnt in."""
    empty = tmp_path / "no_shared_data"
    empty.mkdir()
    monkeypatch.setenv("KINEMA_DATA", str(empty))
    out = tmp_path / "demo"
    assert main(["demo", "locomotion", "--headless", "--controller", "retrieval", "--frames", "120",
                 "--width", str(W), "--height", str(H), "--out", str(out), "--cache", str(cache)]) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert result["character"] == "skinned" and result["character_file"] == "geno" and result["retargeted"]
    m = result["controllers"]["retrieval"]
    at_hips, corner = _body_visible(m["video"], m["rendered_frames"], every=6)
    assert np.median(corner) < 8.0, corner
    # Geno is pale grey on a pale floor: a smaller difference than the orange LaFAN1 character's,
    # still well above the empty floor's noise
    assert (at_hips > 12.0).mean() >= 0.9 and np.median(at_hips) > 3 * np.median(corner), at_hips
    # the shaded body is lit, not flat: its pixels around the hips vary
    frames = list(imageio.get_reader(m["video"]).iter_data())
    v = m["rendered_frames"][len(frames) // 2]
    x, y = (round(c) for c in v["hips_px"])
    patch = frames[len(frames) // 2][max(0, y - 12):y + 13, max(0, x - 6):x + 7].astype(float)
    assert patch.std() > 3.0
    # top-left corner (where the FPS counter was drawn) matches the empty scene: no text
    empty_frame = empty_floor([m["rendered_frames"][0]], W, H)[0]
    diff = np.abs(frames[0][4:30, 4:140].astype(int) - empty_frame[4:30, 4:140].astype(int))
    assert diff.max() < 30, diff.max()
