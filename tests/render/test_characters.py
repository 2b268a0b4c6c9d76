"""Skinning maths and mesh preparation for the GPU (no OpenGL needed)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kinema
from kinema.data import shared_path
from kinema.render.characters import (
    cluster_triangles,
    orient_triangles,
    pose_from_motion,
    skinning_matrices,
    top4_influences,
    world_matrices,
)


def test_world_matrices_match_scipy():
    rng = np.random.default_rng(0)
    q = Rotation.random(5, random_state=1)
    p = rng.normal(size=(5, 3))
    xyzw = q.as_quat()
    m = world_matrices(np.c_[xyzw[:, 3], xyzw[:, :3]], p)
    np.testing.assert_allclose(m[:, :3, :3], q.as_matrix(), atol=1e-12)
    np.testing.assert_allclose(m[:, :3, 3], p)
    np.testing.assert_allclose(m[:, 3], np.tile([0, 0, 0, 1.0], (5, 1)))


def test_bind_pose_skinning_is_identity(geno):
    from kinema.maths import quat
    ib = np.linalg.inv(geno.inverse_bind.astype(np.float64))
    bones = skinning_matrices(geno, quat.from_matrix(ib[:, :3, :3]), ib[:, :3, 3])
    np.testing.assert_allclose(bones, np.broadcast_to(np.eye(4), bones.shape), atol=1e-5)
    with pytest.raises(kinema.KinemaError):
        skinning_matrices(geno, quat.from_matrix(ib[:3, :3, :3]), ib[:3, :3, 3])


def test_top4_keeps_largest_weights_renormalised():
    joints = np.array([[0, 1, 2, 3, 4, 5], [7, 0, 0, 0, 0, 0]])
    weights = np.array([[0.05, 0.3, 0.1, 0.2, 0.25, 0.1], [0, 0, 0, 0, 0, 0.0]])
    j, w = top4_influences(joints, weights)
    assert list(j[0]) == [1, 4, 3, 2] or list(j[0]) == [1, 4, 3, 5]
    np.testing.assert_allclose(w.sum(1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(w[0, :3], np.array([0.3, 0.25, 0.2]) / 0.85, rtol=1e-6)
    np.testing.assert_allclose(w[1], [1, 0, 0, 0])


def test_orient_triangles_fixes_flipped_meshes(geno):
    m = geno.meshes[0]
    idx = m.indices.reshape(-1, 3).astype(np.int64)
    same, cull = orient_triangles(m.positions, m.normals, idx)
    assert cull and np.array_equal(same, idx)
    flipped, cull = orient_triangles(m.positions, m.normals, idx[:, ::-1])
    assert cull and np.array_equal(flipped, idx)
    # half the triangles wound the other way: not safe to cull
    mixed = idx.copy()
    mixed[::2] = mixed[::2, ::-1]
    _, cull = orient_triangles(m.positions, m.normals, mixed)
    assert not cull


def test_cluster_triangles_simplifies_within_a_cell(geno):
    m = geno.meshes[0]
    idx = m.indices.reshape(-1, 3).astype(np.int64)
    cell = 0.02
    lod = cluster_triangles(m.positions, idx, cell)
    assert 0.2 * len(idx) < len(lod) < 0.8 * len(idx)
    used = np.unique(lod)
    cells = np.floor(m.positions[used] / cell).astype(int)
    assert len(np.unique(cells, axis=0)) == len(used)        # one representative per cell
    # every original vertex has a representative in its own cell, hence within a cell diagonal
    tri = m.positions[lod]
    assert np.all(np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=-1) >= 0)
    assert len(np.unique(np.sort(lod, axis=1), axis=0)) == len(lod)
    # a tiny cell changes nothing
    assert len(cluster_triangles(m.positions, idx, 1e-6)) == len(np.unique(np.sort(idx, axis=1), axis=0))


def test_pose_from_motion_reproduces_motion_fk(lafan_walk):
    path = shared_path("characters", "lafan1_character", "character.bin")
    if path is None:
        pytest.skip("lafan1 character.bin not in the shared data")
    from kinema.io.character_bin import load_character
    ch = load_character(path)
    frames = np.array([0, 250, 1000])
    rot, pos = pose_from_motion(ch, lafan_walk, frames)
    idx = [ch.skeleton.names.index(n) for n in lafan_walk.joint_names]
    np.testing.assert_allclose(pos[:, idx], lafan_walk.global_positions()[frames], atol=1e-4)
    from kinema.maths import quat
    ang = quat.angle(rot[:, idx], lafan_walk.global_rotations()[frames])
    assert np.max(ang) < 1e-3
