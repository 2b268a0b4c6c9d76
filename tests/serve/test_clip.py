"""The NumPy side of the browser viewer: bind pose from inverse bind matrices, dense skin
weights, character poses, and which clips ``kinema serve`` collects."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from kinema.io.skinning import linear_blend, skinning_matrices
from kinema.serve import ServedClip, bind_world, dense_weights


def test_bind_world_leaves_vertices_in_place(shared_data):
    """Skinning with the recovered bind pose is the identity on the real lafan1 mesh."""
    clip = ServedClip.load(shared_data / "lafan1/walk4_subject1.bvh",
                           character=shared_data / "characters/lafan1_character/character.bin")
    rot, pos = bind_world(clip.character)
    mesh = clip.character.meshes[0]
    m = skinning_matrices(rot, pos, clip.character.inverse_bind)
    assert np.abs(linear_blend(mesh.positions, mesh.joints, mesh.weights, m) - mesh.positions).max() < 1e-5
    # and it is the inverse of the inverse bind matrices (scipy builds the rotation independently)
    bind = np.linalg.inv(clip.character.inverse_bind.astype(np.float64))
    r = Rotation.from_quat(np.roll(rot, -1, axis=-1)).as_matrix()
    assert np.abs(r - bind[:, :3, :3]).max() < 1e-5


def test_character_pose_follows_motion(shared_data):
    """Character joints named like the motion's joints land where the motion puts them."""
    clip = ServedClip.load(shared_data / "lafan1/walk4_subject1.bvh",
                           character=shared_data / "characters/lafan1_character/character.bin")
    clip.motion = clip.motion[:50]
    rot, pos, parents = clip.poses()
    g = clip.motion.global_positions()
    names = clip.character.skeleton.names
    for j, name in enumerate(clip.motion.skeleton.names):
        assert np.abs(pos[:, names.index(name)] - g[:, j]).max() < 1e-4, name
    mrot, mpos, _ = clip.poses(mirror=True)
    hips = names.index("Hips")
    assert np.allclose(mpos[:, hips, 0], -pos[:, hips, 0], atol=1e-4)
    assert clip.bones(10).shape == (int((parents >= 0).sum()), 2, 3)
    traj = clip.trajectory(25)
    assert traj.shape[1:] == (2, 3) and np.allclose(traj[..., 1], 0.01)


def test_dense_weights():
    j = np.array([[0, 2, 2, 1]])
    w = np.array([[0.5, 0.2, 0.1, 0.2]], np.float32)
    assert np.allclose(dense_weights(j, w, 4), [[0.5, 0.2, 0.3, 0.0]])


def test_serve_collects_folder_and_demo(sample_data):
    from kinema.cli.serve import clips_for
    clips = clips_for(str(sample_data / "games105"))
    assert sorted(c.name for c in clips) == sorted(p.stem for p in (sample_data / "games105").glob("*.bvh"))
    with pytest.raises(FileNotFoundError):
        clips_for("no_such_thing_here")


def test_cli_serves_then_stops(sample_data, capsys):
    from kinema.cli.main import main
    path = str(sample_data / "games105" / "walk_forward.bvh")
    assert main(["serve", path, "--seconds", "0.5", "--port", "0", "--paused"]) == 0
    assert "1 clip(s) at http://127.0.0.1:" in capsys.readouterr().out
    assert main(["serve", path, "--bogus"]) == 1          # options a file cannot take are refused
