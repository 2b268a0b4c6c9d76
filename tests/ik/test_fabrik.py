"""FABRIK: reach, exact bone lengths, unreachable targets, poles, trees, whole poses."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from kinema.errors import KinemaError
from kinema.ik import fabrik, solve, solve_pose
from kinema.motion import kinematics


def _random_chain(rng, batch: int, n: int, lengths: np.ndarray) -> np.ndarray:
    d = rng.normal(size=(batch, n - 1, 3))
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    return np.concatenate([np.zeros((batch, 1, 3)), np.cumsum(d * lengths[:, None], 1)], 1)


def _bone_lengths(p: np.ndarray) -> np.ndarray:
    return np.linalg.norm(np.diff(p, axis=-2), axis=-1)


@pytest.mark.parametrize("n", [2, 3, 4, 6, 10])
def test_reaches_reachable_targets_and_keeps_bone_lengths(n):
    rng = np.random.default_rng(n)
    lengths = rng.uniform(0.1, 0.5, n - 1)
    start = _random_chain(rng, 500, n, lengths)
    # a target is reachable when another pose of the same chain puts the effector there
    target = _random_chain(rng, 500, n, lengths)[:, -1]
    if n == 2:  # a single bone reaches only its sphere
        target = lengths[0] * target / np.linalg.norm(target, axis=-1, keepdims=True)
    # random directions make many folded chains, where plain FABRIK converges slowly; with
    # the closed-form finishing steps every target is reached within 20 iterations
    res = fabrik(start, target, max_iterations=20, tolerance=1e-4)
    err = np.linalg.norm(res.positions[:, -1] - target, axis=-1)
    assert res.iterations <= 20
    assert np.isfinite(res.positions).all()
    assert (err < 1e-3).all(), f"worst {err.max():.2e}"
    np.testing.assert_allclose(res.errors[:, 0], err)
    np.testing.assert_allclose(_bone_lengths(res.positions), np.broadcast_to(lengths, (500, n - 1)), atol=1e-6)
    np.testing.assert_array_equal(res.positions[:, 0], start[:, 0])  # root fixed


def test_targets_near_full_extension_are_reached():
    # plain FABRIK crawls when the target is within a few percent of the chain's reach
    rng = np.random.default_rng(7)
    lengths = np.linspace(0.5, 0.2, 5)
    start = _random_chain(rng, 300, 6, lengths)
    direction = rng.normal(size=(300, 3))
    direction /= np.linalg.norm(direction, axis=-1, keepdims=True)
    target = direction * lengths.sum() * rng.uniform(0.95, 1.0, (300, 1))
    res = fabrik(start, target, max_iterations=20, tolerance=1e-4)
    assert (res.errors < 1e-3).all(), res.errors.max()
    np.testing.assert_allclose(_bone_lengths(res.positions), np.broadcast_to(lengths, (300, 5)), atol=1e-6)


def test_unreachable_target_stretches_the_chain_straight_without_nan():
    rng = np.random.default_rng(1)
    lengths = np.array([0.4, 0.3, 0.2, 0.1])
    start = _random_chain(rng, 100, 5, lengths)
    direction = rng.normal(size=(100, 3))
    direction /= np.linalg.norm(direction, axis=-1, keepdims=True)
    target = direction * rng.uniform(1.01, 10, (100, 1))
    res = fabrik(start, target, max_iterations=10)
    assert np.isfinite(res.positions).all()
    np.testing.assert_allclose(_bone_lengths(res.positions), np.broadcast_to(lengths, (100, 4)), atol=1e-9)
    # every joint on the ray from the root toward the target, at the cumulative length
    np.testing.assert_allclose(res.positions[:, 1:], np.cumsum(lengths)[None, :, None] * direction[:, None], atol=1e-9)
    np.testing.assert_allclose(res.errors[:, 0], np.linalg.norm(target, axis=-1) - 1.0, atol=1e-9)
    # a target on the root itself (no direction): still finite, lengths kept
    res = fabrik(start[:3], np.zeros(3), max_iterations=10)
    assert np.isfinite(res.positions).all()
    np.testing.assert_allclose(_bone_lengths(res.positions), np.broadcast_to(lengths, (3, 4)), atol=1e-9)


def test_pole_bends_the_knee_toward_it():
    # a leg: hip at 1 m, knee and ankle straight below, target raised so the knee must bend
    chain = np.array([[0, 1.0, 0], [0, 0.55, 0], [0, 0.1, 0]])
    target = np.array([0, 0.3, 0.1])
    for pole, side in [(np.array([0, 0.6, 2.0]), 1), (np.array([0, 0.6, -2.0]), -1)]:
        res = fabrik(chain, target, pole=pole, max_iterations=30, tolerance=1e-5)
        knee = res.positions[1]
        assert np.linalg.norm(res.positions[2] - target) < 1e-4
        np.testing.assert_allclose(_bone_lengths(res.positions), [0.45, 0.45], atol=1e-9)
        # the knee sits in the plane through hip, target and pole, on the pole's side
        normal = np.cross(target - chain[0], pole - chain[0])
        assert abs(np.dot(knee - chain[0], normal / np.linalg.norm(normal))) < 1e-6
        assert side * knee[2] > 0.05


def _tree():
    # root -> spine -> chest -> (left arm 3 joints, right arm 3 joints)
    parents = np.array([-1, 0, 1, 2, 3, 4, 2, 6, 7])
    offsets = np.array([[0, 1, 0], [0, 0.2, 0], [0, 0.2, 0], [0.15, 0.1, 0], [0.3, 0, 0], [0.25, 0, 0],
                        [-0.15, 0.1, 0], [-0.3, 0, 0], [-0.25, 0, 0]])
    return parents, offsets


def test_two_chains_sharing_a_root_reach_both_targets():
    rng = np.random.default_rng(3)
    parents, offsets = _tree()
    j = len(parents)
    batch = 200

    def pose(scale):
        local = Rotation.from_rotvec(rng.normal(0, scale, (batch * j, 3))).as_quat(scalar_first=True).reshape(batch, j, 4)
        return kinematics.forward(local, np.broadcast_to(offsets, (batch, j, 3)), parents)

    rot, pos = pose(0.3)
    _, goal = pose(0.5)  # targets from another pose of the same skeleton: reachable together
    res = solve(pos, parents, 0, {5: goal[:, 5], 8: goal[:, 8]}, max_iterations=60, tolerance=1e-4)
    err = res.errors
    assert err.shape == (batch, 2) and np.isfinite(res.positions).all()
    assert (err < 1e-3).mean() > 0.97, f"reached {(err < 1e-3).mean():.3f}, worst {err.max():.3g}"
    lengths = np.linalg.norm(offsets[1:], axis=-1)
    got = np.linalg.norm(res.positions[:, 1:] - res.positions[:, parents[1:]], axis=-1)
    np.testing.assert_allclose(got, np.broadcast_to(lengths, got.shape), atol=1e-6)
    np.testing.assert_array_equal(res.positions[:, 0], pos[:, 0])


def test_solve_pose_gives_consistent_rotations_and_carries_children():
    rng = np.random.default_rng(4)
    parents, offsets = _tree()
    j = len(parents)
    local = Rotation.from_rotvec(rng.normal(0, 0.3, (50 * j, 3))).as_quat(scalar_first=True).reshape(50, j, 4)
    rot, pos = kinematics.forward(local, np.broadcast_to(offsets, (50, j, 3)), parents)
    other = local.copy()
    other[:, [3, 4]] = Rotation.from_rotvec(rng.normal(0, 0.6, (100, 3))).as_quat(scalar_first=True).reshape(50, 2, 4)
    _, goal = kinematics.forward(other, np.broadcast_to(offsets, (50, j, 3)), parents)
    target = goal[:, 5]                                  # the hand, reachable from the shoulder
    hand_rot = Rotation.random(50, random_state=5).as_quat(scalar_first=True)
    res = solve_pose(rot, pos, parents, 3, {5: target}, target_rotations={5: hand_rot}, max_iterations=30)
    # the new world pose is a valid pose of the same skeleton: FK of its locals reproduces it
    lrot, lpos = kinematics.inverse(res.rotations, res.positions, parents)
    frot, fpos = kinematics.forward(lrot, lpos, parents)
    np.testing.assert_allclose(fpos, res.positions, atol=1e-9)
    # local offsets of every bone are unchanged: the new rotations explain the new positions
    _, old_lpos = kinematics.inverse(rot, pos, parents)
    np.testing.assert_allclose(lpos[:, 1:], old_lpos[:, 1:], atol=1e-6)
    np.testing.assert_allclose(np.abs((res.rotations[:, 5] * hand_rot).sum(-1)), 1, atol=1e-9)
    assert (np.linalg.norm(res.positions[:, 5] - target, axis=-1) < 1e-3).all()
    # joints outside the IK root's subtree and the root itself do not move
    np.testing.assert_allclose(res.positions[:, [0, 1, 2, 3, 6, 7, 8]], pos[:, [0, 1, 2, 3, 6, 7, 8]], atol=1e-12)
    np.testing.assert_allclose(res.rotations[:, [0, 1, 2, 6, 7, 8]], rot[:, [0, 1, 2, 6, 7, 8]], atol=1e-12)

def test_bad_inputs_raise_kinema_errors():
    chain = np.zeros((3, 3))
    with pytest.raises(KinemaError):
        solve(chain, [-1, 0, 1], 0, {})
    with pytest.raises(KinemaError, match="descendant"):
        solve(chain, [-1, -1, 1], 0, {2: np.ones(3)})
    with pytest.raises(KinemaError):
        fabrik(np.zeros((1, 3)), np.ones(3))
