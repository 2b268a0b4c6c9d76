"""Proof against an independent implementation: AI4AnimationPy converted the MANN dog take
``D1_008_KAN01_001`` from BVH to world-space npz; kinema's BVH import + forward kinematics
must reproduce its world positions and rotations in every frame."""
from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema.maths import quat

CLIP = "D1_008_KAN01_001"


@pytest.fixture(scope="module")
def reference(shared_data):
    z = np.load(shared_data / "quadruped" / "ai4animation_npz" / f"{CLIP}.npz", allow_pickle=False)
    names = [str(n) for n in z["bone_names"]]
    pos = z["positions"].astype(np.float64)
    rot = z["quaternions"].astype(np.float64)[..., [3, 0, 1, 2]]       # x,y,z,w -> w,x,y,z
    return names, pos, rot, z["parent_indices"]


@pytest.mark.parametrize("end_sites", [False, True])
def test_bvh_fk_matches_ai4animation_world_transforms(shared_data, reference, end_sites):
    names, ref_pos, ref_rot, ref_parents = reference
    m = kinema.load(shared_data / "quadruped" / "bvh" / f"{CLIP}.bvh", end_sites=end_sites)
    shared = [n for n in m.joint_names if n in names]
    assert len(shared) == (27 if end_sites else 21)
    mine = [m.joint_names.index(n) for n in shared]
    theirs = [names.index(n) for n in shared]
    assert m.num_frames == ref_pos.shape[0] == 1072
    gp = m.global_positions().astype(np.float64)[:, mine]
    gr = m.global_rotations().astype(np.float64)[:, mine]
    err_p = np.linalg.norm(gp - ref_pos[:, theirs], axis=-1)
    err_r = quat.angle(gr, ref_rot[:, theirs])
    assert err_p.max() < 1e-4, f"worst position error {err_p.max():.3g} m"
    assert err_r.max() < 1e-4, f"worst rotation error {err_r.max():.3g} rad"
    if end_sites:   # same names, same order, same hierarchy as AI4AnimationPy's *Site bones
        assert m.joint_names == names
        assert m.parents.tolist() == ref_parents.tolist()
    # the same take, read from the AI4AnimationPy npz, gives the same local motion
    other = kinema.load(shared_data / "quadruped" / "ai4animation_npz" / f"{CLIP}.npz")
    idx = [other.joint_names.index(n) for n in shared]
    np.testing.assert_allclose(other.positions[:, idx][:, 1:], m.positions[:, mine][:, 1:], atol=1e-4)
    assert quat.angle(other.rotations[:, idx].astype(np.float64), m.rotations[:, mine].astype(np.float64)).max() < 1e-4
