"""GLB frame counts: an animation keyed at k / fps over K keys loads as K frames, and
every GLB kinema reads survives a save/load round trip with its frame count."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pygltflib
import pytest

import kinema
from kinema.data import sample_root, shared_root


def _glbs() -> list[Path]:
    """Every GLB with an animation in the bundled sample and the shared data."""
    from kinema.io import gltf
    roots = [sample_root()] + ([shared_root()] if shared_root() is not None else [])
    files = sorted({p.resolve() for r in roots for p in r.rglob("*.glb")})
    return [p for p in files if gltf.animation_names(p)]


def _expected_frames(path: Path, index: int, fps: float) -> int:
    """Frames the animation spans at ``fps``, from the raw key times (pygltflib)."""
    g = pygltflib.GLTF2().load(str(path))
    anim = g.animations[index]
    ends, starts = [], []
    for ch in anim.channels:
        if ch.target.path == "weights":
            continue
        acc = g.accessors[anim.samplers[ch.sampler].input]
        starts.append(acc.min[0])
        ends.append(acc.max[0])
    span = (max(ends) - min(starts)) * fps
    # keys on the fps grid: one frame per key; a span ending between frames: the frames in it
    return int(round(span)) + 1 if abs(span - round(span)) < 0.01 else int(np.floor(span)) + 1


def test_the_files_are_there():
    assert {p.name for p in _glbs()} >= {"fox.glb", "robot_expressive.glb"}


def test_300_keyframes_load_as_300_frames(tmp_path, sample_data):
    walk = kinema.load(sample_data / "cmu" / "02_01.bvh")[:300]
    assert walk.num_frames == 300
    kinema.save(walk, tmp_path / "walk.glb")
    back = kinema.load(tmp_path / "walk.glb")
    assert back.num_frames == 300 and back.fps == walk.fps


@pytest.mark.parametrize("path", _glbs(), ids=lambda p: p.name)
def test_every_glb_round_trips_its_frames(path, tmp_path):
    from kinema.io import gltf
    names = gltf.animation_names(path)
    for i, name in enumerate(names):
        m = kinema.load(path, animation=i)
        assert m.num_frames == _expected_frames(path, i, m.fps), name
        out = tmp_path / f"{i}.glb"
        kinema.save(m, out)
        back = kinema.load(out)
        assert back.num_frames == m.num_frames and back.fps == m.fps, name
        np.testing.assert_allclose(back.global_positions(), m.global_positions(), atol=1e-4, err_msg=name)
