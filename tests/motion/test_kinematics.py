import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from kinema.motion.kinematics import forward, inverse, positions_with_lengths

PARENTS = np.array([-1, 0, 1, 2, 0, 4, 5, 0, 7, 8, 8, -1, 11])


def random_pose(rng, frames=6, joints=PARENTS.size):
    rot = Rotation.random(frames * joints, random_state=rng).as_quat(scalar_first=True).reshape(frames, joints, 4)
    pos = rng.normal(size=(frames, joints, 3))
    return rot, pos


def scipy_fk(rot, pos, parents):
    """Independent oracle: per-joint, per-frame composition with scipy rotations."""
    frames, joints = rot.shape[:2]
    grot = np.zeros_like(rot)
    gpos = np.zeros_like(pos)
    for f in range(frames):
        world = [None] * joints
        for j in range(joints):
            local = Rotation.from_quat(rot[f, j], scalar_first=True)
            if parents[j] < 0:
                world[j] = local
                gpos[f, j] = pos[f, j]
            else:
                p = parents[j]
                world[j] = world[p] * local
                gpos[f, j] = gpos[f, p] + world[p].apply(pos[f, j])
            grot[f, j] = world[j].as_quat(scalar_first=True)
    return grot, gpos


def test_forward_matches_scipy_oracle():
    rng = np.random.default_rng(1)
    rot, pos = random_pose(rng)
    grot, gpos = forward(rot, pos, PARENTS)
    ref_rot, ref_pos = scipy_fk(rot, pos, PARENTS)
    np.testing.assert_allclose(gpos, ref_pos, atol=1e-12)
    np.testing.assert_allclose(np.abs(np.sum(grot * ref_rot, -1)), 1.0, atol=1e-12)


def test_inverse_undoes_forward():
    rng = np.random.default_rng(2)
    rot, pos = random_pose(rng)
    lrot, lpos = inverse(*forward(rot, pos, PARENTS), PARENTS)
    np.testing.assert_allclose(lpos, pos, atol=1e-12)
    np.testing.assert_allclose(np.abs(np.sum(lrot * rot, -1)), 1.0, atol=1e-12)


def test_forward_batched_leading_dims():
    rng = np.random.default_rng(3)
    rot, pos = random_pose(rng, frames=6)
    grot, gpos = forward(rot.reshape(2, 3, -1, 4), pos.reshape(2, 3, -1, 3), PARENTS)
    ref_rot, ref_pos = forward(rot, pos, PARENTS)
    np.testing.assert_array_equal(gpos.reshape(ref_pos.shape), ref_pos)


def test_forward_torch_matches_numpy_and_is_differentiable():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    rot, pos = random_pose(rng, frames=3)
    trot = torch.tensor(rot, requires_grad=True)
    tpos = torch.tensor(pos, requires_grad=True)
    grot, gpos = forward(trot, tpos, PARENTS)
    ref_rot, ref_pos = forward(rot, pos, PARENTS)
    np.testing.assert_allclose(gpos.detach().numpy(), ref_pos, atol=1e-12)
    assert torch.autograd.gradcheck(lambda r, p: forward(r, p, PARENTS)[1],
                                    (trot[:1].detach().requires_grad_(), tpos[:1].detach().requires_grad_()))


def test_unit_quaternions_stay_unit():
    rng = np.random.default_rng(5)
    rot, pos = random_pose(rng, frames=50)
    grot, _ = forward(rot.astype(np.float32), pos.astype(np.float32), PARENTS)
    np.testing.assert_allclose(np.linalg.norm(grot, axis=-1), 1.0, atol=1e-5)
    assert grot.dtype == np.float32


def test_blocked_forward_equals_unblocked(monkeypatch):
    from kinema.motion import kinematics
    rng = np.random.default_rng(6)
    rot, pos = random_pose(rng, frames=50)
    whole = forward(rot, pos, PARENTS)
    monkeypatch.setattr(kinematics, "_BLOCK", 7)
    blocked = forward(rot, pos, PARENTS)
    np.testing.assert_array_equal(blocked[0], whole[0])
    np.testing.assert_array_equal(blocked[1], whole[1])
    # broadcast leading dims go through the blocked path too
    b_rot, b_pos = forward(rot[None], pos[None].repeat(2, 0), PARENTS)
    np.testing.assert_array_equal(b_pos[1], whole[1])


def _level_loop(rot, pos, parents):
    """The NumPy level-by-level forward kinematics (the path torch tensors take)."""
    from kinema.motion import kinematics
    levels, parent_pos, inv = kinematics._levels(tuple(int(p) for p in parents))
    return kinematics._forward_levels(rot, pos, levels, parent_pos, inv)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_forward_is_the_level_loop_bit_for_bit(dtype):
    """NumPy inputs take the compiled kernel: the same bits as the level loop, for float32
    and float64, leading batch dims and two roots; mixed dtypes keep the level loop."""
    from kinema.motion import kinematics
    rng = np.random.default_rng(11)
    rot, pos = random_pose(rng, frames=40)
    rot, pos = rot.astype(dtype).reshape(4, 10, -1, 4), (pos * 0.3).astype(dtype).reshape(4, 10, -1, 3)
    assert kinematics._compiled_fits(rot, pos, tuple(PARENTS.tolist()))
    got = forward(rot, pos, PARENTS)
    want = _level_loop(rot, pos, PARENTS)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    mixed = forward(rot.astype(np.float32), pos.astype(np.float64), PARENTS)
    assert mixed[1].dtype == np.float64
    np.testing.assert_allclose(mixed[1], got[1], rtol=1e-5, atol=1e-5)
    # a parent after its child cannot be done in one pass: the level loop takes it
    assert not kinematics._compiled_fits(rot[..., :3, :], pos[..., :3, :], (-1, 2, 0))


def test_compiled_forward_on_a_real_take_is_the_level_loop(shared_data):
    from kinema.io import bvh
    m = bvh.load(shared_data / "lafan1" / "push1_subject2.bvh")
    got = forward(m.rotations, m.positions, m.parents)
    want = _level_loop(m.rotations, m.positions, m.parents)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_positions_from_rotations_is_the_level_loop(monkeypatch, dtype):
    """positions_from_rotations on NumPy arrays of one dtype takes the compiled kernel:
    the level loop's bits, with two roots and an anchored joint kept where given."""
    from kinema.motion import kinematics
    rng = np.random.default_rng(5)
    grot, pos = random_pose(rng, frames=24)
    grot, pos = grot.astype(dtype).reshape(3, 8, -1, 4), pos.astype(dtype).reshape(3, 8, -1, 3)
    offsets = rng.normal(size=(PARENTS.size, 3))
    got = kinematics.positions_from_rotations(grot, pos, PARENTS, offsets, anchors=[5])
    monkeypatch.setattr(kinematics, "_compiled_fits", lambda *args: False)
    want = kinematics.positions_from_rotations(grot, pos, PARENTS, offsets, anchors=[5])
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[..., [0, 5, 11], :], pos[..., [0, 5, 11], :])
    assert not np.allclose(got[..., 6, :], pos[..., 6, :])


def test_positions_with_lengths_keeps_directions_and_sets_lengths():
    """Stretched bones come back to their rest lengths along their own directions; a pose
    already at rest lengths is returned as is (the FK of scipy's rotations as the oracle)."""
    rng = np.random.default_rng(3)
    rot, pos = random_pose(rng)
    _, world = scipy_fk(rot, pos, PARENTS)
    rest = np.linalg.norm(pos, axis=-1)   # (frames, J): each frame its own skeleton
    np.testing.assert_allclose(positions_with_lengths(world, PARENTS, rest), world, atol=1e-9)
    stretched = world + rng.normal(scale=0.05, size=world.shape)
    stretched[..., 0, :] = world[..., 0, :]
    out = positions_with_lengths(stretched, PARENTS, rest)
    safe = np.where(PARENTS < 0, 0, PARENTS)
    bone_in, bone_out = stretched - stretched[..., safe, :], out - out[..., safe, :]
    child = PARENTS >= 0
    np.testing.assert_allclose(np.linalg.norm(bone_out, axis=-1)[..., child], rest[..., child], atol=1e-9)
    cos = (bone_in * bone_out).sum(-1) / np.linalg.norm(bone_in, axis=-1) / np.linalg.norm(bone_out, axis=-1)
    np.testing.assert_allclose(cos[..., child], 1.0, atol=1e-9)
    assert np.abs(np.linalg.norm(bone_in, axis=-1)[..., child] - rest[..., child]).max() > 0.01   # it was stretched
