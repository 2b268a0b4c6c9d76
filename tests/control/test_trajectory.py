"""Stick -> springs -> trajectory: speeds, directions (camera / character relative), dead
zone, and predictions equal to stepping the simulation with the input held."""
from __future__ import annotations

import numpy as np
import pytest

from kinema.control.trajectory import ControlConfig, TrajectoryController, read_stick, yaw_direction


def _run(ctrl, stick, seconds, **kw):
    for _ in range(int(round(seconds * 60))):
        ctrl.update(np.asarray(stick, float), 1 / 60, **kw)
    return ctrl.sim


def test_read_stick_dead_zone_and_squared_response():
    assert np.all(read_stick(0.1, 0.1) == 0)
    np.testing.assert_allclose(read_stick(0.0, 0.5), [0.0, 0.25])
    np.testing.assert_allclose(read_stick(3.0, 4.0), [0.6, 0.8])  # clamped to unit length


def test_forward_run_and_walk_speeds_and_facing():
    ctrl = TrajectoryController()
    sim = _run(ctrl, [0, 1], 4.0)
    np.testing.assert_allclose(sim.velocity, [0, 0, 4.0], atol=1e-4)
    np.testing.assert_allclose(sim.direction, [0, 0, 1], atol=1e-6)
    sim = _run(ctrl, [0, 1], 4.0, walk=True)
    np.testing.assert_allclose(sim.velocity, [0, 0, 1.75], atol=1e-4)
    assert sim.position[1] == 0


def test_camera_relative_directions():
    ctrl = TrajectoryController()
    sim = _run(ctrl, [1, 0], 4.0)  # right of a camera looking along +Z is -X
    np.testing.assert_allclose(sim.velocity / np.linalg.norm(sim.velocity), [-1, 0, 0], atol=1e-4)
    np.testing.assert_allclose(sim.direction, [-1, 0, 0], atol=1e-4)  # turns to face it
    ctrl = TrajectoryController()
    sim = _run(ctrl, [0, 1], 4.0, camera_yaw=np.pi / 2)  # camera looks along +X
    np.testing.assert_allclose(sim.velocity, [4.0, 0, 0], atol=1e-3)


def test_character_relative_and_strafe_backwards():
    ctrl = TrajectoryController(ControlConfig(camera_relative=False), yaw=np.pi)
    sim = _run(ctrl, [0, 1], 4.0)
    np.testing.assert_allclose(sim.velocity, [0, 0, -4.0], atol=1e-3)
    # strafing: face forward with the right stick while moving backwards -> backward speed
    ctrl = TrajectoryController()
    sim = _run(ctrl, [0, -1], 5.0, facing_stick=np.array([0.0, 1.0]))
    np.testing.assert_allclose(sim.velocity, [0, 0, -2.5], atol=1e-3)
    np.testing.assert_allclose(sim.direction, [0, 0, 1], atol=1e-6)
    # released stick: stops and keeps the facing
    sim = _run(ctrl, [0, 0], 5.0)
    np.testing.assert_allclose(sim.velocity, 0, atol=1e-4)
    np.testing.assert_allclose(sim.direction, [0, 0, 1], atol=1e-6)


def test_prediction_equals_stepping_with_input_held():
    ctrl = TrajectoryController(yaw=0.3)
    _run(ctrl, [0.3, 0.8], 0.5)  # mid-turn, accelerating
    stick = np.array([-0.5, 0.5])
    # hold a stick whose desired velocity/facing no longer change: aligned facing after a turn
    _run(ctrl, stick, 6.0)
    _run(ctrl, [0, 0], 0.2)  # now braking and released: targets constant
    pred = ctrl.predict()
    ref = []
    for _ in range(3):
        _run(ctrl, [0, 0], 1 / 3)
        ref.append((ctrl.sim.position.copy(), ctrl.sim.direction.copy(), ctrl.sim.velocity.copy()))
    np.testing.assert_allclose(pred.positions, [r[0] for r in ref], atol=1e-9)
    np.testing.assert_allclose(pred.directions, [r[1] for r in ref], atol=1e-9)
    np.testing.assert_allclose(pred.velocities, [r[2] for r in ref], atol=1e-9)


def test_prediction_while_turning_matches_stepping():
    ctrl = TrajectoryController()
    _run(ctrl, [0, 1], 3.0)
    ctrl.update(np.array([-1.0, 0.0]), 1 / 60)  # stick left: turn toward +X (the character's left)
    pred = ctrl.predict()
    # while turning, the desired velocity changes with the facing (anisotropic speeds), so
    # the held-input prediction is close to, not equal to, the future
    _run(ctrl, [-1.0, 0.0], 1 / 3)
    np.testing.assert_allclose(pred.directions[0], ctrl.sim.direction, atol=0.05)
    assert np.all(np.diff(pred.directions[:, 0]) > 0) and pred.directions[2][0] > 0.9


def test_features_layout_straight_line():
    ctrl = TrajectoryController(yaw=np.pi / 2)
    _run(ctrl, [0, 1], 5.0, camera_yaw=np.pi / 2)  # running along +X at 4 m/s
    pred = ctrl.predict()
    f = pred.features(ctrl.sim.position, yaw_direction(np.pi / 2))
    assert f.shape == (12,)
    np.testing.assert_allclose(f[:6], [0, 4 / 3, 0, 8 / 3, 0, 4.0], atol=1e-3)
    np.testing.assert_allclose(f[6:], [0, 1, 0, 1, 0, 1], atol=1e-6)


@pytest.mark.parametrize("dt", [1 / 30, 1 / 60])
def test_frame_rate_independent(dt):
    def run(step):
        c = TrajectoryController()
        for _ in range(int(round(2.0 / step))):
            c.update(np.array([0.4, 0.9]), step)
        return c.sim
    a, b = run(dt), run(1 / 240)
    np.testing.assert_allclose(a.position, b.position, atol=0.03)  # only the turn is sampled
    np.testing.assert_allclose(a.direction, b.direction, atol=1e-3)


@pytest.mark.parametrize("camera_relative", [True, False])
def test_batch_equals_characters_stepped_one_by_one(camera_relative):
    """B simulations stepped as one batch (one array update, one closed-form prediction)
    give exactly what B single controllers give: sticks, walking, camera yaw and the strafe
    stick differ per character."""
    rng = np.random.default_rng(5)
    b, frames = 7, 240
    cfg = ControlConfig(camera_relative=camera_relative)
    pos, yaw = rng.normal(size=(b, 3)), rng.uniform(-3, 3, b)
    batch = TrajectoryController(cfg, pos, yaw, batch=b)
    singles = [TrajectoryController(cfg, pos[i], yaw[i]) for i in range(b)]
    roots = np.stack([yaw_direction(0.4 * i) for i in range(b)]).astype(np.float32)  # as a controller root
    for f in range(frames):
        sticks = rng.uniform(-1, 1, (b, 2)) * (rng.random((b, 1)) > 0.2)
        walk = rng.random(b) < 0.3
        facing = rng.uniform(-1, 1, (b, 2)) * (rng.random((b, 1)) > 0.5) if f % 2 else None
        batch.update(sticks, 1 / 60, walk=walk, camera_yaw=0.01 * f, facing_stick=facing)
        for i, s in enumerate(singles):
            s.update(sticks[i], 1 / 60, walk=bool(walk[i]), camera_yaw=0.01 * f,
                     facing_stick=None if facing is None else facing[i])
        got = batch.predict().features(batch.sim.position * 0.9, roots)
        want = np.stack([s.predict().features(s.sim.position * 0.9, roots[i]) for i, s in enumerate(singles)])
        assert got.shape == (b, 4 * len(cfg.times))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(batch.sim.direction, np.stack([s.sim.direction for s in singles]))
    assert np.ptp(batch.sim.position[:, 0]) > 1.0   # the characters went different ways
