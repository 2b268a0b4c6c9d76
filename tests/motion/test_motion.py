import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from kinema.errors import SkeletonError
from kinema.maths import quat
from kinema.motion import Motion, Skeleton, concatenate

NAMES = ["Hips", "LeftUpLeg", "LeftLeg", "RightUpLeg", "RightLeg", "Spine", "Head"]
PARENTS = [-1, 0, 1, 0, 3, 0, 5]


def make_motion(frames=40, fps=30.0, seed=0):
    rng = np.random.default_rng(seed)
    offsets = np.array([[0, 1, 0], [0.1, 0, 0], [0, -0.4, 0], [-0.1, 0, 0], [0, -0.4, 0], [0, 0.2, 0], [0, 0.3, 0]])
    sk = Skeleton(NAMES, PARENTS, offsets)
    # smooth random rotations: integrate small random angular steps
    steps = Rotation.from_rotvec(rng.normal(scale=0.05, size=(frames, len(NAMES), 3)))
    rots = [Rotation.random(len(NAMES), random_state=seed)]
    for f in range(1, frames):
        rots.append(steps[f] * rots[-1])
    rot = np.stack([r.as_quat(scalar_first=True) for r in rots])
    pos = np.broadcast_to(offsets, (frames, len(NAMES), 3)).copy()
    pos[:, 0] += np.cumsum(rng.normal(scale=0.01, size=(frames, 3)), axis=0)
    return Motion(sk, fps, rot, pos, name="synthetic")


def test_shapes_and_properties():
    m = make_motion()
    assert m.num_frames == 40 and m.num_joints == 7 and m.fps == 30
    assert m.duration == pytest.approx(40 / 30)
    assert m.global_positions().shape == (40, 7, 3)
    assert m.global_rotations().shape == (40, 7, 4)
    assert m.joint_names == NAMES


def test_bad_shapes_are_rejected():
    m = make_motion()
    with pytest.raises(SkeletonError):
        Motion(m.skeleton, 30, m.rotations[:, :3], m.positions)
    with pytest.raises(SkeletonError):
        Motion(m.skeleton, 0, m.rotations, m.positions)


def test_resample_up_and_down_reproduces_original_frames():
    m = make_motion()
    up = m.resample(60)
    assert up.num_frames == 2 * m.num_frames - 1
    back = up.resample(30)
    assert back.num_frames == m.num_frames
    np.testing.assert_allclose(back.positions, m.positions, atol=1e-6)
    np.testing.assert_allclose(np.abs(np.sum(back.rotations * m.rotations, -1)), 1, atol=1e-6)


def test_at_fps_resamples_only_when_the_rate_differs():
    m = make_motion(fps=30.0)
    assert m.at_fps(30.0) is m and m.at_fps(30.0005) is m       # within the default 1e-3
    near = m.at_fps(30.0005, tolerance=0)                        # exact: any other rate
    assert near is not m and near.fps == 30.0005
    up = m.at_fps(60.0)
    np.testing.assert_array_equal(up.positions, m.resample(60.0).positions)
    assert up.fps == 60.0 and up.num_frames == 2 * m.num_frames - 1


def test_resample_midpoints_are_slerp_halfway():
    m = make_motion()
    up = m.resample(60)
    mid = up.rotations[1::2]
    a, b = m.rotations[:-1], m.rotations[1:]
    # the midpoint is equally far (geodesically) from both neighbours
    np.testing.assert_allclose(quat.angle(mid, a), quat.angle(mid, b), atol=1e-5)
    np.testing.assert_allclose(quat.angle(mid, a) * 2, quat.angle(a, b), atol=1e-5)


def test_mirror_twice_is_identity_and_mirrors_world_positions():
    m = make_motion()
    mm = m.mirror().mirror()
    np.testing.assert_allclose(mm.positions, m.positions, atol=0)
    np.testing.assert_allclose(mm.rotations, m.rotations, atol=0)
    mirrored = m.mirror()
    swap = m.skeleton.mirror_map()
    expected = m.global_positions()[:, swap] * np.array([-1, 1, 1])
    np.testing.assert_allclose(mirrored.global_positions(), expected, atol=1e-5)


def test_slicing_and_concatenate():
    m = make_motion()
    assert m[5:15].num_frames == 10
    assert m[3].num_frames == 1
    np.testing.assert_array_equal(m[3].rotations[0], m.rotations[3])
    joined = concatenate([m[:10], m[10:]])
    np.testing.assert_array_equal(joined.rotations, m.rotations)
    with pytest.raises(SkeletonError, match="resample"):
        concatenate([m, m.resample(60)])


def test_velocities_of_a_translating_root():
    m = make_motion()
    m.positions[:, 0] = np.arange(m.num_frames)[:, None] * np.array([0.02, 0, 0.01])
    v = m.velocities()
    np.testing.assert_allclose(v[:, 0], np.broadcast_to([0.6, 0, 0.3], (m.num_frames, 3)), atol=1e-4)


def test_angular_velocity_of_a_constant_spin():
    m = make_motion()
    rate = 1.5  # rad/s about y
    t = np.arange(m.num_frames) / m.fps
    m.rotations[:, 0] = quat.from_axis_angle(np.array([0.0, 1.0, 0.0]), rate * t)
    w = m.angular_velocities()
    np.testing.assert_allclose(w[:, 0], np.broadcast_to([0, rate, 0], (m.num_frames, 3)), atol=1e-4)


def test_bone_lengths_constant_over_time():
    m = make_motion()
    lengths = m.bone_lengths()
    np.testing.assert_allclose(lengths, np.broadcast_to(lengths[0], lengths.shape), atol=1e-5)
    assert lengths[0, 2] == pytest.approx(0.4, abs=1e-6)


def test_from_global_round_trip():
    m = make_motion()
    grot, gpos = m.global_transforms()
    back = Motion.from_global(m.skeleton, m.fps, grot, gpos)
    np.testing.assert_allclose(back.positions, m.positions, atol=1e-5)
    np.testing.assert_allclose(np.abs(np.sum(back.rotations * m.rotations, -1)), 1, atol=1e-5)
