"""Inertialization: exact continuity at dt = 0, decay of the offset, unit rotations."""
from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from kinema.control.inertialize import Inertializer, PoseState


def _pose(seed: int, joints: int = 22) -> PoseState:
    rng = np.random.default_rng(seed)
    return PoseState(
        positions=rng.normal(size=(joints, 3)),
        velocities=rng.normal(size=(joints, 3)),
        rotations=Rotation.random(joints, random_state=seed).as_quat(scalar_first=True),
        angular_velocities=rng.normal(size=(joints, 3)),
    )


def _assert_same(a: PoseState, b: PoseState, atol=1e-12):
    np.testing.assert_allclose(a.positions, b.positions, atol=atol)
    np.testing.assert_allclose(a.velocities, b.velocities, atol=atol)
    dots = np.abs(np.sum(a.rotations * b.rotations, axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=atol)
    np.testing.assert_allclose(a.angular_velocities, b.angular_velocities, atol=atol)


def test_continuity_at_dt_zero_through_repeated_transitions():
    src = _pose(0)
    inert = Inertializer(src, halflife=0.1)
    out = inert.update(src, 0.0)
    _assert_same(out, src)  # no offsets yet: output == input
    before = out
    for seed in (1, 2, 3):
        dst = _pose(seed)
        inert.transition(src, dst)
        after = inert.update(dst, 0.0)
        _assert_same(after, before)  # the output does not jump
        # advance a little on the new animation, then transition again mid-blend
        before = inert.update(dst, 1 / 60)
        src = dst
        np.testing.assert_allclose(np.linalg.norm(before.rotations, axis=-1), 1.0, atol=1e-12)


def test_offset_decays_like_the_spring_and_converges():
    src, dst = _pose(4), _pose(5)
    dst.velocities = src.velocities.copy()  # zero velocity offset: |off(t)| / |off(0)| = (1 + yt) e^-yt
    dst.angular_velocities = src.angular_velocities.copy()
    h = 0.1
    inert = Inertializer(src, halflife=h)
    inert.transition(src, dst)
    off0 = src.positions - dst.positions
    out = inert.update(dst, 7 * h)
    ratio = np.linalg.norm(out.positions - dst.positions, axis=-1) / np.linalg.norm(off0, axis=-1)
    np.testing.assert_allclose(ratio, 6.5e-4, rtol=0.02)
    out = inert.update(dst, 60 * h)
    _assert_same(out, dst, atol=1e-9)


def test_error_shrinks_and_reset_drops_offsets():
    a, b = _pose(6), _pose(7)
    inert = Inertializer(a)
    inert.transition(a, b)
    outs = [inert.update(b, 1 / 60) for _ in range(30)]
    err = [np.abs(o.positions - b.positions).max() for o in outs]
    assert err[-1] < err[0]
    assert np.all(np.isfinite([o.rotations for o in outs]))
    inert.reset()
    _assert_same(inert.update(a, 0.5), a)
