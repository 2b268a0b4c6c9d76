"""Properties of kinema.maths.quat: slerp speed and endpoints, unroll, abs, round trips
(hypothesis), batching over leading dims, dtype preservation, no torch import."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.transform import Rotation

from kinema.errors import KinemaError
from kinema.maths import quat

ORDERS = ("xyz", "xzy", "yxz", "yzx", "zxy", "zyx")
finite = st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False)
quats4 = arrays(np.float64, (4,), elements=finite).filter(lambda q: np.linalg.norm(q) > 1e-3)


def sign_free(a, b):
    return float(np.minimum(np.abs(a - b).max(-1), np.abs(a + b).max(-1)).max())


def test_slerp_endpoints_and_constant_speed(randoms):
    a, b = randoms[:100], randoms[100:200]
    np.testing.assert_allclose(quat.slerp(a, b, 0.0), a, atol=1e-12)
    end = quat.slerp(a, b, 1.0)
    same_side = (a * b).sum(-1) >= 0
    np.testing.assert_allclose(end[same_side], b[same_side], atol=1e-12)
    np.testing.assert_allclose(end[~same_side], -b[~same_side], atol=1e-12)
    ts = np.linspace(0.0, 1.0, 11)
    path = quat.slerp(a[None], b[None], ts[:, None])  # (11, 100, 4)
    steps = quat.angle(path[1:], path[:-1])  # (10, 100)
    total = quat.angle(a, b)
    np.testing.assert_allclose(steps, np.broadcast_to(total / 10, steps.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(path, axis=-1), 1.0, atol=1e-12)
    # shortest arc: never more than 180 degrees in total
    assert (total <= np.pi + 1e-12).all()


def test_slerp_equal_and_antipodal_inputs():
    q = Rotation.random(20, random_state=9).as_quat(scalar_first=True)
    np.testing.assert_allclose(quat.slerp(q, q, 0.3), q, atol=1e-14)
    np.testing.assert_allclose(quat.slerp(q, -q, 0.3), q, atol=1e-14)


def test_nlerp_endpoints_and_midpoint(randoms):
    a, b = randoms[:100], randoms[100:200]
    np.testing.assert_allclose(quat.nlerp(a, b, 0.0), a, atol=1e-12)
    assert sign_free(quat.nlerp(a, b, 1.0), b) < 1e-12
    # the midpoint of nlerp and slerp coincide (symmetry)
    assert sign_free(quat.nlerp(a, b, 0.5), quat.slerp(a, b, 0.5)) < 1e-12


def test_unroll_removes_sign_flips():
    rng = np.random.default_rng(10)
    # a smooth rotation path (F=200) for 3 joints, then random sign flips
    t = np.linspace(0, 4, 200)[:, None, None]
    rv = np.sin(t * np.array([1.0, 1.7, 2.3])[None, :, None] + np.arange(3)) * np.array([2.5, 1.0, 0.5])
    smooth = quat.exp(rv)  # (200, 3, 4)
    flips = np.where(rng.uniform(size=(200, 3, 1)) < 0.5, -1.0, 1.0)
    flipped = smooth * flips
    assert ((flipped[1:] * flipped[:-1]).sum(-1) < 0).any()
    out = quat.unroll(flipped)
    assert ((out[1:] * out[:-1]).sum(-1) >= 0).all()
    # same rotations, and the first frame keeps its sign: the smooth path comes back
    np.testing.assert_allclose(out, smooth * flips[:1], atol=1e-15)
    # time on another axis: (3, 200, 4) with axis=1 and axis=-1
    np.testing.assert_allclose(quat.unroll(flipped.swapaxes(0, 1), axis=1), out.swapaxes(0, 1))
    np.testing.assert_allclose(quat.unroll(flipped.swapaxes(0, 1), axis=-1), out.swapaxes(0, 1))
    with pytest.raises(KinemaError):
        quat.unroll(flipped, axis=2)


def test_abs(randoms):
    out = quat.abs(randoms)
    assert (out[:, 0] >= 0).all()
    assert sign_free(out, randoms) == 0.0
    np.testing.assert_allclose(np.abs(out), np.abs(randoms))


def test_identity_and_normalize():
    ident = quat.identity((2, 3))
    assert ident.shape == (2, 3, 4) and ident.dtype == np.float32
    np.testing.assert_array_equal(ident[..., 0], 1.0)
    like = np.zeros(1, np.float64)
    assert quat.identity((5,), like=like).dtype == np.float64
    q = np.array([[2.0, 0, 0, 0], [0, 3.0, 4.0, 0]])
    np.testing.assert_allclose(quat.normalize(q), [[1, 0, 0, 0], [0, 0.6, 0.8, 0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_and_batch_shape_preserved(dtype):
    rng = np.random.default_rng(11)
    q = Rotation.random(24, random_state=1).as_quat(scalar_first=True).reshape(2, 3, 4, 4).astype(dtype)
    v = rng.normal(size=(2, 3, 4, 3)).astype(dtype)
    outputs = {
        "mul": (quat.mul(q, q), (2, 3, 4, 4)),
        "rotate": (quat.rotate(q, v), (2, 3, 4, 3)),
        "log": (quat.log(q), (2, 3, 4, 3)),
        "exp": (quat.exp(v), (2, 3, 4, 4)),
        "slerp": (quat.slerp(q, q[::-1], 0.25), (2, 3, 4, 4)),
        "nlerp": (quat.nlerp(q, q[::-1], 0.25), (2, 3, 4, 4)),
        "between": (quat.between(v, v[::-1]), (2, 3, 4, 4)),
        "to_matrix": (quat.to_matrix(q), (2, 3, 4, 3, 3)),
        "from_matrix": (quat.from_matrix(quat.to_matrix(q)), (2, 3, 4, 4)),
        "to_euler": (quat.to_euler(q, "yzx"), (2, 3, 4, 3)),
        "from_euler": (quat.from_euler(v, "yzx"), (2, 3, 4, 4)),
        "to_6d": (quat.to_6d(q), (2, 3, 4, 6)),
        "from_6d": (quat.from_6d(quat.to_6d(q)), (2, 3, 4, 4)),
        "unroll": (quat.unroll(q, axis=1), (2, 3, 4, 4)),
        "abs": (quat.abs(q), (2, 3, 4, 4)),
        "angle": (quat.angle(q, q[::-1]), (2, 3, 4)),
        "axis": (quat.to_axis_angle(q)[0], (2, 3, 4, 3)),
        "from_axis_angle": (quat.from_axis_angle(quat.to_axis_angle(q)[0], quat.to_axis_angle(q)[1]), (2, 3, 4, 4)),
    }
    for name, (out, shape) in outputs.items():
        assert out.dtype == dtype, name
        assert out.shape == shape, name
    # batched result equals the per-element result
    flat = q.reshape(-1, 4)
    np.testing.assert_allclose(quat.to_euler(q, "yzx").reshape(-1, 3),
                               np.stack([quat.to_euler(x, "yzx") for x in flat]), atol=1e-6)
    # broadcasting a single rotation against a batch
    np.testing.assert_allclose(quat.rotate(q[0, 0, 0], v), quat.rotate(np.broadcast_to(q[0, 0, 0], q.shape), v))


def test_float32_accuracy(randoms):
    q32 = randoms.astype(np.float32)
    for order in ORDERS:
        e = quat.to_euler(q32, order)
        assert sign_free(quat.from_euler(e, order).astype(np.float64), randoms) < 2e-6
    assert sign_free(quat.from_matrix(quat.to_matrix(q32)).astype(np.float64), randoms) < 2e-6
    assert sign_free(quat.exp(quat.log(q32)).astype(np.float64), randoms) < 2e-6


def test_lists_are_accepted():
    np.testing.assert_allclose(quat.rotate([0.0, 0.0, 0.0, 1.0], [1, 0, 0]), [-1.0, 0.0, 0.0], atol=1e-15)


@settings(max_examples=60, deadline=None)
@given(quats4, st.sampled_from(ORDERS))
def test_euler_round_trip_hypothesis(q, order):
    q = q / np.linalg.norm(q)
    e = quat.to_euler(q, order)
    assert np.isfinite(e).all()
    assert sign_free(quat.from_euler(e, order), q) < 1e-9


@settings(max_examples=60, deadline=None)
@given(quats4)
@example(np.array([-1.0, 1.87180899e-162, 1.87180899e-162, 1.87180899e-162]))   # a subnormal |xyz|^2, found by hypothesis
def test_matrix_log_6d_round_trips_hypothesis(q):
    q = q / np.linalg.norm(q)
    assert sign_free(quat.from_matrix(quat.to_matrix(q)), q) < 1e-9
    np.testing.assert_allclose(quat.exp(quat.log(q)), q, atol=1e-12)
    assert sign_free(quat.from_6d(quat.to_6d(q)), q) < 1e-9
    axis, ang = quat.to_axis_angle(q)
    np.testing.assert_allclose(quat.from_axis_angle(axis, ang), q, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, (3,), elements=st.floats(-10, 10)), arrays(np.float64, (3,), elements=st.floats(-10, 10)))
def test_between_maps_direction_hypothesis(u, v):
    q = quat.between(u, v)
    np.testing.assert_allclose(np.linalg.norm(q), 1.0, atol=1e-12)
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    if nu > 1e-6 and nv > 1e-6:
        np.testing.assert_allclose(quat.rotate(q, u / nu), v / nv, atol=1e-8)


def test_numpy_use_never_imports_torch():
    code = (
        "import sys, numpy as np\n"
        "from kinema.maths import quat, sixd, transform, mirror\n"
        "q = quat.from_euler(np.ones((4, 3)), 'xyz')\n"
        "quat.slerp(q, quat.inv(q), 0.5); quat.to_euler(q, 'zyx'); quat.unroll(q); quat.between(q[:, 1:], q[:, :3])\n"
        "sixd.to_matrix(quat.to_6d(q)); transform.inverse(transform.from_rotation_translation(q, q[:, 1:]))\n"
        "mirror.rotations(q)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_log_and_euler_ignore_quaternion_scale(randoms, edges):
    # scaled (non-unit) inputs describe the same rotation: log, to_euler and angle agree
    q = np.concatenate([randoms, edges])
    for c in (1e-6, 1e-3, 7.0):
        np.testing.assert_allclose(quat.log(c * q), quat.log(q), atol=1e-9)
        np.testing.assert_allclose(quat.to_euler(c * q, "zxy"), quat.to_euler(q, "zxy"), atol=1e-9)
        np.testing.assert_allclose(quat.angle(c * q, q), 0.0, atol=1e-7)
