"""The motion editor on real data: browser, cached features, overlays where the features
say, contact colours, mirroring, phase dials and plots, the ``kinema view`` command."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import imageio.v2 as imageio
import numpy as np
import pytest
from render_util import neighbourhood

from kinema.engine.protocols import InputFrame
from kinema.features import RootConfig, compute_root, contact_labels, local_phases
from kinema.render.editor import Editor, feature_setup
from kinema.render.editor.overlays import AIR_COLOR, CONTACT_COLOR, FUTURE_COLOR, LIFT, PAST_COLOR

WALK_LEFT = "dataset-1_walk-left_normal_001.bvh"


def colour_near(img, px, rgb, tol=12, k=1) -> np.ndarray:
    """For each pixel position: is a pixel within ``k`` of colour ``rgb`` (0-255) within ``tol``?"""
    d = np.abs(neighbourhood(img, px, k).astype(int) - np.asarray(rgb)[:3]).max(axis=-1)
    return (d < tol).any(axis=1)


def rgb(color) -> np.ndarray:
    return np.round(np.asarray(color[:3]) * 255)


@pytest.fixture(scope="module")
def bandai_dir(shared_data) -> Path:
    return shared_data / "bandai_namco" / "dataset-1"


@pytest.fixture(scope="module")
def walk_folder(bandai_dir, tmp_path_factory) -> Path:
    """A folder of four Bandai walks (links to the shared files), one in a subfolder."""
    d = tmp_path_factory.mktemp("walks")
    (d / "more").mkdir()
    for name in ("dataset-1_walk_normal_001.bvh", WALK_LEFT, "dataset-1_walk-right_normal_001.bvh"):
        (d / name).symlink_to(bandai_dir / name)
    (d / "more" / "dataset-1_walk_proud_001.bvh").symlink_to(bandai_dir / "dataset-1_walk_proud_001.bvh")
    (d / "notes.txt").write_text("not a motion")
    return d


@pytest.fixture(autouse=True)
def keep_camera(renderer):
    """The editor frames its clips (orbit/follow distances): give the session renderer's
    camera rig back as it was."""
    saved = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in renderer.camera.__dict__.items()
             if k != "camera"}
    yield
    renderer.camera.__dict__.update(saved)
    renderer.camera.snap()


def plain(r) -> None:
    for k in ("shadows", "ssao", "bloom", "fxaa"):
        setattr(r.effects, k, False)


def look(editor, r, eye, target) -> None:
    """Hand the camera to the test: fixed at ``eye`` looking at ``target``."""
    editor.camera_mode = "manual"
    r.camera.set_fixed(eye, target)
    r.camera.snap()


def test_browser_lists_every_clip_and_loads_lazily(bandai_dir, walk_folder):
    ed = Editor(bandai_dir)
    want = sorted(p.relative_to(bandai_dir).as_posix() for p in bandai_dir.rglob("*.bvh"))
    assert ed.clips == want and len(want) == 105
    assert ed.browser.loads == 1 and ed.index == 0                 # only the first clip was read
    assert ed.clip.motion.name == Path(want[0]).stem
    ed.select(ed.browser.index(WALK_LEFT))
    assert ed.clip.motion.name == WALK_LEFT[:-4] and ed.browser.loads == 2

    ed = Editor(walk_folder)                                       # recursive, other files ignored
    assert ed.clips == ["dataset-1_walk-left_normal_001.bvh", "dataset-1_walk-right_normal_001.bvh",
                        "dataset-1_walk_normal_001.bvh", "more/dataset-1_walk_proud_001.bvh"]
    ed.update(0.0, InputFrame(keys_pressed=frozenset({"b"})))      # previous wraps to the last
    assert ed.index == 3 and ed.clip.motion.name == "dataset-1_walk_proud_001"
    ed.update(0.0, InputFrame(keys_pressed=frozenset({"n"})))
    assert ed.index == 0 and ed.time == 0.0
    ed.next()
    ed.next()
    assert ed.index == 2 and ed.browser.loads == 4
    ed.select(3)
    assert ed.browser.loads == 4                                   # cached: no reload


def test_editor_controls_seek_toggle_and_keys(walk_folder):
    ed = Editor(walk_folder)
    assert ed.seek(40) == 40 and not ed.playing
    assert ed.seek(10_000) == ed.clip.num_frames - 1
    assert ed.toggle("velocities") is False and ed.toggle("velocities") is True
    assert ed.toggle("mirror") is True and ed.mirror
    ed.update(0.0, InputFrame(keys_pressed=frozenset({"f1", "h"})))
    assert ed.overlays["root"] is False and not ed.show_gui
    with pytest.raises(Exception, match="unknown overlay"):
        ed.toggle("nonsense")


def test_features_are_those_of_kinema_features_and_computed_once(walk_folder, renderer):
    ed = Editor(walk_folder, renderer=renderer)
    ed.select(ed.browser.index(WALK_LEFT))
    m = ed.clip.motion
    feats = ed.features()
    assert ed.entry.setup.preset == "bandai"
    gr, gp = m.global_transforms()
    root = compute_root(gp, gr, m.skeleton, RootConfig.bandai())
    np.testing.assert_allclose(feats.root.positions, root.positions, atol=1e-6)
    # a future trajectory sample is the root position that many frames later
    f, s = 20, len(feats.offsets) - 2
    o = int(feats.offsets[s])
    assert o > 0
    np.testing.assert_allclose(feats.trajectory_positions[f, s], root.positions[f + o], atol=1e-5)
    feet = [m.skeleton.index(n) for n in ("Foot_L", "Toes_L", "Foot_R", "Toes_R")]
    c = contact_labels(gp, m.fps, feet, (0.17, 0.07, 0.17, 0.07), 0.5, 5)
    np.testing.assert_array_equal(feats.contacts, c)
    np.testing.assert_array_equal(feats.phases, local_phases(c))
    # joint trajectories: positions and the 6D axes at the current sample are the joint's
    # world position and rotation matrix columns (scipy as the oracle)
    from scipy.spatial.transform import Rotation
    t0 = int(np.nonzero(feats.joint_offsets == 0)[0][0])
    np.testing.assert_allclose(feats.joint_trajectory_positions[:, t0], gp[:, feats.joints], atol=1e-4)
    q = gr[:, feats.joints].reshape(-1, 4)
    mats = Rotation.from_quat(q[:, [1, 2, 3, 0]]).as_matrix().reshape(gr.shape[0], -1, 3, 3)
    np.testing.assert_allclose(feats.joint_trajectory_axes[:, t0, :, 0], mats[..., :, 0], atol=1e-4)
    np.testing.assert_allclose(feats.joint_trajectory_axes[:, t0, :, 1], mats[..., :, 1], atol=1e-4)
    # drawing many frames reuses the cached features
    for frame in (0, 30, 60):
        ed.seek(frame)
        ed.render_frame()
    assert ed.entry.computations == 1 and ed.features() is feats


def test_guessed_setup_for_other_skeletons(shared_data):
    import kinema
    m = kinema.load(shared_data / "cmu" / "02_01.bvh")
    s = feature_setup(m.skeleton, m.fps)
    names = [m.skeleton.names[j] for j in s.contact_joints]
    assert s.preset == "guess" and {"LeftFoot", "RightFoot"} <= set(names)
    assert {"LeftHand", "RightHand"} <= {m.skeleton.names[j] for j in s.trajectory_joints}


def test_trajectory_overlay_lands_where_the_features_say(fresh, shared_data):
    """LaFAN1: future samples are drawn in the future colour, past ones in the past colour,
    exactly at their projected feature positions; switching the overlay off removes them."""
    plain(fresh)
    ed = Editor(shared_data / "lafan1" / "walk4_subject1.bvh", renderer=fresh,
                overlays=("trajectory",))                           # nothing else covers it
    ed.show_gui = False
    feats = ed.features()
    moving = np.nonzero(feats.root_speed > 0.6)[0]
    f = int(moving[len(moving) // 2])
    ed.seek(f)
    centre = feats.root.positions[f]
    look(ed, fresh, centre + [0.0, 3.5, 0.3], centre)           # from above: the floor is in view
    img = ed.render_frame()
    pts = feats.trajectory_positions[f] + [0.0, LIFT, 0.0]
    past, future = feats.offsets < 0, feats.offsets > 0
    px, _, vis = fresh.project(pts)
    assert vis.all()
    assert colour_near(img, px[future], rgb(FUTURE_COLOR)).all()
    assert colour_near(img, px[past], rgb(PAST_COLOR)).all()
    ed.toggle("trajectory", False)
    img = ed.render_frame()
    assert not colour_near(img, px[future], rgb(FUTURE_COLOR)).any()


def _marker_colour(img, px) -> np.ndarray:
    return neighbourhood(img, px[None], 2)[0].astype(float).mean(axis=0)


def test_contact_markers_change_colour_with_the_contact_label(fresh, walk_folder):
    plain(fresh)
    ed = Editor(walk_folder, renderer=fresh)
    ed.show_gui = False
    ed.select(ed.browser.index("dataset-1_walk_normal_001.bvh"))
    feats = ed.features()
    k = [ed.clip.motion.skeleton.names[j] for j in feats.contact_joints].index("Toes_L")
    j = int(feats.contact_joints[k])
    lab = feats.contacts[:, k]
    assert lab.any() and not lab.all()
    seen = {}
    for state in (True, False):
        f = int(np.nonzero(lab == state)[0][len(np.nonzero(lab == state)[0]) // 2])
        ed.seek(f)
        toe = feats.positions[f, j]
        d = feats.root.directions[f]
        left = np.array([d[2], 0.0, -d[0]])                    # the character's left (+X when facing +Z)
        look(ed, fresh, toe + left * 1.2 + [0.0, 0.6, 0.0], toe)
        img = ed.render_frame()
        px, _, vis = fresh.project(toe[None])
        assert vis[0]
        seen[state] = _marker_colour(img, px[0])
    on, off = seen[True], seen[False]
    assert on[1] > on[0] + 60, on                               # green while planted
    assert off[0] > off[1] + 60, off                            # red in the air
    ed.toggle("contacts", False)
    img = ed.render_frame()
    c = _marker_colour(img, fresh.project(feats.positions[ed.frame, j][None])[0][0])
    assert not (c[0] > c[1] + 60)                                 # no marker: no red


def test_mirroring_mirrors_motion_and_features(fresh, walk_folder):
    plain(fresh)
    ed = Editor(walk_folder, renderer=fresh)
    ed.show_gui = False
    ed.select(ed.browser.index(WALK_LEFT))
    a, b = ed.features(False), ed.features(True)
    assert ed.entry.computations == 2
    flip = np.array([-1.0, 1.0, 1.0])
    np.testing.assert_allclose(b.trajectory_positions, a.trajectory_positions * flip, atol=1e-4)
    np.testing.assert_allclose(b.root.directions, a.root.directions * flip, atol=1e-5)
    # the root-space features of the mirrored motion are the features' own mirror image
    mt = a.trajectory.mirror()
    np.testing.assert_allclose(b.trajectory.positions, mt.positions, atol=1e-4)
    np.testing.assert_allclose(b.trajectory.directions, mt.directions, atol=1e-5)
    names = ed.clip.motion.skeleton.names
    swap = [list(a.contact_joints).index(names.index(n)) for n in ("Foot_R", "Toes_R", "Foot_L", "Toes_L")]
    np.testing.assert_array_equal(b.contacts, a.contacts[:, swap])
    # the shown character is the mirrored motion too
    ed.seek(60)
    ed.toggle("mirror", True)
    _, pos_m = ed.clip.pose(60)
    _, pos = ed.entry.view(False).pose(60)
    np.testing.assert_allclose(pos_m[names.index("Hips")], pos[names.index("Hips")] * flip, atol=1e-5)

    # on screen: the future trajectory moves to the other side of the mirror plane
    f = 60
    s = int(np.argmax(np.abs(a.trajectory_positions[f, :, 0]) * (a.offsets > 0)))
    p = a.trajectory_positions[f, s] + [0.0, LIFT, 0.0]
    assert abs(p[0]) > 0.5                                       # a sideways walk: far from the plane
    z = float(p[2])
    pts = np.stack([p, p * flip])
    images = {}
    for mirror in (False, True):
        ed.toggle("mirror", mirror)
        ed.seek(f)
        look(ed, fresh, [0.0, 7.0, z + 4.0], [0.0, 0.0, z])
        images[mirror] = ed.render_frame()
    px, _, vis = fresh.project(pts)
    assert vis.all() and (px[0, 0] - fresh.width / 2) * (px[1, 0] - fresh.width / 2) < 0   # opposite halves
    want = rgb(FUTURE_COLOR)
    assert colour_near(images[False], px, want).tolist() == [True, False]
    assert colour_near(images[True], px, want).tolist() == [False, True]


def test_phase_dials_and_timeline_plots(fresh, walk_folder):
    plain(fresh)
    fresh.resize(1280, 720)
    try:
        ed = Editor(walk_folder, renderer=fresh)
        ed.select(ed.browser.index("dataset-1_walk_normal_001.bvh"))
        feats = ed.features()
        from kinema.render.editor.editor import dial_layout, dial_needles
        centres, radius = dial_layout(ed.phase_rect(fresh, feats.contact_joints.size), feats.contact_joints.size)
        speed_rect, contact_rect = ed.plot_rects(fresh)
        cursors = []
        for f in (30, 90):
            ed.seek(f)
            img = ed.render_frame()
            tips = dial_needles(centres, radius * 0.7, feats.phases[f])
            for k in range(feats.contact_joints.size):
                colour = rgb(CONTACT_COLOR if feats.contacts[f, k] else AIR_COLOR)
                assert colour_near(img, tips[k:k + 1], colour, tol=40, k=2)[0], (f, k)
            # the cursor: a white column through both plots at the frame's place on the timeline
            x = speed_rect[0] + speed_rect[2] * f / (feats.num_frames - 1)
            y0, y1 = int(speed_rect[1]) + 14, int(contact_rect[1] + contact_rect[3]) - 2
            cols = img[y0:y1, int(x) - 3:int(x) + 4].astype(int)
            white = (cols.min(axis=-1) > 235).mean(axis=0)
            cursors.append(int(x) - 3 + int(np.argmax(white)))
            assert white.max() > 0.9
        assert cursors[1] - cursors[0] == pytest.approx(speed_rect[2] * 60 / (feats.num_frames - 1), abs=2)
        # the GUI shows the clip list over the scene on the left
        assert img[60:200, 20:260].std() > 5
    finally:
        fresh.resize(480, 320)


def _kinema(*args, timeout=120):
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        pytest.skip("no display for a window: run under xvfb-run (./run.sh test does)")
    return subprocess.run([sys.executable, "-m", "kinema.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def test_view_command_names_the_editor_overlays():
    from kinema.cli import view
    from kinema.render.editor import DEFAULT_OVERLAYS, OVERLAYS
    assert view.OVERLAY_NAMES == tuple(OVERLAYS) and view.DEFAULT_OVERLAY_NAMES == DEFAULT_OVERLAYS


def test_kinema_view_opens_a_folder_at_a_clip(tmp_path, walk_folder):
    shot = tmp_path / "view.png"
    res = _kinema("view", walk_folder, "--clip", "dataset-1_walk_proud_001", "--frame", 30, "--mirror",
                  "--frames", 3, "--size", "640x480", "--no-ssao", "--screenshot", shot)
    assert res.returncode == 0, res.stderr
    img = imageio.imread(shot)
    assert img.shape == (480, 640, 3) and img[40:250, 10:270].std() > 5
    res = _kinema("view", walk_folder, "--clip", "missing_clip", "--frames", 1)
    assert res.returncode == 1 and "missing_clip" in res.stderr


def test_files_with_several_animations_offer_each(fresh, shared_data):
    ed = Editor(shared_data / "characters" / "fox" / "fox.glb", renderer=fresh)
    assert ed.entry.animations == ["Survey", "Walk", "Run"] and ed.entry.animation == "Survey"
    assert ed.clip.character is not None                        # the GLB skins itself
    survey = ed.features()
    ed.select_animation("Run")
    assert ed.clip.motion.name == "Run" and ed.entry.animation == "Run"
    assert ed.features() is not survey and ed.features().num_frames == ed.clip.num_frames
    ed.seek(ed.clip.num_frames // 2)
    img = ed.render_frame()
    size = ed.clip.size
    assert size > 50 and fresh.camera.distance == pytest.approx(2.6 * size)  # framed to the (centimetre) fox
    px, _, vis = fresh.project(ed.features().positions[ed.frame])
    sky = np.asarray(fresh.effects.sky_color) * 255
    inside = vis & (px[:, 0] >= 0) & (px[:, 0] < fresh.width) & (px[:, 1] >= 0) & (px[:, 1] < fresh.height)
    assert inside.mean() > 0.9
    assert (np.abs(neighbourhood(img, px[inside], 1).astype(float) - sky).max(-1) > 20).any(axis=1).mean() > 0.8
    with pytest.raises(Exception, match="no animation"):
        ed.select_animation("Dance")


def test_broken_files_are_skipped_and_named(tmp_path, bandai_dir):
    (tmp_path / "a_broken.bvh").write_text("HIERARCHY\nROOT Hips\n{\n")
    (tmp_path / "b_walk.bvh").symlink_to(bandai_dir / "dataset-1_walk_normal_001.bvh")
    (tmp_path / "c_empty.npz").write_bytes(b"")
    ed = Editor(tmp_path)
    assert len(ed.clips) == 3 and ed.index == 1                # the first clip that loads
    assert "a_broken.bvh" in ed.message
    ed.next()                                                   # c fails, wraps around past a to b
    assert ed.index == 1 and "c_empty.npz" in ed.message
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    (only_bad / "x.bvh").write_text("nonsense")
    with pytest.raises(Exception, match="no clip could be loaded"):
        ed.open(only_bad)
    assert ed.index == 1 and len(ed.clips) == 3                # still showing the folder before


def test_velocity_arrows_follow_the_joint_velocities(fresh, walk_folder):
    from kinema.render.editor.overlays import ROOT_VELOCITY_COLOR, VELOCITY_COLOR
    plain(fresh)
    ed = Editor(walk_folder, renderer=fresh, overlays=("velocities",))
    ed.show_gui = False
    ed.select(ed.browser.index("dataset-1_walk_normal_001.bvh"))
    feats = ed.features()
    f = ed.seek(50)
    centre = feats.root.positions[f]
    d = feats.root.directions[f]
    look(ed, fresh, centre + np.array([d[2], 0.0, -d[0]]) * 3.5 + [0.0, 1.5, 0.0], centre + [0.0, 0.8, 0.0])
    img = ed.render_frame()
    speed = np.linalg.norm(feats.velocities[f], axis=-1)
    fast = np.argsort(speed)[-3:]                               # e.g. the swinging foot
    mid = feats.positions[f, fast] + feats.velocities[f, fast] * 0.1 * 0.4   # on the shafts
    px, _, _ = fresh.project(mid)
    assert colour_near(img, px, rgb(VELOCITY_COLOR)).all()
    root_mid = centre + [0.0, LIFT, 0.0] + feats.root_velocities[f] * 0.5 * 0.4
    px, _, _ = fresh.project(root_mid[None])
    assert colour_near(img, px, rgb(ROOT_VELOCITY_COLOR))[0]


def test_mirrored_skinned_character_is_the_mirror_image(fresh, shared_data):
    """LaFAN1 character.bin: the mirrored view skins the mirror image of the character, so its
    joints sit on the mirrored motion's joints (to the bind pose's own asymmetry, ~1.5 cm)
    and the drawn figure covers them."""
    plain(fresh)
    fresh.effects.floor = False
    ed = Editor(shared_data / "lafan1" / "walk4_subject1.bvh", renderer=fresh, overlays=("body",),
                character=shared_data / "characters" / "lafan1_character" / "character.bin")
    ed.show_gui = False
    ch = ed.clip.character
    f = ed.seek(1500)
    ed.toggle("mirror", True)
    bones = ed.clip.skinning(f)
    bind = np.linalg.inv(ch.inverse_bind.astype(np.float64))[:, :3, 3]
    joints = (bones[:, :3, :3] @ bind[..., None])[..., 0] + bones[:, :3, 3]
    names = ed.clip.motion.skeleton.names
    shared = [n for n in ch.skeleton.names if n in names]
    mirrored = ed.clip.motion.global_positions()[f, [names.index(n) for n in shared]]
    drawn = joints[[ch.skeleton.names.index(n) for n in shared]]
    assert np.linalg.norm(drawn - mirrored, axis=1).max() < 0.03
    original = ed.entry.clip.motion.global_positions()[f, [names.index(n) for n in shared]]
    assert np.abs(original[:, 0]).min() > 0.3                  # away from the mirror plane
    twin = ed.clip.motion.skeleton.mirror_map()
    swapped = ed.entry.clip.motion.global_positions()[f, twin[[names.index(n) for n in shared]]]
    np.testing.assert_allclose(mirrored, swapped * [-1.0, 1.0, 1.0], atol=1e-5)
    # the skinned surface (linear-blend skinning on the CPU) is the mirror image of the
    # original's: every vertex lies on the reflected original surface
    from scipy.spatial import cKDTree

    def skin(bones):
        out = []
        for mesh in ch.meshes:
            v = np.c_[mesh.positions, np.ones(len(mesh.positions))]
            per = np.einsum("vkab,vb->vka", bones[mesh.joints], v)[..., :3]
            out.append((per * mesh.weights[..., None]).sum(1))
        return np.concatenate(out)

    from kinema.render.characters import skinning_matrices
    rot, pos = ed.entry.clip.pose(f)
    reflected = skin(skinning_matrices(ch, rot, pos).astype(np.float64)) * [-1.0, 1.0, 1.0]
    gap, _ = cKDTree(reflected).query(skin(bones.astype(np.float64)))
    assert np.percentile(gap, 95) < 0.03                        # measured 1.5 cm (bind asymmetry)
    naive = skinning_matrices(ch, *ed.clip.pose(f))            # skinning Motion.mirror() as is
    gap, _ = cKDTree(reflected).query(skin(naive.astype(np.float64)))
    assert np.percentile(gap, 95) > 0.05                        # ... would tear the mesh (15 cm)
    centre = mirrored.mean(0)
    look(ed, fresh, centre + [2.0, 0.8, 2.5], centre)
    img = ed.render_frame()
    px, _, vis = fresh.project(mirrored)
    sky = np.asarray(fresh.effects.sky_color) * 255
    on_body = (np.abs(neighbourhood(img, px, 0).astype(float) - sky).max(-1) > 30)[:, 0]
    assert vis.all() and on_body.mean() > 0.9
    px, _, _ = fresh.project(original)                       # nothing left where the unmirrored one was
    on_body = (np.abs(neighbourhood(img, px, 0).astype(float) - sky).max(-1) > 30)[:, 0]
    assert on_body.mean() < 0.5
