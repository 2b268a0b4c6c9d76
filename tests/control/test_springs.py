"""Springs: exact closed forms against the analytic values of Spring-It-On / the research
notes, the semigroup property, and an independent ODE integration (scipy solve_ivp)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.spatial.transform import Rotation

from kinema.control import springs


def test_notes_example_and_semigroup():
    # notes §5: h = 0.27 s, (x, v) = (1, 0.5) -> (0.0390797, -0.1674625) after 1 s either way
    one = springs.decay_spring(1.0, 0.5, 0.27, 1.0)
    x, v = 1.0, 0.5
    for _ in range(60):
        x, v = springs.decay_spring(x, v, 0.27, 1 / 60)
    np.testing.assert_allclose(one, (0.0390797, -0.1674625), atol=5e-8)
    np.testing.assert_allclose((x, v), one, rtol=1e-12, atol=1e-15)


def test_analytic_decay_values():
    h = 0.35
    assert springs.decay_spring(1.0, 0.0, h, h)[0] == pytest.approx(0.59657, abs=5e-6)
    assert springs.decay_spring(1.0, 0.0, h, 2 * h)[0] == pytest.approx(0.23579, abs=5e-6)
    assert springs.decay_spring(2.0, 0.0, h, 7 * h)[0] / 2 == pytest.approx(6.5e-4, rel=0.02)
    assert springs.damper(1.0, 0.0, h, h) == pytest.approx(0.5, abs=1e-12)
    assert springs.halflife_to_damping(springs.damping_to_halflife(3.0)) == pytest.approx(3.0)


def test_spring_matches_ode_with_moving_goal():
    h, g, gv, x0, v0 = 0.2, np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.0, -1.0]), np.zeros(3), np.array([2.0, 1.0, 0.0])
    y = 2 * np.log(2) / h

    def rhs(t, s):
        x, v = s[:3], s[3:]
        return np.concatenate([v, -2 * y * (v - gv) - y * y * (x - g - gv * t)])
    sol = solve_ivp(rhs, (0, 0.7), np.concatenate([x0, v0]), rtol=1e-11, atol=1e-12)
    x, v = springs.spring(x0, v0, g, h, 0.7, goal_velocity=gv)
    np.testing.assert_allclose(x, sol.y[:3, -1], atol=1e-8)
    np.testing.assert_allclose(v, sol.y[3:, -1], atol=1e-8)
    # semigroup with a moving goal (the goal advances between steps)
    xs, vs, gs = x0, v0, g
    for _ in range(35):
        xs, vs = springs.spring(xs, vs, gs, h, 0.02, goal_velocity=gv)
        gs = gs + gv * 0.02
    np.testing.assert_allclose(xs, x, atol=1e-12)
    np.testing.assert_allclose(vs, v, atol=1e-12)


def test_velocity_spring_matches_ode_and_semigroup():
    h, vg = 0.27, np.array([1.5, 0.0, -0.5])
    x0, v0, a0 = np.array([0.1, 0.0, 0.2]), np.array([-1.0, 0.0, 2.0]), np.array([0.5, 0.0, 0.0])
    y = 2 * np.log(2) / h

    def rhs(t, s):
        v, a = s[3:6], s[6:]
        return np.concatenate([v, a, -2 * y * a - y * y * (v - vg)])
    sol = solve_ivp(rhs, (0, 1.0), np.concatenate([x0, v0, a0]), rtol=1e-11, atol=1e-12)
    one = springs.velocity_spring(x0, v0, a0, vg, h, 1.0)
    for got, ref in zip(one, (sol.y[:3, -1], sol.y[3:6, -1], sol.y[6:, -1])):
        np.testing.assert_allclose(got, ref, atol=1e-8)
    state = (x0, v0, a0)
    for _ in range(60):
        state = springs.velocity_spring(*state, vg, h, 1 / 60)
    for got, ref in zip(state, one):
        np.testing.assert_allclose(got, ref, atol=1e-12)
    # predictions at several times equal stepping there
    times = np.array([20, 40, 60]) / 60
    px, pv, pa = springs.velocity_spring_predict(x0, v0, a0, vg, h, times)
    assert px.shape == (3, 3)
    np.testing.assert_allclose(px[2], one[0], atol=1e-12)
    np.testing.assert_allclose(pv[0], springs.velocity_spring(x0, v0, a0, vg, h, 1 / 3)[1], atol=1e-12)


def test_vectorised_over_items_with_per_item_halflife():
    x = np.random.default_rng(0).normal(size=(5, 3))
    h = np.array([0.05, 0.1, 0.2, 0.4, 0.8])
    out, _ = springs.decay_spring(x, np.zeros_like(x), h, 0.3)
    for i in range(5):
        np.testing.assert_allclose(out[i], springs.decay_spring(x[i], np.zeros(3), h[i], 0.3)[0])


def test_zero_halflife_snaps_and_zero_dt_is_identity():
    x, v = springs.spring(np.array([3.0]), np.array([1.0]), np.array([-1.0]), 0.0, 1 / 60)
    np.testing.assert_allclose(x, [-1.0])
    np.testing.assert_allclose(v, [0.0], atol=1e-12)
    x, v = springs.spring(np.array([3.0]), np.array([1.0]), np.array([-1.0]), 0.0, 0.0)
    np.testing.assert_allclose((x, v), ([3.0], [1.0]))


def test_quat_spring_unit_shortest_arc_and_single_axis_equals_scalar_spring():
    rng = np.random.default_rng(1)
    q = Rotation.random(50, random_state=2).as_quat(scalar_first=True)
    goal = Rotation.random(50, random_state=3).as_quat(scalar_first=True)
    w = rng.normal(size=(50, 3))
    q1, w1 = springs.quat_spring(q, w, goal, 0.15, 0.4)
    np.testing.assert_allclose(np.linalg.norm(q1, axis=-1), 1.0, atol=1e-12)
    # semigroup on rotations
    qs, ws = q, w
    for _ in range(40):
        qs, ws = springs.quat_spring(qs, ws, goal, 0.15, 0.01)
    ang = (Rotation.from_quat(qs, scalar_first=True) * Rotation.from_quat(q1, scalar_first=True).inv()).magnitude()
    assert ang.max() < 1e-9
    np.testing.assert_allclose(ws, w1, atol=1e-9)
    # about a fixed axis, the angle follows the scalar spring (shortest arc: |angle| <= pi)
    axis = np.array([0.0, 0.6, 0.8])
    a0, om0 = 2.5, -1.0
    qa = Rotation.from_rotvec(a0 * axis).as_quat(scalar_first=True)
    q2, w2 = springs.quat_spring(qa, om0 * axis, np.array([1.0, 0, 0, 0]), 0.3, 0.25)
    a_ref, om_ref = springs.spring(a0, om0, 0.0, 0.3, 0.25)
    np.testing.assert_allclose(Rotation.from_quat(q2, scalar_first=True).as_rotvec(), a_ref * axis, atol=1e-12)
    np.testing.assert_allclose(w2, om_ref * axis, atol=1e-12)
    # converges to the goal
    q3, _ = springs.quat_spring(q, w, goal, 0.1, 5.0)
    ang = (Rotation.from_quat(q3, scalar_first=True) * Rotation.from_quat(goal, scalar_first=True).inv()).magnitude()
    assert ang.max() < 1e-6


def test_quat_decay_spring_matches_vector_decay():
    v = np.array([[0.3, -1.2, 0.4]])
    q = Rotation.from_rotvec(v).as_quat(scalar_first=True)
    q1, w1 = springs.quat_decay_spring(q, np.array([[0.1, 0.2, 0.3]]), 0.2, 0.3)
    x1, wv = springs.decay_spring(v, np.array([[0.1, 0.2, 0.3]]), 0.2, 0.3)
    np.testing.assert_allclose(Rotation.from_quat(q1, scalar_first=True).as_rotvec(), x1, atol=1e-12)
    np.testing.assert_allclose(w1, wv, atol=1e-12)
