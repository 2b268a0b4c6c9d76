"""kinema.control.footlock.FootLock on a real skeleton (the bundled GAMES-105 walk): a planted
toe stays on its lock point while the body slides, every bone keeps its length, the knee
turns by the rotation that takes its old bone to the new one (scipy oracle), the release is
inertialized (no pop), ``release()`` on a controller switch does not pop, and bad input
raises."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kinema
from kinema.control.footlock import FootLock
from kinema.errors import KinemaError

DT = 1 / 60
FRAME = 80   # the left toe is on the floor (0.7 cm) with the leg bent enough to reach 10 cm back


@pytest.fixture(scope="module")
def walk(sample_data):
    m = kinema.load(sample_data / "games105" / "walk60.bvh")
    names = m.joint_names
    feet = [names.index("lAnkle"), names.index("rAnkle")]
    toes = [names.index("lToeJoint"), names.index("rToeJoint")]
    return m, m.global_rotations().astype(np.float64), m.global_positions().astype(np.float64), feet, toes


def _bones(pos, parents):
    kids = np.flatnonzero(parents >= 0)
    return np.linalg.norm(pos[kids] - pos[parents[kids]], axis=-1)


def _slid(pos, n, speed=0.004):
    """The pose moved n frames along +x at ``speed`` metres per frame (a sliding body)."""
    return pos + np.array([speed * n, 0.0, 0.0])


def test_planted_toe_stays_while_the_body_slides(walk):
    m, rot, pos, feet, toes = walk
    parents = np.asarray(m.parents)
    lock = FootLock(parents, feet, toes)
    r0, p0 = rot[FRAME], pos[FRAME]
    out = [lock.apply(r0, _slid(p0, n), np.array([True, False]), DT) for n in range(25)]
    start = out[0][1][toes[0]]
    drift = [np.linalg.norm(p[toes[0]] - start) for _, p in out]
    assert max(drift) < 2e-3                           # the raw toe moved 0.1 m
    assert np.linalg.norm(_slid(p0, 24)[toes[0]] - start) > 0.09
    for n, (r, p) in enumerate(out):
        raw = _slid(p0, n)
        np.testing.assert_allclose(_bones(p, parents), _bones(raw, parents), atol=1e-6)
        others = [j for j in range(len(parents)) if j not in (parents[feet[0]], feet[0], toes[0])]
        np.testing.assert_allclose(p[others], raw[others], atol=1e-9)    # only the left knee, ankle, toe move
        # the foot keeps its world rotation (so the toe keeps its place relative to the ankle)
        assert Rotation.from_quat(r[feet[0]], scalar_first=True).approx_equal(
            Rotation.from_quat(r0[feet[0]], scalar_first=True), atol=1e-6)
    # oracle: the knee's new world rotation is its old one turned by the swing taking its
    # old bone (knee -> ankle) to the new one
    r, p = out[-1]
    raw = _slid(p0, 24)
    knee = parents[feet[0]]
    swing = Rotation.from_quat(r[knee], scalar_first=True) * Rotation.from_quat(r0[knee], scalar_first=True).inv()
    old = raw[feet[0]] - raw[knee]
    new = p[feet[0]] - p[knee]
    np.testing.assert_allclose(swing.apply(old / np.linalg.norm(old)), new / np.linalg.norm(new), atol=1e-6)


def test_release_is_inertialized_and_returns_to_the_animation(walk):
    m, rot, pos, feet, toes = walk
    lock = FootLock(m.parents, feet, toes)
    r0, p0 = rot[FRAME], pos[FRAME]
    shown = [lock.apply(r0, _slid(p0, n), np.array([True, False]), DT)[1][toes[0]] for n in range(20)]
    gap = np.linalg.norm(_slid(p0, 19)[toes[0]] - shown[-1])
    assert gap > 0.07
    for n in range(20, 80):   # contact over: the toe goes back to the (still sliding) animation
        shown.append(lock.apply(r0, _slid(p0, n), np.array([False, False]), DT)[1][toes[0]])
    steps = np.linalg.norm(np.diff(shown, axis=0), axis=-1)
    assert steps[19] < 0.25 * gap                      # no pop at the release
    assert steps.max() < 0.25 * gap
    assert np.linalg.norm(shown[-1] - _slid(p0, 79)[toes[0]]) < 2e-3
    assert not lock.toe_locks[0].locked


def test_unlock_radius_lets_a_far_toe_go(walk):
    m, rot, pos, feet, toes = walk
    lock = FootLock(m.parents, feet, toes, unlock_radius=0.05)
    for n in range(20):   # 4 mm per frame: the animated toe is 5 cm away after 13 frames
        lock.apply(rot[FRAME], _slid(pos[FRAME], n), np.array([True, True]), DT)
        if n == 5:
            assert lock.toe_locks[0].locked and lock.toe_locks[1].locked
    assert not lock.toe_locks[0].locked and not lock.toe_locks[1].locked


def test_release_on_a_switch_does_not_pop(walk):
    m, rot, pos, feet, toes = walk
    lock = FootLock(m.parents, feet, toes)
    r0, p0 = rot[FRAME], pos[FRAME]
    for n in range(15):
        _, p = lock.apply(r0, _slid(p0, n), np.array([True, True]), DT)
    lock.release()                                     # e.g. another controller takes over
    _, q = lock.apply(r0, _slid(p0, 15), np.array([True, False]), DT)
    # still planted: the left toe locks afresh where it was shown; the right one lets go smoothly
    assert np.linalg.norm(q[toes[0]] - p[toes[0]]) < 1e-3 and lock.toe_locks[0].locked
    assert not lock.toe_locks[1].locked
    assert np.linalg.norm(q[toes[1]] - p[toes[1]]) < 0.01
    lock.reset()
    _, q = lock.apply(r0, _slid(p0, 16), np.array([False, False]), DT)
    np.testing.assert_allclose(q, _slid(p0, 16), atol=1e-12)   # forgotten: the animation as it is


def test_bad_input_raises(walk):
    m, rot, pos, feet, toes = walk
    with pytest.raises(KinemaError, match="knee"):
        FootLock(m.parents, [1, feet[1]], toes)        # the hip has no upper leg above its parent
    with pytest.raises(KinemaError, match="toes"):
        FootLock(m.parents, feet, toes[:1])
    lock = FootLock(m.parents, feet, toes)
    with pytest.raises(KinemaError, match="shapes"):
        lock.apply(rot[0, :5], pos[0, :5], np.zeros(2), DT)
    with pytest.raises(KinemaError, match="contact labels"):
        lock.apply(rot[0], pos[0], np.zeros(3), DT)
