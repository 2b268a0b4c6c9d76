"""Clip playback and the viewer's state machine (no OpenGL needed)."""
from __future__ import annotations

import numpy as np
import pytest

from kinema.engine.protocols import InputFrame
from kinema.render.camera import CameraRig
from kinema.render.playback import Clip, _travel_heading
from kinema.render.viewer import Viewer


@pytest.fixture(scope="module")
def clip(lafan_walk):
    return Clip(lafan_walk[300:420])


def test_travel_heading_follows_direction_and_holds_when_still():
    t = np.linspace(0, 2, 61)
    path = np.zeros((61, 3))
    path[:31, 0] = t[:31]                      # +X for one second (heading +pi/2)
    path[31:, 0] = 1.0                         # then stand still
    h = _travel_heading(path, 30.0, window=0.2)
    assert h[5] == pytest.approx(np.pi / 2)
    assert h[-1] == pytest.approx(np.pi / 2)   # held while standing
    back = path[::-1].copy()
    assert _travel_heading(back, 30.0, window=0.2)[-5] == pytest.approx(-np.pi / 2)


def test_clip_pose_and_mirror_match_motion(clip, lafan_walk):
    rot, pos = clip.pose(10)
    np.testing.assert_allclose(pos, lafan_walk.global_positions()[310], atol=1e-5)
    _, mpos = clip.pose(10, mirror=True)
    np.testing.assert_allclose(mpos, lafan_walk[300:420].mirror().global_positions()[10], atol=1e-5)
    # clamped at the ends
    np.testing.assert_allclose(clip.pose(10_000)[1], clip.pose(clip.num_frames - 1)[1])


def test_frame_camera_modes_look_at_the_clip(clip):
    rig = CameraRig(halflife=0.0)
    for mode in ("orbit", "follow", "fixed"):
        clip.frame_camera(rig, mode, 50, time=1.0)
        cam = rig.snap()
        assert rig.mode == mode
        np.testing.assert_allclose(rig.focus, clip.focus[50])
        d = cam.target - cam.position
        to_focus = clip.focus[50] - cam.position
        cos = d @ to_focus / np.linalg.norm(d) / np.linalg.norm(to_focus)
        assert cos > 0.9                        # the clip is in front of the camera


def test_viewer_playback_controls(clip):
    v = Viewer(clip, camera="follow")
    fps = clip.motion.fps
    v.update(0.5, InputFrame())
    assert v.frame == round(0.5 * fps) and v.playing
    v.update(0.1, InputFrame(keys_pressed=frozenset({"space"})))   # pause
    f = v.frame
    v.update(1.0, InputFrame())
    assert v.frame == f and not v.playing
    v.update(0.0, InputFrame(keys_pressed=frozenset({"right"})))   # step one frame
    assert v.frame == f + 1
    v.update(0.0, InputFrame(keys_pressed=frozenset({"left", "m", "c"})))
    assert v.frame == f and v.mirror and v.camera_mode == "fixed"
    v.playing, v.speed = True, 2.0
    duration = (clip.num_frames - 1) / fps
    v.time = duration - 0.1
    v.update(0.1, InputFrame())                                    # wraps around the end
    assert 0.0 <= v.time < 0.2
