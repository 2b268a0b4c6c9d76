"""character.bin (LaFAN1 skinned character): shapes, skeleton against the LaFAN1 BVH,
skinning consistency, and clear errors on truncated files."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kinema.errors import FormatError
from kinema.io import character_bin
from kinema.io.skinning import linear_blend, skinning_matrices
from kinema.motion import kinematics


@pytest.fixture(scope="module")
def path(shared_data):
    return shared_data / "characters" / "lafan1_character" / "character.bin"


@pytest.fixture(scope="module")
def character(path):
    return character_bin.load_character(path)


def _bvh_offsets(bvh_path):
    """Joint -> OFFSET (metres) read straight from the BVH text (independent of kinema)."""
    header = bvh_path.read_text().split("MOTION")[0]
    current, out = None, {}
    for line in header.splitlines():
        m = re.match(r"\s*(?:ROOT|JOINT)\s+(\S+)", line)
        if m:
            current = m.group(1)
        m = re.match(r"\s*OFFSET\s+(\S+)\s+(\S+)\s+(\S+)", line)
        if m and current is not None:
            out[current] = np.array([float(x) for x in m.groups()]) * 0.01
            current = None
    return out


def test_shapes_and_counts(character):
    assert character.skeleton.num_joints == 23
    assert character.skeleton.names[0] == "Simulation" and character.skeleton.names[1] == "Hips"
    (mesh,) = character.meshes
    assert mesh.num_vertices == 5002
    assert mesh.indices.shape == (10000, 3) and mesh.indices.max() < 5002
    assert mesh.joints.shape == (5002, 4) and mesh.joints.max() == 22
    np.testing.assert_allclose(mesh.weights.sum(1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(mesh.normals, axis=1), 1.0, atol=1e-3)
    assert mesh.uvs.shape == (5002, 2)


def test_bone_lengths_match_lafan1_bvh(character, shared_data):
    offsets = _bvh_offsets(shared_data / "lafan1" / "walk4_subject1.bvh")
    names = character.skeleton.names
    for j in range(2, len(names)):        # Hips hangs from the extra Simulation root
        expected = np.linalg.norm(offsets[names[j]])
        assert np.linalg.norm(character.skeleton.offsets[j]) == pytest.approx(expected, abs=1e-4), names[j]


def test_bind_pose_fk_reproduces_file_world_transforms(character, path):
    raw = character_bin._read(path)
    grot, gpos = kinematics.forward(character.bind_rotations.astype(np.float64),
                                    character.bind_positions.astype(np.float64), character.skeleton.parents)
    np.testing.assert_allclose(gpos, raw["bone_positions"], atol=1e-5)
    q = raw["bone_rotations"] / np.linalg.norm(raw["bone_rotations"], axis=1, keepdims=True)
    np.testing.assert_allclose(np.abs(np.sum(grot * q, axis=1)), 1.0, atol=1e-5)


def test_standing_character_is_y_up_and_faces_plus_z(character):
    mesh = character.meshes[0]
    assert mesh.positions[:, 1].min() > -0.05 and 1.5 < mesh.positions[:, 1].max() < 2.0
    names = character.skeleton.names
    _, gpos = kinematics.forward(character.bind_rotations, character.bind_positions, character.skeleton.parents)
    assert gpos[names.index("LeftUpLeg"), 0] > gpos[names.index("RightUpLeg"), 0]   # left is +x
    assert gpos[names.index("LeftToe"), 2] > gpos[names.index("LeftFoot"), 2]       # toes point +z


def test_lbs_bind_pose_is_rest_and_bones_sit_inside_their_vertices(character):
    mesh = character.meshes[0]
    grot, gpos = kinematics.forward(character.bind_rotations.astype(np.float64),
                                    character.bind_positions.astype(np.float64), character.skeleton.parents)
    skinned = linear_blend(mesh.positions, mesh.joints, mesh.weights,
                           skinning_matrices(grot, gpos, character.inverse_bind))
    np.testing.assert_allclose(skinned, mesh.positions, atol=1e-4)
    # vertices bound mostly to a joint lie near it (a wrong joint order would break this)
    main = mesh.joints[np.arange(mesh.num_vertices), np.argmax(mesh.weights, axis=1)]
    dist = np.linalg.norm(mesh.positions - gpos[main], axis=1)
    assert np.median(dist) < 0.15


def test_truncated_file_raises_format_error(path, tmp_path):
    data = path.read_bytes()
    for cut in (3, 100, len(data) // 2, len(data) - 7):
        bad = tmp_path / f"cut{cut}.bin"
        bad.write_bytes(data[:cut])
        with pytest.raises(FormatError, match=str(bad.name)):
            character_bin.load_character(bad)
    extra = tmp_path / "extra.bin"
    extra.write_bytes(data + b"\0\0\0\0")
    with pytest.raises(FormatError, match="unexpected bytes"):
        character_bin.load_character(extra)


def test_load_character_dispatches_bin_files(shared_data):
    import kinema
    path = shared_data / "characters" / "lafan1_character" / "character.bin"
    ch = kinema.load_character(path)
    assert ch.skeleton.num_joints == 23 and ch.meshes[0].num_vertices == 5002
