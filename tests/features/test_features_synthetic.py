"""Root, trajectory and contact features on motions whose answer is known exactly."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from kinema.errors import KinemaError
from kinema.features import contacts as C
from kinema.features import root as R
from kinema.features import trajectory as T
from kinema.motion import Motion, Skeleton

NAMES = ["Hips", "LeftUpLeg", "LeftFoot", "RightUpLeg", "RightFoot", "Spine",
         "LeftShoulder", "LeftHand", "RightShoulder", "RightHand"]
PARENTS = [-1, 0, 1, 0, 3, 0, 5, 6, 5, 8]
OFFSETS = [[0, 1, 0], [0.1, 0, 0], [0, -0.9, 0], [-0.1, 0, 0], [0, -0.9, 0], [0, 0.4, 0],
           [0.15, 0.1, 0], [0.5, 0, 0], [-0.15, 0.1, 0], [-0.5, 0, 0.1]]


def _walk(frames: int = 200, fps: float = 30.0, seed: int = 0) -> tuple[Motion, np.ndarray]:
    """A skeleton walking on a curve, facing its yaw (known), with swinging arms."""
    rng = np.random.default_rng(seed)
    sk = Skeleton(NAMES, np.array(PARENTS), np.array(OFFSETS, np.float32))
    t = np.arange(frames) / fps
    yaw = 0.8 * np.sin(0.7 * t) + 0.3 * t
    rot = np.zeros((frames, len(NAMES), 4))
    rot[..., 0] = 1
    rot[:, 0] = Rotation.from_euler("y", yaw[:, None]).as_quat(scalar_first=True)
    rot[:, 7] = Rotation.from_euler("x", 0.5 * np.sin(5 * t)[:, None]).as_quat(scalar_first=True)
    rot[:, 2] = Rotation.from_rotvec(rng.normal(0, 0.2, (frames, 3))).as_quat(scalar_first=True)
    pos = np.broadcast_to(sk.offsets, (frames, len(NAMES), 3)).copy()
    step = np.stack([np.sin(yaw), np.zeros(frames), np.cos(yaw)], -1) * 1.2 / fps
    pos[:, 0] = np.cumsum(step, 0) + np.array([0.3, 1.0, -2.0])
    return Motion(sk, fps, rot, pos, name="synthetic"), yaw


LINES = R.RootConfig(position_joint="Hips", left_hip="LeftUpLeg", right_hip="RightUpLeg",
                     left_shoulder="LeftShoulder", right_shoulder="RightShoulder")


def test_root_from_lines_faces_the_known_yaw_and_sits_on_the_floor():
    m, yaw = _walk()
    gr, gp = m.global_transforms()
    root = R.compute_root(gp, gr, m.skeleton, LINES)
    assert root.positions.shape == (m.num_frames, 3)
    np.testing.assert_allclose(root.positions[:, 1], 0)
    np.testing.assert_allclose(root.positions[:, [0, 2]], gp[:, 0][:, [0, 2]], atol=1e-6)
    expected = np.stack([np.sin(yaw), np.zeros_like(yaw), np.cos(yaw)], -1)
    np.testing.assert_allclose(root.directions, expected, atol=1e-5)
    # the yaw quaternion maps +Z to the facing (scipy oracle), and it is yaw only
    rz = Rotation.from_quat(root.rotations.astype(np.float64), scalar_first=True).apply([0, 0, 1])
    np.testing.assert_allclose(rz, expected, atol=1e-5)
    np.testing.assert_allclose(root.rotations[:, [1, 3]], 0)


def test_root_from_joint_axis_matches_lines():
    m, yaw = _walk()
    gr, gp = m.global_transforms()
    cfg = R.RootConfig(position_joint=0, facing="axis", facing_joint="Hips", facing_axis=(0, 0, 1))
    root = R.compute_root(gp, gr, m.skeleton, cfg)
    np.testing.assert_allclose(np.arctan2(root.directions[:, 0], root.directions[:, 2]),
                               np.angle(np.exp(1j * yaw)), atol=1e-5)


@pytest.mark.parametrize("mode", ["savgol", "gaussian"])
def test_smoothing_removes_sway_and_matches_scipy(mode):
    m, _ = _walk(300)
    gr, gp = m.global_transforms()
    sway = gp.copy()
    sway[:, :, 0] += 0.05 * np.sin(np.arange(m.num_frames) * 2 * np.pi / 8)[:, None]  # 8-frame sway
    cfg = R.RootConfig(**{**LINES.__dict__, "smoothing": mode, "window": 31, "order": 3, "sigma": 6.0})
    smooth = R.compute_root(sway, gr, m.skeleton, cfg)
    raw = R.compute_root(gp, gr, m.skeleton, LINES)
    err = np.abs(smooth.positions[20:-20] - raw.positions[20:-20]).max()
    assert err < 0.02  # sway of 5 cm mostly removed
    if mode == "savgol":
        from scipy.signal import savgol_filter
        ref = savgol_filter(sway[:, 0].astype(np.float64), 31, 3, axis=0, mode="interp")
    else:
        from scipy.ndimage import gaussian_filter1d
        ref = gaussian_filter1d(sway[:, 0].astype(np.float64), 6.0, axis=0, mode="nearest")
    np.testing.assert_allclose(smooth.positions[:, [0, 2]], ref[:, [0, 2]], atol=1e-5)


def test_root_space_round_trip_and_rotation_against_scipy():
    m, _ = _walk()
    gr, gp = m.global_transforms()
    root = R.compute_root(gp, gr, m.skeleton, LINES)
    local = R.to_root_space(root, gp)
    np.testing.assert_allclose(R.from_root_space(root, local), gp, atol=1e-5)
    inv = Rotation.from_quat(root.rotations.astype(np.float64), scalar_first=True).inv()
    ref = np.stack([inv[f].apply(gp[f] - root.positions[f]) for f in range(m.num_frames)])
    np.testing.assert_allclose(local, ref, atol=1e-5)
    rq = R.rotations_to_root_space(root, gr.astype(np.float64))
    ref_q = np.stack([(inv[f] * Rotation.from_quat(gr[f], scalar_first=True)).as_matrix()
                      for f in range(m.num_frames)])
    np.testing.assert_allclose(Rotation.from_quat(rq.reshape(-1, 4), scalar_first=True).as_matrix()
                               .reshape(ref_q.shape), ref_q, atol=1e-5)
    v = m.velocities()
    np.testing.assert_allclose(R.vectors_from_root_space(root, R.vectors_to_root_space(root, v)), v, atol=1e-5)
    # the hips' forward in root space is +Z: the character faces forward in its own space
    fwd = R.vectors_to_root_space(root, root.directions)
    np.testing.assert_allclose(fwd, np.broadcast_to([0, 0, 1], fwd.shape), atol=1e-6)


def test_bad_config_names_the_problem():
    m, _ = _walk(10)
    gr, gp = m.global_transforms()
    with pytest.raises(KinemaError, match="Nope"):
        R.compute_root(gp, gr, m.skeleton, R.RootConfig(position_joint="Nope", left_hip=1, right_hip=3))
    with pytest.raises(KinemaError, match="left/right"):
        R.compute_root(gp, gr, m.skeleton, R.RootConfig())
    with pytest.raises(KinemaError, match="skeleton"):
        R.compute_root(gp, gr)
    # without a config the rule is guessed from the skeleton: hips and shoulders here
    guessed = R.RootConfig.guess(m.skeleton)
    assert (guessed.position_joint, guessed.left_hip, guessed.right_hip) == (0, 1, 3)
    assert (guessed.left_shoulder, guessed.right_shoulder) == (6, 8)
    np.testing.assert_allclose(R.compute_root(gp, gr, m.skeleton).directions,
                               R.compute_root(gp, gr, m.skeleton, LINES).directions, atol=1e-6)


def test_time_series_offsets():
    ts = T.TimeSeries(past=1.0, future=1.0, samples=7)
    np.testing.assert_array_equal(ts.offsets(30), [-30, -20, -10, 0, 10, 20, 30])
    np.testing.assert_array_equal(T.TimeSeries(0, 1, 4).offsets(60), [0, 20, 40, 60])
    with pytest.raises(KinemaError):
        T.TimeSeries(-1, 1, 3)


def test_trajectories_match_a_per_sample_reference_with_clamping():
    m, _ = _walk(120)
    gr, gp = m.global_transforms()
    root = R.compute_root(gp, gr, m.skeleton, LINES)
    ts = T.TimeSeries(0.5, 1.0, 7)
    off = ts.offsets(m.fps)
    traj = T.root_trajectory(root, ts, m.fps)
    jt = T.joint_trajectory(gp, gr, root, ts, m.fps, joints=[2, 4, 7])
    vel = np.gradient(root.positions.astype(np.float64), axis=0) * m.fps
    jvel = np.gradient(gp.astype(np.float64), axis=0) * m.fps
    for n in [0, 5, 60, 100, 119]:
        inv = Rotation.from_quat(root.rotations[n].astype(np.float64), scalar_first=True).inv()
        for s, o in enumerate(off):
            k = min(max(n + o, 0), m.num_frames - 1)
            np.testing.assert_allclose(traj.positions[n, s], inv.apply(root.positions[k] - root.positions[n]), atol=1e-5)
            np.testing.assert_allclose(traj.directions[n, s], inv.apply(root.directions[k]), atol=1e-5)
            np.testing.assert_allclose(traj.velocities[n, s], inv.apply(vel[k]), atol=1e-4)
            for i, j in enumerate([2, 4, 7]):
                np.testing.assert_allclose(jt.positions[n, s, i], inv.apply(gp[k, j] - root.positions[n]), atol=1e-5)
                np.testing.assert_allclose(jt.velocities[n, s, i], inv.apply(jvel[k, j]), atol=1e-4)
                mat = (inv * Rotation.from_quat(gr[k, j], scalar_first=True)).as_matrix()
                np.testing.assert_allclose(jt.rotations[n, s, i], np.concatenate([mat[:, 0], mat[:, 1]]), atol=1e-5)


def test_sixd_matches_scipy_matrix_columns():
    q = Rotation.random(50, random_state=1).as_quat(scalar_first=True)
    mat = Rotation.from_quat(q, scalar_first=True).as_matrix()
    np.testing.assert_allclose(T.quat_to_sixd(q), np.concatenate([mat[:, :, 0], mat[:, :, 1]], -1), atol=1e-12)
    # the same layout as the maths layer's 6D (kinema.maths.sixd), which decodes it
    from kinema.maths import quat, sixd
    np.testing.assert_allclose(T.quat_to_sixd(q), quat.to_6d(q), atol=1e-12)
    np.testing.assert_allclose(sixd.to_matrix(T.quat_to_sixd(q)), mat, atol=1e-12)


@pytest.mark.parametrize("axis", [0, 2])
def test_mirror_sixd_is_m_r_m(axis):
    q = Rotation.random(20, random_state=2).as_quat(scalar_first=True)
    mat = Rotation.from_quat(q, scalar_first=True).as_matrix()
    M = np.eye(3)
    M[axis, axis] = -1
    mm = M @ mat @ M
    np.testing.assert_allclose(T.mirror_sixd(T.quat_to_sixd(q), axis),
                               np.concatenate([mm[:, :, 0], mm[:, :, 1]], -1), atol=1e-12)


def test_mirrored_features_equal_features_of_the_mirrored_motion():
    m, _ = _walk(150)
    mm = m.mirror()
    joints = [2, 4, 7, 9]
    out = []
    for motion in (m, mm):
        gr, gp = motion.global_transforms()
        root = R.compute_root(gp, gr, motion.skeleton, R.RootConfig(**{**LINES.__dict__, "smoothing": "savgol"}))
        out.append((root, T.root_trajectory(root, T.TimeSeries(1, 1, 5), 30), T.joint_trajectory(
            gp, gr, root, T.TimeSeries(1, 1, 5), 30, joints=joints)))
    (r0, t0, j0), (r1, t1, j1) = out
    np.testing.assert_allclose(r0.mirror().positions, r1.positions, atol=1e-5)
    np.testing.assert_allclose(r0.mirror().directions, r1.directions, atol=1e-5)
    mt = t0.mirror()
    for a, b in [(mt.positions, t1.positions), (mt.directions, t1.directions), (mt.velocities, t1.velocities)]:
        np.testing.assert_allclose(a, b, atol=1e-4)
    mj = j0.mirror(T.subset_mirror_map(m.skeleton.mirror_map(), joints))
    for a, b in [(mj.positions, j1.positions), (mj.rotations, j1.rotations), (mj.velocities, j1.velocities)]:
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_contacts_thresholds_and_median_filter():
    f = 60
    p = np.zeros((f, 2, 3))
    p[:, 0, 1] = 0.05                       # joint 0 low ...
    p[:, 0, 0] = np.where(np.arange(f) < 30, 0.0, np.arange(f) * 0.1)  # ... still, then moving 3 m/s
    p[:, 1, 1] = 0.5                        # joint 1 high and still
    p[40, 0, 1] = 0.5                       # a one-frame spike the filter removes
    c = C.contacts(p, 30, [0, 1], height_threshold=0.1, speed_threshold=0.5, filter_size=5)
    assert c.shape == (f, 2) and c.dtype == bool
    assert c[:29, 0].all() and not c[32:, 0].any() and not c[:, 1].any()
    c2 = C.contacts(p, 30, [0, 1], height_threshold=None, speed_threshold=0.5, filter_size=1)
    assert c2[:, 1].all()


def test_local_phases_rise_from_each_onset():
    labels = np.zeros((100, 1), bool)
    for s in (10, 30, 60):
        labels[s:s + 8, 0] = True
    ph = C.local_phases(labels)[:, 0]
    assert ph.dtype == np.float32 and (ph >= 0).all() and (ph < 1).all()
    np.testing.assert_allclose(ph[[10, 30, 60]], 0)
    np.testing.assert_allclose(ph[20], 0.5)
    np.testing.assert_allclose(ph[45], 0.5)
    np.testing.assert_allclose(ph[5], 15 / 20)            # extended first cycle
    np.testing.assert_allclose(ph[75], 0.5)               # extended last cycle (period 30)
    assert (C.local_phases(np.zeros((10, 2), bool)) == 0).all()
    v = C.phase_vectors(ph)
    np.testing.assert_allclose(np.linalg.norm(v, axis=-1), 1, atol=1e-6)
