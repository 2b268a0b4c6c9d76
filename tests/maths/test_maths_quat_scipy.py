"""kinema.maths.quat against scipy.spatial.transform.Rotation in float64 (1e-9), on random
rotations and on edge cases (identity, 180 degrees, gimbal lock, antipodes, tiny angles)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from kinema.errors import KinemaError
from kinema.maths import quat

TOL = 1e-9
ORDERS = ("xyz", "xzy", "yxz", "yzx", "zxy", "zyx")


def rot(q: np.ndarray) -> Rotation:
    return Rotation.from_quat(q, scalar_first=True)


def test_to_matrix(all_rotations):
    np.testing.assert_allclose(quat.to_matrix(all_rotations), rot(all_rotations).as_matrix(), atol=TOL)


def test_from_matrix_shepperd(all_rotations, same_rotation):
    m = rot(all_rotations).as_matrix()
    q = quat.from_matrix(m)
    assert same_rotation(q, all_rotations) < TOL
    assert (q[:, 0] >= 0).all()
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-12)
    # each branch of Shepperd's method is exercised: largest |w|, |x|, |y|, |z|
    assert set(np.abs(all_rotations).argmax(-1)) == {0, 1, 2, 3}


def test_mul_inv_rotate(randoms, edges, same_rotation):
    a, b = randoms, np.concatenate([edges, edges])[: len(randoms)]
    assert same_rotation(quat.mul(a, b), (rot(a) * rot(b)).as_quat(scalar_first=True)) < TOL
    assert same_rotation(quat.inv(a), rot(a).inv().as_quat(scalar_first=True)) < TOL
    v = np.random.default_rng(0).normal(size=(len(a), 3))
    np.testing.assert_allclose(quat.rotate(a, v), rot(a).apply(v), atol=TOL)
    np.testing.assert_allclose(quat.rotate(b, v), rot(b).apply(v), atol=TOL)
    np.testing.assert_allclose(quat.inv_rotate(a, v), rot(a).apply(v, inverse=True), atol=TOL)
    np.testing.assert_allclose(quat.mul(a, quat.inv(a)), quat.identity(a.shape[:1], like=a), atol=1e-12)


def assert_rotvec_close(got: np.ndarray, expected: np.ndarray) -> None:
    """Rotation vectors equal, except that at exactly pi, v and -v are the same rotation."""
    err = np.abs(got - expected).max(-1)
    half_turn = np.abs(np.linalg.norm(expected, axis=-1) - np.pi) < 1e-12
    err[half_turn] = np.minimum(err[half_turn], np.abs(got + expected).max(-1)[half_turn])
    assert err.max() < TOL


def test_log_exp_rotvec(all_rotations, same_rotation):
    q = all_rotations
    v = quat.log(quat.abs(q))
    assert_rotvec_close(v, rot(q).as_rotvec())
    np.testing.assert_allclose(np.linalg.norm(v, axis=-1), rot(q).magnitude(), atol=TOL)
    # exp(log(q)) == q exactly, sign included (angles above pi when w < 0)
    np.testing.assert_allclose(quat.exp(quat.log(q)), q, atol=TOL)
    assert same_rotation(quat.exp(rot(q).as_rotvec()), q) < TOL
    w_neg = q[:, 0] < 0
    assert (np.linalg.norm(quat.log(q[w_neg]), axis=-1) > np.pi).all()


def test_log_exp_full_turn_and_zero():
    assert np.array_equal(quat.log(np.array([1.0, 0, 0, 0])), np.zeros(3))
    full = quat.log(np.array([-1.0, 0, 0, 0]))
    np.testing.assert_allclose(np.linalg.norm(full), 2 * np.pi)
    np.testing.assert_allclose(quat.exp(full), [-1.0, 0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(quat.exp(np.zeros(3)), [1.0, 0, 0, 0])


def test_exp_large_and_tiny_vectors(same_rotation):
    rng = np.random.default_rng(1)
    axes = rng.normal(size=(400, 3))
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    mags = np.concatenate([10.0 ** rng.uniform(-12, -2, 200), rng.uniform(0, 4 * np.pi, 200)])
    v = axes * mags[:, None]
    assert same_rotation(quat.exp(v), Rotation.from_rotvec(v).as_quat(scalar_first=True)) < TOL
    np.testing.assert_allclose(np.linalg.norm(quat.exp(v), axis=-1), 1.0, atol=1e-14)


def test_axis_angle(all_rotations, same_rotation):
    q = all_rotations
    axis, ang = quat.to_axis_angle(quat.abs(q))
    assert_rotvec_close(axis * ang[:, None], rot(q).as_rotvec())
    np.testing.assert_allclose(np.linalg.norm(axis, axis=-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(quat.from_axis_angle(*quat.to_axis_angle(q)), q, atol=TOL)
    rv = rot(q).as_rotvec()
    mag = np.linalg.norm(rv, axis=-1)
    ok = mag > 0
    built = quat.from_axis_angle(rv[ok] / mag[ok, None], mag[ok])
    assert same_rotation(built, q[ok]) < TOL
    axis0, ang0 = quat.to_axis_angle(np.array([1.0, 0, 0, 0]))
    assert ang0 == 0 and np.array_equal(axis0, [1.0, 0, 0])


@pytest.mark.parametrize("order", ORDERS)
def test_from_euler(order, same_rotation):
    rng = np.random.default_rng(2)
    ang = rng.uniform(-np.pi, np.pi, size=(300, 3))
    ang[:20, 1] = np.pi / 2
    ang[20:40, 1] = -np.pi / 2
    ang[40:60] = 0.0
    ang[60:80] = np.pi
    expected = Rotation.from_euler(order.upper(), ang).as_quat(scalar_first=True)
    assert same_rotation(quat.from_euler(ang, order), expected) < TOL
    assert same_rotation(quat.from_euler(ang, order.upper()), expected) < TOL


@pytest.mark.parametrize("order", ORDERS)
def test_to_euler_random(order, randoms, angle_diff):
    got = quat.to_euler(randoms, order)
    assert angle_diff(got, rot(randoms).as_euler(order.upper())) < TOL
    assert (np.abs(got[:, 1]) <= np.pi / 2 + 1e-15).all()
    assert (np.abs(got[:, [0, 2]]) <= np.pi + 1e-15).all()
    # q and -q give the same angles
    assert angle_diff(quat.to_euler(-randoms, order), got) < 1e-12


@pytest.mark.parametrize("order", ORDERS)
def test_to_euler_edges_and_gimbal_lock(order, edges, angle_diff, same_rotation):
    got = quat.to_euler(edges, order)
    assert np.isfinite(got).all()
    # round trip is exact as a rotation for every edge case, locked or not
    assert same_rotation(quat.from_euler(got, order), edges) < TOL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # scipy warns about gimbal lock
        expected = rot(edges).as_euler(order.upper())
    # same angles as scipy, including its convention (third angle 0) in gimbal lock; the
    # middle angle is well defined everywhere
    assert angle_diff(got[:, 1], expected[:, 1]) < TOL
    locked = np.abs(np.abs(expected[:, 1]) - np.pi / 2) < 1e-12
    assert locked.sum() >= 16
    assert np.array_equal(got[locked, 2], np.zeros(locked.sum()))
    # outside lock, the outer angles match (near-lock rotations such as a tiny angle about
    # the middle axis plus 90 degrees are not in this set, so they are well conditioned)
    assert angle_diff(got, expected) < TOL


@pytest.mark.parametrize("order", ORDERS)
def test_to_euler_near_gimbal_lock_round_trip(order, same_rotation):
    # within 1e-13 .. 1e-6 rad of lock: outer angles are ill-conditioned individually, but
    # the rotation they describe must still be exact
    rng = np.random.default_rng(4)
    ang = rng.uniform(-np.pi, np.pi, size=(200, 3))
    ang[:, 1] = np.sign(rng.normal(size=200)) * (np.pi / 2 - 10.0 ** rng.uniform(-13, -6, 200))
    q = quat.from_euler(ang, order)
    assert same_rotation(quat.from_euler(quat.to_euler(q, order), order), q) < TOL


def test_bad_euler_order():
    with pytest.raises(KinemaError, match="Euler order"):
        quat.from_euler(np.zeros(3), "xyx")
    with pytest.raises(KinemaError, match="Euler order"):
        quat.to_euler(np.array([1.0, 0, 0, 0]), "ab")


def test_between_against_align_vectors(same_rotation):
    rng = np.random.default_rng(5)
    u, v = rng.normal(size=(100, 3)), rng.normal(size=(100, 3)) * 3.0
    q = quat.between(u, v)
    for i in range(len(u)):
        expected, _ = Rotation.align_vectors(v[i:i + 1], u[i:i + 1])
        assert same_rotation(q[i], expected.as_quat(scalar_first=True)) < TOL
    un, vn = u / np.linalg.norm(u, axis=-1, keepdims=True), v / np.linalg.norm(v, axis=-1, keepdims=True)
    np.testing.assert_allclose(quat.rotate(q, un), vn, atol=TOL)


def test_between_parallel_antiparallel_zero():
    rng = np.random.default_rng(6)
    u = np.concatenate([np.eye(3), -np.eye(3), rng.normal(size=(20, 3))])
    un = u / np.linalg.norm(u, axis=-1, keepdims=True)
    # antiparallel: a 180-degree turn that maps u to -u
    q = quat.between(u, -2.0 * u)
    np.testing.assert_allclose(quat.rotate(q, un), -un, atol=TOL)
    np.testing.assert_allclose(np.abs(q[:, 0]), 0.0, atol=TOL)
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-12)
    # parallel: identity
    np.testing.assert_allclose(quat.between(u, 5.0 * u), np.tile([1.0, 0, 0, 0], (len(u), 1)), atol=TOL)
    # nearly antiparallel (1e-7 rad off) still maps u onto v
    axis = np.cross(un, rng.normal(size=un.shape))
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    v = Rotation.from_rotvec(axis * (np.pi - 1e-7)).apply(un)
    np.testing.assert_allclose(quat.rotate(quat.between(un, v), un), v, atol=1e-8)
    # a zero vector gives the identity, not NaN
    np.testing.assert_allclose(quat.between(np.zeros(3), np.ones(3)), [1.0, 0, 0, 0])


def test_angle(randoms, edges):
    a, b = randoms, np.concatenate([edges, edges])[: len(randoms)]
    expected = (rot(a).inv() * rot(b)).magnitude()
    np.testing.assert_allclose(quat.angle(a, b), expected, atol=TOL)
    np.testing.assert_allclose(quat.angle(a, -b), expected, atol=TOL)
    np.testing.assert_allclose(quat.angle(edges, -edges), 0.0, atol=1e-15)
    # tiny angles are accurate (not limited by acos near 1)
    tiny = quat.from_axis_angle(np.array([0.0, 1.0, 0.0]), np.array(1e-10))
    np.testing.assert_allclose(quat.angle(np.array([1.0, 0, 0, 0]), tiny), 1e-10, rtol=1e-9)


def test_slerp_against_scipy(randoms, edges, same_rotation):
    a, b = randoms, np.concatenate([edges, edges])[: len(randoms)]
    ts = np.linspace(0.0, 1.0, 7)
    for i in range(0, len(a), 25):
        expected = Slerp([0.0, 1.0], rot(np.stack([a[i], b[i]])))(ts).as_quat(scalar_first=True)
        assert same_rotation(quat.slerp(a[i], b[i], ts), expected) < TOL
    # batched: one t per pair
    t = np.random.default_rng(8).uniform(size=len(a))
    expected = [Slerp([0.0, 1.0], rot(np.stack([a[i], b[i]])))(t[i]).as_quat(scalar_first=True)
                for i in range(len(a))]
    assert same_rotation(quat.slerp(a, b, t), np.array(expected)) < TOL
