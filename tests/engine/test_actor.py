"""Actor: joint entities posed from a real BVH clip, playback control, live poses, drawing."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

import kinema.io
from kinema.engine import App, Scene
from kinema.engine.actor import Actor
from kinema.errors import KinemaError
from kinema.maths import quat


@pytest.fixture(scope="module")
def walk(sample_data):
    return kinema.io.load(sample_data / "games105" / "walk60.bvh")


def test_joint_entities_follow_the_motion(walk):
    scene = Scene()
    actor = scene.create_entity("walker").add(Actor(motion=walk, playing=False))
    assert len(actor.joints) == walk.num_joints == len(scene.with_tag("joint"))
    assert actor.joint(walk.joint_names[3]).name == walk.joint_names[3]
    assert actor.joints[0].parent is actor.entity
    for j, p in enumerate(walk.parents):
        if p >= 0:
            assert actor.joints[j].parent is actor.joints[p]
    expected = walk.global_positions()
    for frame in (0, 57, 181):
        actor.seek(frame / walk.fps)
        np.testing.assert_allclose(actor.global_positions(), expected[frame], atol=2e-4)
        assert np.abs(np.abs(np.sum(actor.global_rotations() * walk.global_rotations()[frame], -1)) - 1).max() < 1e-5


def test_actor_entity_transform_moves_the_whole_skeleton(walk):
    scene = Scene()
    root = scene.create_entity("root", position=(3, 0, -1))
    actor = root.add(Actor(motion=walk, playing=False))
    q = quat.from_axis_angle(np.array([0.0, 1.0, 0.0]), 0.7)
    root.rotation = q
    r = Rotation.from_quat(np.roll(q, -1))
    np.testing.assert_allclose(actor.global_positions(), r.apply(walk.global_positions()[0]) + [3, 0, -1], atol=3e-4)


def test_playback_speed_loop_and_interpolation(walk):
    scene = Scene()
    actor = scene.create_entity("a").add(Actor(motion=walk, speed=0.5))
    app = App(scene, mode="manual", fps=60)
    app.step_frames(30)  # 0.5 s at half speed -> 0.25 s -> frame 15 of 60 fps
    assert actor.time == pytest.approx(0.25) and actor.frame == pytest.approx(15)
    np.testing.assert_allclose(actor.local_rotations(), walk.rotations[15], atol=1e-5)
    # between frames: slerp of the neighbours (scipy as the oracle) and lerp of positions
    actor.seek(15.25 / 60)
    j = 2
    key = Rotation.from_quat(np.roll(walk.rotations[15:17, j].astype(np.float64), -1, axis=-1))
    oracle = np.roll(Slerp([0, 1], key)([0.25]).as_quat()[0], 1)
    assert abs(abs(np.dot(actor.local_rotations()[j], oracle)) - 1) < 1e-6
    np.testing.assert_allclose(actor.local_positions()[0], 0.75 * walk.positions[15, 0] + 0.25 * walk.positions[16, 0],
                               atol=1e-5)
    # looping wraps, non-looping stops at the last frame
    actor.speed = 1.0
    actor.seek(walk.duration - 0.5 / 60)
    app.step_frames(2)
    assert 0 < actor.time < 2 / 60 and actor.playing
    once = scene.create_entity("b").add(Actor(motion=walk, loop=False, time=walk.duration - 3 / 60))
    app.step_frames(10)
    assert not once.playing and once.frame == pytest.approx(walk.num_frames - 1)
    np.testing.assert_allclose(once.local_rotations(), walk.rotations[-1], atol=1e-6)


def test_live_pose_from_a_controller(walk, sample_data):
    scene = Scene()
    actor = scene.create_entity("a").add(Actor(skeleton=walk.skeleton))
    np.testing.assert_allclose(actor.local_positions(), walk.skeleton.offsets, atol=1e-6)  # rest pose
    actor.set_pose(walk.rotations[40], walk.positions[40])
    np.testing.assert_allclose(actor.global_positions(), walk.global_positions()[40], atol=2e-4)
    with pytest.raises(KinemaError):
        actor.set_pose(walk.rotations[40][:3])
    with pytest.raises(KinemaError):
        Actor()
    other = kinema.io.load(sample_data / "cmu" / "02_01.bvh")
    with pytest.raises(KinemaError):
        actor.motion = other


def test_draw_uses_what_the_renderer_offers(walk):
    class DebugOnly:
        def __init__(self):
            self.debug = self
            self.got = None

        def skeleton(self, positions, parents, color):
            self.got = (positions, parents)

    scene = Scene()
    scene.create_entity("a").add(Actor(motion=walk))
    r = DebugOnly()
    scene.start()
    scene.draw(r)
    np.testing.assert_allclose(r.got[0], walk.global_positions()[0], atol=2e-4)
    assert r.got[1] is walk.parents
    scene.draw(object())  # a renderer without any of the methods: nothing to do, no error


def test_actor_drawn_by_the_real_renderer(tmp_path, with_display):
    """A headless App renders an Actor through kinema.render (subprocess: one GL context per
    process); the joints project onto pixels that change when the actor is hidden."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import imageio.v3 as iio

    cmd = [sys.executable, str(Path(__file__).with_name("render_actor_script.py")), str(tmp_path)]
    cmd = with_display(cmd, "640x480x24")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(done.stdout.strip().splitlines()[-1])
    assert res["still_open"] and res["frame"] == pytest.approx(30)  # the App left the caller's renderer open
    with_actor = iio.imread(res["captures"][0]).astype(int)
    without = iio.imread(res["empty"]).astype(int)
    diff = np.abs(with_actor - without).max(-1)
    px = np.round(np.array(res["pixels"])).astype(int)
    assert all(res["visible"]) and (px[:, 0] > 1).all() and (px[:, 1] > 1).all()
    hits = [diff[y - 1:y + 2, x - 1:x + 2].max() > 40 for x, y in px]
    assert np.mean(hits) >= 0.8, hits
    assert (diff > 40).mean() < 0.2  # the actor, not the whole image, changed
