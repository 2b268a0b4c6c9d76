"""`kinema demo quadruped` skins the AI4AnimationPy dog without tearing it: the GLB is the
MANN BVH skeleton's mirror image (its local offsets with x negated), which skinned every
bone 180 degrees off its joints; a :class:`~kinema.retargeting.WorldBinding` draws the
mirror image, whose joint frames are the BVH's. Checked on the demo's frames (every skinned
bone along its joints, the body joints on the dog's shaded pixels) and on the mesh itself
(skinned vertices keep their distance to their bone)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from demo_frames import figure_contrast

import kinema.io
from kinema.cli.main import main
from kinema.control.quadruped import DogController
from kinema.render.characters import skinning_matrices
from kinema.retargeting import WorldBinding
from kinema.retargeting.binding import character_pose_world

W, H = 480, 270


def _dog(shared_data):
    path = shared_data / "characters" / "dog" / "dog.glb"
    if not path.is_file():
        pytest.skip("characters/dog/dog.glb not in the shared data folder")
    return kinema.io.load_character(path)


def _poses(db, frames: int = 90):
    """World poses (rotations (J, 4), positions (J, 3)) of the dog trotting, then cantering
    after a turn (the database plays mirrored takes too)."""
    c = DogController(db)
    out = [c.step(np.array([1.0, 0.0]), "trot") for _ in range(frames // 2)]
    return out + [c.step(np.array([0.0, -1.0]), "canter") for _ in range(frames - frames // 2)]


def test_the_dog_binding_is_the_mirror_image_and_its_bones_follow_the_joints(shared_data, dog_database):
    dog = _dog(shared_data)
    sk = dog_database.skeleton
    b = WorldBinding(dog, sk)
    assert b.mirrored and b.residual_deg < 1.0
    again = WorldBinding(b.character, sk)                 # the mirror image needs no mirror
    assert not again.mirrored
    np.testing.assert_allclose(np.abs((again.corrections * b.corrections).sum(-1)), 1.0, atol=1e-6)
    for rot, pos in _poses(dog_database, 30)[::6]:
        crot, cpos = b.pose(rot, pos)
        assert b.bone_errors(crot, cpos).max() < 3.0                          # degrees
        assert _torn(b.character, crot, cpos).max() < 0.01                    # metres
        # the GLB as stored, joints matched by name and world rotations copied (the old
        # binding): its bones skinned far off their joints
        raw = character_pose_world(dog, sk.names, rot[None], pos[None])
        assert np.median(_torn(dog, raw[0][0].astype(np.float64), raw[1][0].astype(np.float64))) > 0.1


def _torn(character, rotations: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """(J-1,) metres: for each joint but the root, how far its parent's skinning matrix (as
    the renderer's shader applies it) carries the joint's bind-pose position from where
    the world pose (rotations (J, 4), positions (J, 3)) has the joint: 0 for a mesh whose
    every bone stays on its joints."""
    parents = np.asarray(character.skeleton.parents)
    bind = np.linalg.inv(character.inverse_bind.astype(np.float64))[:, :, 3]       # (J, 4) homogeneous
    s = skinning_matrices(character, rotations, positions).astype(np.float64)
    kids = np.nonzero(parents >= 0)[0]
    carried = np.einsum("kij,kj->ki", s[parents[kids]], bind[kids])[:, :3]
    return np.linalg.norm(carried - positions[kids], axis=-1)


def test_demo_frames_show_the_dog_untorn(tmp_path, shared_data, dog_database):
    _dog(shared_data)
    out = tmp_path / "dog"
    assert main(["demo", "quadruped", "--headless", "--no-gui", "--width", str(W), "--height", str(H),
                 "--frames", "60", "--tour", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["character"] == "skinned" and m["character_mirrored"]
    views = m["rendered_frames"]
    assert len(views) == 60
    assert max(v["bone_error_deg"] for v in views) < 3.0, [v["bone_error_deg"] for v in views]
    at, corner, _ = figure_contrast(m["video"], views, key="body_px", every=6, visible="body_visible")
    assert at.shape[1] == 7 and np.median(corner) < 8.0, corner
    assert (at > 12.0).mean() >= 0.9, at
