"""`kinema demo matching` and `kinema demo styles` draw a skinned character, named in
metrics.json: the LaFAN1 character of the shared data on a LaFAN1 database (its mirrored
clips mirrored back before skinning), the bundled Geno retargeted where the data has no
character of the skeleton (the Bandai walker, or LaFAN1 without the character file, with a
warning). In the MP4 the drawn figure's body joints (hips, spine, chest, neck, thighs,
shins, upper arms) fall on shaded pixels that differ from an empty-floor render of the
same camera."""
from __future__ import annotations

import json

import imageio.v2 as imageio
import numpy as np
import pytest
from demo_frames import figure_contrast

from kinema.cli.main import main
from kinema.data import DataFallbackWarning

W, H = 480, 270
RUN = ["--headless", "--no-gui", "--width", str(W), "--height", str(H)]


def _walk(shared_data):
    path = shared_data / "lafan1" / "walk4_subject1.bvh"
    if not path.is_file():
        pytest.skip("lafan1/walk4_subject1.bvh not in the shared data folder")
    return path


def _figure_on_the_video(m: dict, every: int, contrast: float) -> None:
    """The body joints of every sampled frame lie on the figure: the video differs from the
    empty floor there (``contrast``, mean RGB) far more than at a floor corner, and the
    figure is shaded (its pixels around the hips vary)."""
    views = m["rendered_frames"]
    at, corner, picked = figure_contrast(m["video"], views, key="body_px", every=every, visible="body_visible")
    assert at.shape[1] >= 8                                   # hips, spine... found on the character
    assert np.median(corner) < 8.0, corner                    # same camera: the empty floor matches
    assert (at > contrast).mean() >= 0.9, at
    assert np.median(at) > 3 * max(np.median(corner), 1.0), (at, corner)
    frames = list(imageio.get_reader(m["video"]).iter_data())
    for i in picked:
        x, y = (round(c) for c in views[i]["hips_px"])
        assert frames[i][max(0, y - 12):y + 13, max(0, x - 6):x + 7].astype(float).std() > 3.0


def test_matching_draws_the_lafan1_character(tmp_path, shared_data):
    walk = _walk(shared_data)
    if not (shared_data / "characters" / "lafan1_character" / "character.bin").is_file():
        pytest.skip("characters/lafan1_character not in the shared data folder")
    out = tmp_path / "matching"
    assert main(["demo", "matching", *RUN, "--frames", "240", "--render-every", "4", "--out", str(out),
                 "--data", str(walk)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["character"] == "skinned" and not m["retargeted"]
    assert m["character_source"] == "shared:characters/lafan1_character/character.bin"
    views = m["rendered_frames"]
    assert m["database"]["mirror"] and len(views) == 60
    # mirrored clips play too, and no frame's mesh tears: its bones skin where its joints are
    assert max(v["mirrored"] for v in views) > 0.5, [v["mirrored"] for v in views]
    assert max(v["bone_error_deg"] for v in views) < 5.0, [v["bone_error_deg"] for v in views]
    _figure_on_the_video(m, every=4, contrast=12.0)


def test_matching_without_the_character_file_warns_and_draws_geno(tmp_path, shared_data, monkeypatch):
    walk = _walk(shared_data)
    empty = tmp_path / "no_characters"
    empty.mkdir()
    monkeypatch.setenv("KINEMA_DATA", str(empty))
    out = tmp_path / "matching"
    with pytest.warns(DataFallbackWarning, match="drawing the bundled Geno, retargeted"):
        assert main(["demo", "matching", *RUN, "--frames", "120", "--render-every", "6", "--out", str(out),
                     "--data", str(walk)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["character"] == "skinned" and m["character_file"] == "geno" and m["retargeted"]
    _figure_on_the_video(m, every=2, contrast=12.0)


def test_styles_draws_geno_retargeted(tmp_path, shared_data):
    if not (shared_data / "bandai_namco" / "dataset-1").is_dir():
        pytest.skip("bandai_namco/dataset-1 not in the shared data folder")
    out = tmp_path / "styles"
    assert main(["demo", "styles", *RUN, "--frames", "240", "--render-every", "4", "--every", "120",
                 "--styles", "normal,old", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["character"] == "skinned" and m["character_file"] == "geno" and m["retargeted"]
    assert m["character_source"] == "sample:geno/geno.glb"
    assert [s["style"] for s in m["segments"]] == ["normal", "old"]
    _figure_on_the_video(m, every=4, contrast=12.0)


def test_a_mirrored_pose_skins_as_the_mirror_image(shared_data):
    """Skin.pose of a mirrored clip's pose (rotations M R M) gives the skinning matrices of
    the original pose's mirror image (M S_twin M), where the raw mirrored rotations tear the
    mesh; a pose halfway between a clip's and its mirror's rotations (an inertialized switch)
    is fitted so its bones skin where its joints are."""
    import kinema
    from kinema.maths import quat
    from kinema.render.characters import mirrored_skinning, skinning_matrices
    from kinema.retargeting.skin import character_skin

    walk = _walk(shared_data)
    if not (shared_data / "characters" / "lafan1_character" / "character.bin").is_file():
        pytest.skip("characters/lafan1_character not in the shared data folder")
    m = kinema.load(walk)[200:260]
    g_rot, g_pos = m.global_rotations(), m.global_positions()
    mg_rot, mg_pos = m.mirror().global_rotations(), m.mirror().global_positions()
    skin = character_skin(m.skeleton, (g_rot, g_pos, m.fps))
    assert skin.retargeter is None and skin.source_twins is not None
    for f in (0, 30, 59):
        shown = skin.pose(g_rot[f], g_pos[f])
        want = mirrored_skinning(skin.character, skinning_matrices(skin.character, *shown))
        got = skin.pose(mg_rot[f], mg_pos[f])
        raw = skin._pose(mg_rot[f], mg_pos[f])
        assert skin.bone_error(*got) < 1.0 and skin.bone_error(*raw) > 60.0     # degrees
        # within the 1-2 cm by which LaFAN1's left and right bones differ (Motion.mirror keeps
        # the mirrored skeleton's own offsets; on the hips' 10 cm bones to the thighs that turns
        # the fitted hips by up to ~8 degrees)
        np.testing.assert_allclose(got[1], shown[1][skin.twins] * [-1, 1, 1], atol=0.02)
        got, raw = skinning_matrices(skin.character, *got), skinning_matrices(skin.character, *raw)
        np.testing.assert_allclose(got[:, :3, :3], want[:, :3, :3], atol=0.15)
        assert np.abs(raw - want)[:, :3, :3].max() > 0.5
        # halfway between the clip's and the mirror's rotations of the same body (positions the mirror's)
        half = quat.slerp(mg_rot[f].astype(np.float64), (g_rot[f][skin.source_twins] * [1, 1, -1, -1]), 0.5)
        assert skin.bone_error(*skin._pose(half, mg_pos[f])) > 20.0
        assert skin.bone_error(*skin.pose(half, mg_pos[f])) < 1.0


def test_mirrored_bandai_rows_retarget_onto_geno_standing(shared_data):
    """Bandai-Namco's joint frames are not mirror images of each other, so a mirrored clip's
    rotations (right for the skeleton's positions) retargeted as they are fold Geno in half
    (the locomotion demo drew it crouched, head at the floor, whenever motion matching played
    a mirrored row or the network predicted such a pose). The skin keeps the variant whose
    limbs point as the controller's do: every mirrored row stands as tall as its original."""
    from kinema.demos._skin import database_skin
    from kinema.matching.database import build_from_paths, pose_to_world

    clips = sorted((shared_data / "bandai_namco" / "dataset-2").glob("dataset-2_walk_normal_00*.bvh"))[:2]
    if not clips:
        pytest.skip("bandai_namco/dataset-2 not in the shared data folder")
    db = build_from_paths(clips, "bandai", mirror=True, progress=False)
    skin = database_skin(db)
    assert skin is not None and skin.retargeter is not None
    heights = {}
    for c, name in enumerate(db.clip_names):
        lo, hi = db.ranges[c]
        rows = np.arange(lo, hi, 25)
        rot, pos = pose_to_world(db.pose[rows], db.num_joints, db.root_positions[rows], db.root_directions[rows])
        heights[name] = np.array([skin.pose(rot[i], pos[i])[1][:, 1].max() for i in range(len(rows))])
    for name, h in heights.items():
        assert h.min() > 1.3, (name, h)                      # Geno stands (about 1.5 m tall)
        if name.endswith("_mirror"):
            np.testing.assert_allclose(h, heights[name[: -len("_mirror")]], atol=0.05)
