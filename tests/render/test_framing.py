"""Default cameras frame the figure: ``kinema render``'s clip camera (fit to the figure's
size, following its root) keeps the Khronos fox (some 100 units long) and a walking clip
in view, covering a stated share of every frame."""
from __future__ import annotations

import numpy as np
import pytest
from render_util import render

from kinema.render.playback import Clip

TINT = (0.95, 0.2, 0.15, 1.0)


def _reddish(img: np.ndarray) -> np.ndarray:
    p = img.astype(int)
    return (p[..., 0] - np.maximum(p[..., 1], p[..., 2])) > 40


@pytest.fixture
def rig_state(fresh):
    """The session camera rig's size settings, restored after the test."""
    rig = fresh.camera
    saved = (rig.distance, rig.follow_distance, rig.follow_height, rig.near, rig.far, rig.mode)
    yield fresh
    rig.distance, rig.follow_distance, rig.follow_height, rig.near, rig.far = saved[:5]
    rig.set_mode(saved[5])


def _coverage(r, clip: Clip, mode: str, frames) -> np.ndarray:
    """Share of each rendered frame the (tinted) figure covers, and whether it touches an edge."""
    clip.fit_view(r)
    shares = []
    for f in frames:
        clip.frame_camera(r.camera, mode, f, time=f / clip.motion.fps)
        r.camera.snap()
        mask = _reddish(render(r, lambda rr, f=f: clip.draw(rr, f, tint=TINT)))
        shares.append(mask.mean())
    return np.array(shares)


@pytest.mark.parametrize("mode", ["follow", "orbit", "fixed"])
def test_fox_is_framed(rig_state, sample_data, mode):
    clip = Clip.load(sample_data / "fox" / "fox.glb")
    assert clip.character is not None and clip.box.max() > 100    # the fox is ~150 units long
    shares = _coverage(rig_state, clip, mode, range(0, clip.num_frames, 6))
    low = {"follow": 0.04, "orbit": 0.04, "fixed": 0.01}[mode]
    assert shares.min() > low, (mode, shares.round(3))
    assert shares.max() < 0.6, (mode, shares.round(3))            # not a close-up from inside it


def test_walking_clip_stays_in_view(rig_state, sample_data):
    """A walk retargeted onto the bundled Geno, followed: covered in every frame."""
    clip = Clip.load(sample_data / "games105" / "walk60.bvh", sample_data / "geno" / "geno.glb")
    travel = np.linalg.norm((clip.focus[-1] - clip.focus[0])[[0, 2]])
    assert travel > 1.0
    shares = _coverage(rig_state, clip, "follow", range(0, clip.num_frames, 10))
    assert shares.min() > 0.02, shares.round(3)
