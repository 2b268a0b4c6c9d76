"""Features on real mocap (LaFAN1, Bandai-Namco in ../shared/data)."""
from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema.features import contacts as C
from kinema.features import root as R
from kinema.features import trajectory as T
from kinema.ik import foot_lock


def _facing_error_degrees(motion, config):
    gr, gp = motion.global_transforms()
    root = R.compute_root(gp, gr, motion.skeleton, config)
    v = root.velocities(motion.fps)
    speed = np.linalg.norm(v, axis=-1)
    moving = speed > 0.5
    cos = (v[moving] * root.directions[moving]).sum(-1) / speed[moving]
    return np.degrees(np.arccos(np.clip(cos, -1, 1)))


def test_root_faces_the_walking_direction_on_forward_walks(shared_data):
    # every forward-walk take of dataset-1 (15 styles x 2 takes) and dataset-2 normal walks
    files = sorted((shared_data / "bandai_namco" / "dataset-1").glob("*_walk_*.bvh"))
    files += sorted((shared_data / "bandai_namco" / "dataset-2").glob("*_walk_normal_*.bvh"))[:10]
    err = np.concatenate([_facing_error_degrees(kinema.load(f), R.RootConfig.bandai()) for f in files])
    # measured: 99.8% of moving frames below 30 degrees, median about 5 degrees
    assert err.size > 3000
    assert (err < 30).mean() > 0.99
    assert np.median(err) < 10
    # walking backwards: the root faces away from the motion
    back = _facing_error_degrees(kinema.load(next((shared_data / "bandai_namco" / "dataset-1")
                                                  .glob("*_walk-back_*.bvh"))), R.RootConfig.bandai())
    assert np.median(back) > 150


def test_lafan1_walk_facing_mostly_follows_motion(shared_data):
    m = kinema.load(shared_data / "lafan1" / "walk4_subject1.bvh")
    err = _facing_error_degrees(m, R.RootConfig.lafan1())
    # walk4 mixes forward walking with side steps and turns: measured 89.9% below 30 degrees
    assert (err < 30).mean() > 0.85
    assert np.median(err) < 15


def _onset_alternation(labels):
    on = C.onsets(labels)
    events = sorted([(f, 0) for f in on[0]] + [(f, 1) for f in on[1]])
    sides = np.array([s for _, s in events])
    return (sides[1:] != sides[:-1]).mean(), len(sides)


def test_contacts_alternate_left_right_during_walking(shared_data):
    files = sorted((shared_data / "bandai_namco" / "dataset-1").glob("*_walk_*.bvh"))[:10]
    alternation = []
    for f in files:
        m = kinema.load(f)
        feet = [m.skeleton.index("Foot_L"), m.skeleton.index("Foot_R")]
        labels = C.contacts(m.global_positions(), m.fps, feet, height_threshold=0.17, speed_threshold=0.5)
        rate, steps = _onset_alternation(labels)
        assert steps >= 6
        alternation.append(rate)
        # both feet are on the ground part of the time, not all of it
        assert 0.2 < labels.mean() < 0.8
    assert np.mean(alternation) > 0.95   # measured 1.00
    m = kinema.load(shared_data / "lafan1" / "walk4_subject1.bvh")
    labels = C.contacts(m.global_positions(), m.fps, [m.skeleton.index("LeftFoot"), m.skeleton.index("RightFoot")],
                        height_threshold=0.15, speed_threshold=0.5)
    rate, steps = _onset_alternation(labels)
    assert steps > 200 and rate > 0.9     # measured 0.96 over 259 steps
    ph = C.local_phases(labels)
    assert ph.shape == labels.shape and (ph >= 0).all() and (ph < 1).all()


@pytest.fixture(scope="module")
def lafan_clip(shared_data):
    return kinema.load(shared_data / "lafan1" / "walk4_subject1.bvh")[:900]


def test_future_trajectory_equals_root_that_many_frames_later(lafan_clip):
    m = lafan_clip
    gr, gp = m.global_transforms()
    root = R.compute_root(gp, gr, m.skeleton, R.RootConfig.lafan1())
    series = T.TimeSeries(0, 1, 4)                        # +0, +10, +20, +30 frames at 30 fps
    traj = T.root_trajectory(root, series, m.fps)
    world = R.from_root_space(root, traj.positions)
    for s, o in enumerate(series.offsets(m.fps)):
        later = np.minimum(np.arange(m.num_frames) + o, m.num_frames - 1)
        np.testing.assert_allclose(world[:, s], root.positions[later], atol=1e-4)
        np.testing.assert_allclose(R.vectors_from_root_space(root, traj.directions[:, s]), root.directions[later],
                                   atol=1e-5)
    # the joint features of offset 0 are the root-space pose
    jt = T.joint_trajectory(gp, gr, root, [0], m.fps)
    np.testing.assert_allclose(jt.positions[:, 0], R.to_root_space(root, gp), atol=1e-5)


def test_mirrored_features_equal_features_of_mirrored_lafan1(lafan_clip):
    m = lafan_clip
    mirror_map = m.skeleton.mirror_map()
    joints = [m.skeleton.index(n) for n in ("LeftFoot", "RightFoot", "LeftHand", "RightHand", "Head")]
    series = T.TimeSeries(1, 1, 7)
    feats = []
    for motion in (m, m.mirror()):
        gr, gp = motion.global_transforms()
        root = R.compute_root(gp, gr, motion.skeleton, R.RootConfig.lafan1())
        labels = C.contacts(gp, motion.fps, joints[:2])
        feats.append((T.root_trajectory(root, series, m.fps), T.joint_trajectory(gp, gr, root, series, m.fps,
                                                                                 joints=joints), labels))
    (t0, j0, c0), (t1, j1, c1) = feats
    mt, mj = t0.mirror(), j0.mirror(T.subset_mirror_map(mirror_map, joints))
    np.testing.assert_allclose(mt.positions, t1.positions, atol=2e-4)
    np.testing.assert_allclose(mt.directions, t1.directions, atol=2e-4)
    np.testing.assert_allclose(mt.velocities, t1.velocities, atol=2e-3)
    np.testing.assert_allclose(mj.positions, j1.positions, atol=2e-4)
    np.testing.assert_allclose(mj.rotations, j1.rotations, atol=2e-4)
    np.testing.assert_allclose(mj.velocities, j1.velocities, atol=2e-3)
    np.testing.assert_array_equal(c0[:, ::-1], c1)


def test_foot_lock_pins_planted_feet_on_real_walk(lafan_clip):
    m = lafan_clip[:300]
    gr, gp = m.global_transforms()
    feet = [m.skeleton.index("LeftFoot"), m.skeleton.index("RightFoot")]
    labels = C.contacts(gp, m.fps, feet, height_threshold=0.15, speed_threshold=0.5)
    res = foot_lock(gr, gp, m.parents, feet, labels, release_frames=5)
    assert np.isfinite(res.positions).all()
    before, after, pinned = [], [], []
    for k, j in enumerate(feet):
        c = labels[:, k]
        inside = c[1:] & c[:-1]                   # consecutive contact frames
        step_before = np.linalg.norm(np.diff(gp[:, j], axis=0), axis=-1)
        step_after = np.linalg.norm(np.diff(res.positions[:, j], axis=0), axis=-1)
        before.append(step_before[inside])
        after.append(step_after[inside])
        # where the lock is not dragged along (the animation stays within max_drift of it)
        held = np.linalg.norm(res.targets[:, k] - gp[:, j], axis=-1) < 0.1 - 1e-6
        pinned.append(step_after[inside & held[1:] & held[:-1]])
    before, after, pinned = np.concatenate(before), np.concatenate(after), np.concatenate(pinned)
    assert pinned.size > 100 and pinned.max() < 1e-3           # planted feet stay put
    assert after.sum() < 0.5 * before.sum()                     # foot sliding more than halved
    # bone lengths unchanged everywhere
    par = m.parents[1:]
    np.testing.assert_allclose(np.linalg.norm(res.positions[:, 1:] - res.positions[:, par], axis=-1),
                               np.linalg.norm(gp[:, 1:] - gp[:, par], axis=-1), atol=1e-5)
    # the release is smooth: no foot jumps more than the animation's fastest foot step
    jumps = np.linalg.norm(np.diff(res.positions[:, feet], axis=0), axis=-1)
    assert jumps.max() < 2 * np.linalg.norm(np.diff(gp[:, feet], axis=0), axis=-1).max()
    # away from contacts and releases nothing changes
    free = (res.weights == 0).all(1)
    np.testing.assert_allclose(res.positions[free], gp[free], atol=1e-6)
