"""6D representation, 4x4 transforms and mirroring, checked against scipy and by identities."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from kinema.errors import KinemaError
from kinema.maths import mirror, quat, sixd, transform


@pytest.fixture(scope="module")
def mats(all_rotations):
    return Rotation.from_quat(all_rotations, scalar_first=True).as_matrix()


def test_sixd_layout_is_first_two_columns(mats):
    d = sixd.from_matrix(mats)
    assert d.shape == (len(mats), 6)
    np.testing.assert_array_equal(d[:, :3], mats[:, :, 0])
    np.testing.assert_array_equal(d[:, 3:], mats[:, :, 1])


def test_sixd_round_trip(mats, all_rotations, same_rotation):
    np.testing.assert_allclose(sixd.to_matrix(sixd.from_matrix(mats)), mats, atol=1e-12)
    assert same_rotation(quat.from_6d(quat.to_6d(all_rotations)), all_rotations) < 1e-12
    np.testing.assert_allclose(quat.to_6d(all_rotations), sixd.from_matrix(mats), atol=1e-12)


def test_sixd_decoder_invariance_and_det():
    rng = np.random.default_rng(12)
    d = rng.normal(size=(500, 6))
    lam = rng.uniform(0.01, 100.0, size=(500, 1))
    mu = rng.normal(size=(500, 1)) * 10
    r = sixd.to_matrix(d)
    a1, a2 = d[:, :3], d[:, 3:]
    np.testing.assert_allclose(sixd.to_matrix(np.concatenate([lam * a1, a2 + mu * a1], -1)), r, atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-12)
    np.testing.assert_allclose(r.swapaxes(-1, -2) @ r, np.broadcast_to(np.eye(3), r.shape), atol=1e-12)
    # column 0 is the direction of a1; column 1 lies in the plane of a1, a2 on a2's side
    np.testing.assert_allclose(r[:, :, 0], a1 / np.linalg.norm(a1, axis=-1, keepdims=True), atol=1e-12)
    assert ((r[:, :, 1] * a2).sum(-1) > 0).all()
    np.testing.assert_allclose((r[:, :, 2] * a2).sum(-1), 0.0, atol=1e-9)


def test_transform_against_scipy(randoms):
    rng = np.random.default_rng(13)
    q = randoms[:200]
    t = rng.normal(size=(200, 3))
    p = rng.normal(size=(200, 3))
    m = transform.from_rotation_translation(q, t)
    assert m.shape == (200, 4, 4)
    np.testing.assert_array_equal(m[:, 3], np.tile([0.0, 0, 0, 1], (200, 1)))
    r = Rotation.from_quat(q, scalar_first=True)
    np.testing.assert_allclose(transform.apply(m, p), r.apply(p) + t, atol=1e-12)
    q2, t2 = transform.to_rotation_translation(m)
    np.testing.assert_allclose(quat.abs(q), q2, atol=1e-12)
    np.testing.assert_array_equal(t2, t)
    # inverse and composition
    mi = transform.inverse(m)
    np.testing.assert_allclose(transform.apply(mi, transform.apply(m, p)), p, atol=1e-12)
    np.testing.assert_allclose(mi, np.linalg.inv(m), atol=1e-12)
    np.testing.assert_allclose(transform.compose(m, mi), np.broadcast_to(np.eye(4), m.shape), atol=1e-12)
    m2 = transform.from_rotation_translation(randoms[200:400], rng.normal(size=(200, 3)))
    np.testing.assert_allclose(transform.apply(transform.compose(m, m2), p),
                               transform.apply(m, transform.apply(m2, p)), atol=1e-12)
    # composing transforms matches composing quaternions
    qc, tc = transform.to_rotation_translation(transform.compose(m, m2))
    np.testing.assert_allclose(qc, quat.abs(quat.mul(q, randoms[200:400])), atol=1e-12)


def test_transform_affine_inverse_and_broadcast():
    rng = np.random.default_rng(14)
    m = np.tile(np.eye(4), (10, 1, 1))
    m[:, :3, :3] = rng.normal(size=(10, 3, 3)) + 3 * np.eye(3)
    m[:, :3, 3] = rng.normal(size=(10, 3))
    np.testing.assert_allclose(transform.inverse(m, rigid=False), np.linalg.inv(m), atol=1e-10)
    # one transform applied to many points, one point under many transforms
    pts = rng.normal(size=(7, 10, 3))
    assert transform.apply(m, pts).shape == (7, 10, 3)
    single = transform.from_rotation_translation(quat.identity(), np.zeros((5, 3)))
    assert single.shape == (5, 4, 4)


def test_mirror_positions_and_rotations(all_rotations):
    rng = np.random.default_rng(15)
    p = rng.normal(size=(len(all_rotations), 3))
    for axis in range(3):
        mdiag = np.ones(3)
        mdiag[axis] = -1
        mm = np.diag(mdiag)
        np.testing.assert_array_equal(mirror.positions(p, axis), p * mdiag)
        mq = mirror.rotations(all_rotations, axis)
        r = Rotation.from_quat(all_rotations, scalar_first=True).as_matrix()
        np.testing.assert_allclose(quat.to_matrix(mq), mm @ r @ mm, atol=1e-12)
        # mirrored rotation acting on mirrored point = mirror of rotated point
        np.testing.assert_allclose(quat.rotate(mq, mirror.positions(p, axis)),
                                   mirror.positions(quat.rotate(all_rotations, p), axis), atol=1e-12)
        # twice is the identity, exactly
        np.testing.assert_array_equal(mirror.rotations(mq, axis), all_rotations)
        np.testing.assert_array_equal(mirror.positions(mirror.positions(p, axis), axis), p)
    np.testing.assert_array_equal(mirror.rotations(np.array([0.5, 0.1, 0.2, 0.3])), [0.5, 0.1, -0.2, -0.3])
    with pytest.raises(KinemaError, match="axis"):
        mirror.positions(p, 3)
