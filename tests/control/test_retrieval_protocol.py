"""The evaluation protocol that a frozen or damped controller cannot win (NOTES.md 3.5):
motion energy, Fréchet distance, grouped intervals, the inertialized motion-matching
baseline, rigid poses and the scripted-stick scenarios, on real GAMES-105 windows."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg, stats

from kinema.control.retrieval.metrics import (
    ENERGY_BAND,
    energy_gate,
    frechet,
    grouped_bootstrap_ci,
    joint_positions,
    summary,
    window_metrics,
)


def _windows(db, length=60, offset=10):
    long = db.ranges[:, 1] - db.ranges[:, 0] >= length + offset + 30
    starts = db.ranges[long, 0] + offset
    assert len(starts) >= 4
    rows = starts[:, None] + np.arange(length)[None]
    return rows, db.pose[rows], db.root_positions[rows], db.root_directions[rows]


def test_truth_frozen_and_half_energy_pinned(games105_db, games105_retriever):
    """The truth scores speed and acceleration ratios of exactly 1, skating equal to its own,
    a Fréchet distance of 0 and passes the energy gate; the frozen first pose scores an
    energy ratio of 0 and fails it; a 50/50 blend with the mean pose halves speed and
    acceleration (positions are linear in the pose vector) and fails it too."""
    db, norm = games105_db, games105_retriever.norm
    rows, true, tp, td = _windows(db)
    roots = (tp, td, tp, td)
    m = window_metrics(true, true, norm, db, 0.05, roots)
    np.testing.assert_allclose(m["joint_speed_ratio"], 1.0, rtol=1e-6)
    np.testing.assert_allclose(m["accel_ratio"], 1.0, rtol=1e-6)
    np.testing.assert_allclose(m["world_joint_error_cm"], 0.0, atol=1e-6)
    s = summary(m, m)
    assert s["frechet"] == pytest.approx(0.0, abs=1e-4) and s["energy_window_fraction"] == 1.0
    assert energy_gate(s)
    skate_truth = m["foot_skate_cm_s"]
    assert skate_truth.mean() > 0   # real mocap skates a little under the detector
    frozen = np.repeat(true[:, :1], true.shape[1], 1)
    fr = window_metrics(frozen, true, norm, db, 0.05, (np.repeat(tp[:, :1], tp.shape[1], 1),
                                                      np.repeat(td[:, :1], td.shape[1], 1), tp, td))
    sf = summary(fr, m)
    assert sf["joint_speed_ratio"] == 0.0 and sf["accel_ratio"] == 0.0 and sf["energy_window_fraction"] == 0.0
    assert not energy_gate(sf) and sf["frechet"] > 1.0
    assert sf["foot_skate_cm_s"] == 0.0   # which is why skating is never read alone
    half = 0.5 * true + 0.5 * norm.mean
    h = summary(window_metrics(half, true, norm, db, 0.05, roots), m)
    assert h["joint_speed_ratio"] == pytest.approx(0.5, rel=1e-4)
    assert h["accel_ratio"] == pytest.approx(0.5, rel=1e-4)
    assert not energy_gate(h) and h["energy_window_fraction"] == 0.0


def test_frechet_reads_the_body_not_a_world_origin_joint_above_the_hips(shared_data):
    """Bandai-Namco's ``joint_Root`` (above the hips, left at the world origin) is, in root
    space, the world origin seen from the character. A prediction whose body is the truth's
    but whose ``joint_Root`` sits where another take's origin was (as a motion-matching row
    from another clip puts it) scores a Fréchet distance of 0, while a body 20 frames late
    does not; over every joint the origin alone scored it far from the truth."""
    from kinema.control.retrieval.metrics import body_joints, motion_features, pose_slice
    from kinema.features.normalisation import Normaliser
    from kinema.matching.database import build_from_paths

    clips = [shared_data / "bandai_namco" / "dataset-2" / f"dataset-2_{kind}_normal_001.bvh" for kind in ("walk", "run")]
    db = build_from_paths(clips, "bandai", mirror=True, progress=False)
    norm = Normaliser.fit(db.pose, floor=1e-2)
    top = int(db.parents[db.roles["hips"]])
    assert db.joint_names[top] == "joint_Root" and not body_joints(db)[top] and body_joints(db).sum() == db.num_joints - 1
    rows, true, tp, td = _windows(db, 60, 40)
    other = true.copy()
    slots = np.arange(db.num_joints * 3).reshape(-1, 3)[top] + pose_slice(db, "joint_positions").start
    other[..., slots] = true[::-1][..., slots]          # the origin as the other windows saw it
    assert np.abs(other[..., slots] - true[..., slots]).max() > 1.0
    ref = window_metrics(true, true, norm, db, 0.05)
    assert summary(window_metrics(other, true, norm, db, 0.05), ref)["frechet"] == pytest.approx(0.0, abs=1e-4)
    assert summary(window_metrics(db.pose[rows - 20], true, norm, db, 0.05), ref)["frechet"] > 0.1
    every = [motion_features(joint_positions(db, x), db.fps).reshape(-1, 6 * db.num_joints) for x in (other, true)]
    assert frechet(every[0], every[1], groups=2) > 1.0


def test_damping_lowers_joint_error_and_fails_the_energy_gate(games105_db, games105_retriever):
    """A controller that moves like the actor but out of step (the truth 20 frames late, as
    the LaFAN1 diagnosis found) passes the gate; pulling it toward an exponential average of
    its own past poses (the damping sweep of benchmarks/diagnose_retrieval.py) lowers its
    joint error, and fails the gate: joint error alone would select the damped one."""
    db, norm = games105_db, games105_retriever.norm
    rows, true, tp, td = _windows(db, 60, 40)
    late = db.pose[rows - 20]
    damped = late.copy()
    anchor = late[:, 0].copy()
    for t in range(1, late.shape[1]):
        anchor = 0.9 * anchor + 0.1 * damped[:, t - 1]
        damped[:, t] = late[:, t] + 0.6 * (anchor - late[:, t])
    ref = window_metrics(true, true, norm, db, 0.05)
    s_late = summary(window_metrics(late, true, norm, db, 0.05), ref)
    s_damp = summary(window_metrics(damped, true, norm, db, 0.05), ref)
    assert s_damp["joint_error_cm"] < s_late["joint_error_cm"]
    assert energy_gate(s_late) or s_late["energy_window_fraction"] >= 0.5
    assert not energy_gate(s_damp)
    assert s_damp["joint_speed_ratio"] < ENERGY_BAND[0]


def test_frechet_matches_scipy_sqrtm_oracle():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(400, 6)) @ rng.normal(size=(6, 6))
    b = rng.normal(size=(500, 6)) @ rng.normal(size=(6, 6)) + 0.3
    mean, std = b.mean(0), b.std(0).mean()
    za, zb = (a - mean) / std, (b - mean) / std
    sa, sb = np.cov(za, rowvar=False), np.cov(zb, rowvar=False)
    ref = ((za.mean(0) - zb.mean(0)) ** 2).sum() + np.trace(sa + sb - 2 * linalg.sqrtm(sa @ sb).real)
    assert frechet(a, b) == pytest.approx(ref, rel=1e-6)
    assert frechet(b, b) == pytest.approx(0.0, abs=1e-9)


def test_grouped_bootstrap_widens_for_correlated_windows():
    """Windows of one take share its offset: resampling takes (then windows) gives a wider
    interval than resampling windows alone, and one group falls back to the plain one."""
    rng = np.random.default_rng(4)
    takes = np.repeat(np.arange(6), 30)
    values = rng.normal(0, 1, 6)[takes] + rng.normal(0, 0.2, len(takes))
    lo, hi = grouped_bootstrap_ci(values, takes, n=3000)
    plain = stats.bootstrap((values,), np.mean, n_resamples=3000, method="percentile", random_state=0).confidence_interval
    assert lo < values.mean() < hi
    assert hi - lo > 2.0 * (plain.high - plain.low)
    assert grouped_bootstrap_ci(values, np.zeros(len(values), int)) == grouped_bootstrap_ci(values, None)


def test_rigid_pose_keeps_rest_bone_lengths(games105_db):
    """Database poses are unchanged by the projection; a pose whose positions were stretched
    gets its rest bone lengths back (rebuilt from its rotations), in NumPy and torch."""
    import torch

    from kinema.control.retrieval.pose import rigid_pose
    from kinema.control.retrieval.scenarios import bone_lengths, rigid_bones

    db = games105_db
    poses = db.pose[::7]
    np.testing.assert_allclose(rigid_pose(db, poses), poses, atol=2e-6)
    stretched = poses.copy()
    jp = joint_positions(db, stretched)
    jp *= 1.3
    rest = np.linalg.norm(db.offsets, axis=-1)
    rigid = rigid_bones(db)
    assert np.abs(bone_lengths(joint_positions(db, stretched), db.parents) - rest)[:, rigid].max() > 0.01
    fixed = rigid_pose(db, stretched)
    assert np.abs(bone_lengths(joint_positions(db, fixed), db.parents) - rest)[:, rigid].max() < 1e-5
    t = rigid_pose(db, torch.as_tensor(stretched, dtype=torch.float64).requires_grad_())
    np.testing.assert_allclose(t.detach().numpy(), fixed, atol=1e-5)
    t.sum().backward()   # differentiable: trainable through the projection


def test_rigid_pose_unit_gives_back_the_data_form_of_a_drifted_6d(games105_db):
    """With ``unit`` a 6D whose columns were scaled and skewed (what a fed-back network's
    raw output drifts into, invisible to the decoder) becomes the data's unit, orthogonal
    columns again: the database's rows are kept, the drifted rows come back to them (and
    draw the same joints); without ``unit`` the drift stays. NumPy and torch, differentiable."""
    import torch

    from kinema.control.retrieval.metrics import pose_slice
    from kinema.control.retrieval.pose import rigid_pose

    db = games105_db
    sl = pose_slice(db, "joint_rotations_6d")
    poses = db.pose[::7]
    np.testing.assert_allclose(rigid_pose(db, poses, unit=True), poses, atol=2e-6)
    rng = np.random.default_rng(0)
    six = poses[:, sl].reshape(len(poses), db.num_joints, 2, 3)
    drifted = poses.copy()
    scaled = six * rng.uniform(0.3, 3.0, six.shape[:3] + (1,))
    scaled[:, :, 1] += rng.uniform(-2.0, 2.0, six.shape[:2] + (1,)) * six[:, :, 0]   # second column skewed along the first
    drifted[:, sl] = scaled.reshape(len(poses), -1)
    assert np.abs(rigid_pose(db, drifted)[:, sl] - poses[:, sl]).max() > 0.5
    fixed = rigid_pose(db, drifted, unit=True)
    np.testing.assert_allclose(fixed[:, sl], poses[:, sl], atol=1e-5)
    np.testing.assert_allclose(joint_positions(db, fixed), joint_positions(db, poses), atol=1e-5)
    t = torch.as_tensor(drifted, dtype=torch.float64).requires_grad_()
    out = rigid_pose(db, t, unit=True)
    np.testing.assert_allclose(out.detach().numpy(), fixed, atol=1e-5)
    out.sum().backward()
    assert torch.isfinite(t.grad).all()


def test_rigid_pose_rebuilds_the_joint_velocities_from_the_joints_motion(games105_db):
    """With ``prev`` the joint velocities are the joints' world motion from the pose before,
    in the new root space: on consecutive database rows they are the backward differences
    of the data's own central ones (the mean of two consecutive rebuilt velocities, the
    later turned back by its frame's yaw, is the data's to a few mm/s, 5-7 times nearer
    than one alone); a drifted velocity is replaced; numpy and torch agree, differentiable."""
    import torch

    from kinema.control.retrieval.metrics import pose_slice
    from kinema.control.retrieval.pose import rigid_pose

    db = games105_db
    sl = pose_slice(db, "joint_velocities")
    w = pose_slice(db, "root_angular_velocity").start + 1
    moving = 0
    for a, b in db.ranges:
        prev, new = db.pose[a:b - 1], db.pose[a + 1:b]
        v = rigid_pose(db, new, prev=prev)[:, sl].reshape(len(new), db.num_joints, 3)
        true = new[:-1, sl].reshape(-1, db.num_joints, 3)
        turn = (new[1:, w] / db.fps)[:, None]
        c, s_ = np.cos(turn), np.sin(turn)
        nxt = v[1:]
        back = np.stack([c * nxt[..., 0] + s_ * nxt[..., 2], nxt[..., 1], -s_ * nxt[..., 0] + c * nxt[..., 2]], -1)
        central = np.abs((v[:-1] + back) / 2 - true).mean()
        backward = np.abs(v[:-1] - true).mean()
        speed = np.abs(true).mean()
        assert central < 0.02 * speed + 1e-3, (a, central, speed)
        if speed > 0.1:                       # a clip in motion: the half-frame lag shows
            moving += 1
            assert backward > 4 * central, (a, backward, central)
    assert moving >= 4
    prev, new = db.pose[:-1:5], db.pose[1::5].copy()
    ok = rigid_pose(db, new, prev=prev)
    new[:, sl] += 3.0                         # a drifted prediction
    np.testing.assert_allclose(rigid_pose(db, new, prev=prev), ok, atol=1e-5)
    assert np.abs(rigid_pose(db, new)[:, sl] - ok[:, sl]).min() > 2.0   # without prev: kept as predicted
    t = torch.as_tensor(new, dtype=torch.float64).requires_grad_()
    out = rigid_pose(db, t, prev=torch.as_tensor(prev, dtype=torch.float64))
    np.testing.assert_allclose(out.detach().numpy(), ok, atol=1e-4)
    out[:, sl].sum().backward()
    assert torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0


def test_rigid_pose_keeps_a_sunk_pose_above_the_ground(games105_db):
    """A pose whose hips drifted 1 m down (legs through the floor, the crowd's sinking
    character) is lifted until its lowest body joint touches the ground, every body joint
    by the same height (bones unchanged), in NumPy and torch; the database's rows, whose
    toes never go below the ground by its definition, are kept."""
    import torch

    from kinema.control.retrieval.metrics import body_joints
    from kinema.control.retrieval.pose import ground_height, rigid_pose

    db = games105_db
    ground = ground_height(db)
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    assert ground == pytest.approx(joint_positions(db, db.pose)[:, toes, 1].min())
    poses = db.pose[::7]
    np.testing.assert_allclose(rigid_pose(db, poses, ground), poses, atol=2e-6)
    sunk = poses.copy()
    jp = joint_positions(db, sunk)
    jp[..., 1] -= 1.0
    assert joint_positions(db, rigid_pose(db, sunk))[..., 1].min() < ground - 0.9   # no ground: left sunk
    fixed = joint_positions(db, rigid_pose(db, sunk, ground))
    np.testing.assert_allclose(fixed[..., body_joints(db), 1].min(-1), ground, atol=1e-5)
    orig, hips = joint_positions(db, poses), db.roles["hips"]
    np.testing.assert_allclose(fixed - fixed[:, hips:hips + 1], orig - orig[:, hips:hips + 1], atol=1e-4)   # one rigid lift
    np.testing.assert_allclose(fixed[..., [0, 2]], orig[..., [0, 2]], atol=1e-5)
    t = torch.as_tensor(sunk, dtype=torch.float64).requires_grad_()
    out = rigid_pose(db, t, ground)
    np.testing.assert_allclose(joint_positions(db, out.detach().numpy()), fixed, atol=1e-5)
    out.sum().backward()
    assert torch.isfinite(t.grad).all()


def test_rigid_pose_keeps_the_hips_within_the_datas_reach_of_the_root(games105_db):
    """A pose whose hips strayed 2 m from the root (the runaway of session 28's LaFAN1 twin:
    root-space hips at 1e10 m after 5 s from a lying pose, fed back through the rebuilt
    velocities) is pulled back horizontally until the hips lie at the data's reach, every body
    joint by the same step (bones and heights unchanged), in NumPy and torch; the database's
    rows, whose hips never stray past the reach by its definition, are kept."""
    import torch

    from kinema.control.retrieval.pose import hips_reach, rigid_pose

    db = games105_db
    hips = db.roles["hips"]
    reach = hips_reach(db)
    rows = joint_positions(db, db.pose)[:, hips]
    assert reach == pytest.approx(np.hypot(rows[:, 0], rows[:, 2]).max())
    poses = db.pose[::7]
    np.testing.assert_allclose(rigid_pose(db, poses, reach=reach), poses, atol=2e-6)
    strayed = poses.copy()
    jp = joint_positions(db, strayed)
    jp[:, hips, 0] += 2.0
    assert np.hypot(*joint_positions(db, rigid_pose(db, strayed))[:, hips][:, [0, 2]].T).min() > 1.9   # no reach: kept
    fixed = joint_positions(db, rigid_pose(db, strayed, reach=reach))
    np.testing.assert_allclose(np.hypot(fixed[:, hips, 0], fixed[:, hips, 2]), reach, atol=1e-5)
    orig = joint_positions(db, poses)
    np.testing.assert_allclose(fixed - fixed[:, hips:hips + 1], orig - orig[:, hips:hips + 1], atol=1e-4)   # one rigid step
    np.testing.assert_allclose(fixed[..., 1], orig[..., 1], atol=1e-5)
    t = torch.as_tensor(strayed, dtype=torch.float64).requires_grad_()
    out = rigid_pose(db, t, reach=reach)
    np.testing.assert_allclose(joint_positions(db, out.detach().numpy()), fixed, atol=1e-5)
    out.sum().backward()
    assert torch.isfinite(t.grad).all()


def test_inertialized_matching_starts_where_the_actor_is(games105_db, games105_retriever):
    """The runtime motion-matching baseline starts from the true pose (inertialized), so
    its first frame is much nearer the truth than playback's jump to the matched row."""
    from kinema.control.retrieval.evaluate import matching_rollout
    from kinema.control.retrieval.rollout import playback_rollout

    db = games105_db
    rows, true, tp, td = _windows(db, 60, 40)
    starts = rows[:, 0] - 16
    clips = db.clip_of(starts)
    exclude = np.stack([clips, db.twins[clips]], 1)
    mm, _, _, _ = matching_rollout(db, db, starts, 16, 30, exclude)
    pb, _, _ = playback_rollout(games105_retriever, db, starts, 16, 30, games105_retriever.refresh, exclude)
    truth = joint_positions(db, db.pose[(starts + 16)[:, None] + np.arange(30)[None]])
    first = lambda p: np.linalg.norm(joint_positions(db, p)[:, 0] - truth[:, 0], axis=-1).mean() * 100  # noqa: E731
    assert first(mm) < 0.5 * first(pb)
    assert np.isfinite(mm).all()


def test_matching_rollout_drives_the_controller_it_is_given(games105_db):
    """``matching_rollout(controller=)`` drives that controller: a plain one reproduces the
    default exactly, and a subclass that never transitions plays consecutive rows from the
    row it started on (what ``benchmarks/learned_choice.py`` relies on to plug in a chooser)."""
    from kinema.control.matching import MotionMatchingController
    from kinema.control.retrieval.evaluate import matching_rollout

    class Held(MotionMatchingController):
        searches = 0

        def _search(self, due, next_rows, request=None, clips=None):
            self.searches += 1
            return next_rows, np.zeros(len(due), bool)

    db = games105_db
    rows, _, _, _ = _windows(db, 60, 40)
    starts = rows[:1, 0] - 16
    clips = db.clip_of(starts)
    exclude = np.stack([clips, db.twins[clips]], 1)
    base = matching_rollout(db, db, starts, 16, 30, exclude)
    same = matching_rollout(db, db, starts, 16, 30, exclude, controller=MotionMatchingController(db))
    for a, b in zip(base, same):
        np.testing.assert_array_equal(a, b)
    held = Held(db)
    out = matching_rollout(db, db, starts, 16, 30, exclude, controller=held)
    assert held.searches == 30 // held.config.search_every
    first = held.frame - 30
    np.testing.assert_array_equal(out[3][0], db.contacts[first + 1:first + 31] > 0.5)
    assert db.clip_of(first) == db.clip_of(held.frame)


@pytest.fixture(scope="module")
def sample_controller():
    from kinema.control.retrieval.evaluate import open_database
    from kinema.demos.locomotion import MODEL_DIR, SAMPLE_MODEL
    from kinema.nn.checkpoint import read_metadata

    path = MODEL_DIR / SAMPLE_MODEL
    return path, open_database(None, read_metadata(path))


def test_scenarios_measure_what_a_user_sees(sample_controller):
    """The scripted sticks through the runtime (``long_idle`` five times as long as the
    others): with rigid poses every bone keeps its rest length on every drawn frame;
    drawing the network's raw positions lets them drift (the
    tear the metric exists to catch); standing still travels far less than walking."""
    from kinema.control.retrieval.controller import RetrievalController
    from kinema.control.retrieval.scenarios import run_scenarios

    path, db = sample_controller
    rigid = run_scenarios(RetrievalController(path, db), ["idle", "stop_start", "long_idle"], frames=480)
    raw = run_scenarios(RetrievalController(path, db, rigid=False), ["stop_start"], frames=480)
    assert rigid["idle"]["frames"] == 480 and rigid["long_idle"]["frames"] == 5 * 480   # the released stick, 5x as long
    for sc in rigid.values():
        assert sc["finite"] and sc["head_above_hips"] and sc["bone_length_drift_mm"] <= 1.0
        assert 0.5 < sc["torso_share_min"] < 1.2   # upright, as the data's rows (0.83 or more)
    assert raw["stop_start"]["bone_length_drift_mm"] > 10.0
    assert rigid["idle"]["travelled_m"] < 0.25 * rigid["stop_start"]["travelled_m"]
    assert rigid["idle"]["stride_ratio"] is None and rigid["stop_start"]["stride_ratio"] > 0
    assert 0.0 <= rigid["idle"]["feet_down_share"] <= 1.0   # idle asks to stand from the second second on
    from kinema.control.retrieval.scenarios import SCENARIOS, run_scenario, stride_ratio
    traces: dict = {}
    res = run_scenario(RetrievalController(path, db), SCENARIOS["stop_start"], 240, traces=traces)
    assert traces["drawn"].shape == (240, db.num_joints, 3) and traces["local_toes"].shape == (240, 2, 3)
    assert stride_ratio(traces["local_toes"], traces["roots"], db.fps) == res["stride_ratio"]


def test_scenarios_drive_motion_matching_as_a_user_runs_it(sample_controller):
    """The scenarios' and the crowd's motion matching is the inertialized runtime controller:
    the driver draws exactly what stepping the controller with the same sticks draws, no
    bone stretches, and the root follows the stick. Its root pull cannot be switched off."""
    from kinema.control.matching import MotionMatchingController
    from kinema.control.retrieval.matching_driver import MatchingDriver
    from kinema.control.retrieval.metrics import floor_height
    from kinema.control.retrieval.scenarios import SCENARIOS, crowd_starts, run_crowd, run_scenario, run_scenarios

    _, db = sample_controller

    def make(**kw):
        return MotionMatchingController(db, **kw)

    traces: dict = {}
    turns = run_scenario(MatchingDriver(make, db), SCENARIOS["turns"], 240, foot_lock=False, traces=traces)
    ctl = make(start_frame=0)
    for f in range(240):
        stick, walk = SCENARIOS["turns"](f / 60.0)
        out = ctl.step(np.asarray(stick, np.float64), 1 / 60.0, walk=walk)
        np.testing.assert_allclose(traces["drawn"][f], out.positions, atol=1e-9)
    res = run_scenarios(MatchingDriver(make, db), ["idle", "stop_start"], frames=480)
    for sc in res.values():
        assert sc["finite"] and sc["head_above_hips"] and sc["bone_length_drift_mm"] <= 1.0
        assert sc["torso_share_min"] > 0.8   # it plays the data's rows
    assert res["stop_start"]["root_error_m"] < 0.2 and res["stop_start"]["stride_ratio"] > 0
    # motion matching plays the data's rows: its support toe rests where the data's does
    from kinema.control.retrieval.scenarios import database_support_height
    from kinema.control.retrieval.targets import SUPPORT_SLACK_M
    assert abs(res["stop_start"]["support_height_m"] - database_support_height(db)) < SUPPORT_SLACK_M
    lower = traces["drawn"][:, [db.roles["left_toe"], db.roles["right_toe"]], 1].min(1)
    assert turns["support_height_m"] == pytest.approx(np.median(lower) - floor_height(db))
    seeds, rows = crowd_starts(db, 8, 0)
    crowd = run_crowd(MatchingDriver(make, db, 8, rows), seeds, 120)
    assert crowd["finite"] and crowd["characters"] == 8 and crowd["fallen"] == 0
    # its root pull is part of its config, not a switch: asking to turn it off is an error
    from kinema.errors import KinemaError
    with pytest.raises(KinemaError, match="adjust=False"):
        run_crowd(MatchingDriver(make, db, 8, rows), seeds, 1, adjust=False)


def test_stride_ratio_tells_steps_from_a_glide(games105_db):
    """Real walking rows: their toes move about as fast per root speed as the whole
    database's; the same roots with the legs frozen (a glide) score 0."""
    from kinema.control.retrieval.scenarios import database_stride_ratio, stride_ratio

    db = games105_db
    ref = database_stride_ratio(db)
    assert 0.8 < ref < 2.5
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    names = [n for n in db.clip_names if "walk" in n and not n.endswith("_mirror")]
    lo, hi = db.ranges[db.clip_names.index(names[0])]
    local = joint_positions(db, db.pose[lo:hi])[:, toes]
    roots = db.root_positions[lo:hi]
    walking = stride_ratio(local, roots, db.fps)
    assert 0.6 * ref < walking < 1.6 * ref
    assert stride_ratio(np.broadcast_to(local[:1], local.shape), roots, db.fps) == 0.0
    assert stride_ratio(local, np.broadcast_to(roots[:1], roots.shape), db.fps) is None   # standing


def test_feet_down_share_tells_standing_from_a_raised_knee(games105_db):
    """The sample actor's standing (the idle clip, settled by its root path) has both toes
    on the floor; the same frames with one toe lifted 0.3 m (a knee held up) score 0; a
    path counts as settled only a second after it stops."""
    from kinema.control.retrieval.metrics import floor_height
    from kinema.control.retrieval.scenarios import TOE_DOWN_M, database_feet_down_share, feet_down_share, settled_frames

    db = games105_db
    assert database_feet_down_share(db) > 0.9
    lo, hi = db.ranges[db.clip_names.index("idle")]
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    heights = joint_positions(db, db.pose[lo:hi])[:, toes, 1] - floor_height(db)
    settled = settled_frames(db.root_positions[lo:hi], db.fps)
    assert settled.mean() > 0.5
    standing = feet_down_share(heights, settled)
    assert standing > 0.9
    raised = heights.copy()
    raised[:, 0] += 0.3
    assert feet_down_share(raised, settled) == 0.0
    assert feet_down_share(heights + TOE_DOWN_M, settled) == 0.0   # both feet off the floor: a hop
    path = np.zeros((240, 3))
    path[:120, 2] = np.arange(120) * 0.02   # 1.2 m/s for 2 s, then still
    path[120:, 2] = path[119, 2]
    s = settled_frames(path, 60.0)
    assert not s[:179].any() and s[179:].all()   # 60 still steps (frames 120-179) make the second
    assert feet_down_share(heights[:240], np.zeros(240, bool)) is None


def test_rigid_pose_on_mirrored_lafan1_rows(shared_data):
    """LaFAN1's bone axes are not mirror-symmetric (the legs lie along local x), so its
    mirrored clips hold rotations of a reflected skeleton: the projection must rebuild every
    row, original and mirrored, exactly, and a perturbed pose to within millimetres."""
    from kinema.control.retrieval.pose import offset_sets, rigid_pose
    from kinema.control.retrieval.training import build_clips
    from kinema.matching.config import DatabaseConfig

    db = build_clips([shared_data / "lafan1" / "walk4_subject1.bvh"], DatabaseConfig.preset("lafan1"), True)
    assert len(offset_sets(db)) == 2 and db.clip_mirrored.any()
    for c in range(len(db.clip_names)):
        lo, hi = db.ranges[c]
        rows = db.pose[lo:hi:25]
        np.testing.assert_allclose(rigid_pose(db, rows), rows, atol=1e-5)
    rng = np.random.default_rng(5)
    noisy = db.pose[::40] + rng.normal(0, 0.003, db.pose[::40].shape).astype(np.float32)
    out = joint_positions(db, rigid_pose(db, noisy))
    assert np.abs(out - joint_positions(db, db.pose[::40])).max() < 0.1


def test_foot_skate_weighs_every_frame_by_how_near_the_toe_is_to_the_floor():
    """Skating is each toe's horizontal speed weighted 1 at or below the floor height, 0 two
    centimetres above it (linearly between), averaged over every frame: a toe gliding just
    above the floor still skates (before session 33 it scored 0), a lifted one does not, and
    a window that glides for a tenth of its frames reads a tenth of that speed (before: the
    whole speed, decided by those few frames)."""
    from kinema.control.retrieval.metrics import foot_skate

    fps, floor, speed = 30.0, 0.02, 0.3   # m/s: 30 cm/s
    x = np.arange(31)[None, :, None] * speed / fps   # (1, 31, 1)

    def glide(height: float) -> np.ndarray:
        toes = np.zeros((1, 31, 2, 3))
        toes[..., 0], toes[..., 1] = x, height
        return foot_skate(toes, floor, fps)[0]

    assert glide(floor - 0.01) == pytest.approx(30.0)
    assert glide(floor + 0.005) == pytest.approx(30.0 * 0.75)
    assert glide(floor + 0.015) == pytest.approx(30.0 * 0.25)
    assert glide(floor + 0.03) == 0.0
    toes = np.zeros((1, 101, 2, 3))
    toes[0, 1:11, :, 0] = (np.arange(1, 11) * 3.0 / fps)[:, None]   # 3 m/s over 10 of 100 steps
    toes[0, 11:, :, 0] = toes[0, 10, :, 0]
    assert foot_skate(toes, floor, fps)[0] == pytest.approx(30.0)


def test_foot_lock_holds_planted_toes_of_a_sliding_character(games105_db, games105_retriever):
    """The runtime foot lock as the evaluation applies it (``foot_lock``): real windows whose
    root slides forward 0.15 m/s faster than the actor skate more than the truth; locked on
    the true contact labels they lose the added skating (the slide stays inside the lock's
    0.2-m unlock radius over a 1-s window), and the frozen pose (detected
    contacts: every toe still) stays at 0. Without the lock no locked figure is reported."""
    from kinema.control.planted import plant_weights
    from kinema.control.retrieval.metrics import floor_height, world_positions

    db, norm = games105_db, games105_retriever.norm
    rows, true, tp, td = _windows(db)
    labels = db.contacts[rows] > 0.5
    floor = floor_height(db)
    slide = tp + (np.arange(tp.shape[1]) / db.fps * 0.15)[None, :, None] * td
    m = window_metrics(true, true, norm, db, floor, (slide, td, tp, td), True, labels)
    truth = window_metrics(true, true, norm, db, floor, (tp, td, tp, td))
    assert "foot_skate_locked_cm_s" not in truth
    # skating weighs each frame by how much the toe is on the floor: the slide adds 15 cm/s
    # times that share of the window
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    heights = world_positions(joint_positions(db, true), tp, td)[:, 1:, toes, 1]
    share = plant_weights(heights, floor).mean((1, 2))
    assert np.all(share > 0.2)
    assert np.all(m["foot_skate_cm_s"] > truth["foot_skate_cm_s"] + 0.5 * 15.0 * share)
    # the lock takes away (at least 80% of) the slide in every window
    assert np.all(m["foot_skate_cm_s"] - m["foot_skate_locked_cm_s"] > 0.8 * 15.0 * share)
    frozen = np.repeat(true[:, :1], true.shape[1], 1)
    still = (np.repeat(tp[:, :1], tp.shape[1], 1), np.repeat(td[:, :1], td.shape[1], 1), tp, td)
    assert window_metrics(frozen, true, norm, db, floor, still, True)["foot_skate_locked_cm_s"].max() == 0.0


def test_energy_loss_charges_damping_not_phase(games105_db):
    """The training's energy term (``train.energy_weight``): 0 for the truth, about the same
    for the truth 20 frames late (it moves like the actor, out of step: the pose MSE charges
    that, the energy term need not), and large for the frozen pose and for a 50/50 blend
    with the window's mean pose (damped)."""
    import torch

    from kinema.control.retrieval.training import energy_loss

    db = games105_db
    rows, true, _, _ = _windows(db, 60, 40)
    t = torch.as_tensor(true)
    late = torch.as_tensor(db.pose[rows - 20])
    frozen = t[:, :1].expand_as(t)
    damped = 0.5 * t + 0.5 * t.mean(1, keepdim=True)
    assert float(energy_loss(db, t, t)) == 0.0
    assert float(energy_loss(db, late, t)) < 0.05
    assert float(energy_loss(db, damped, t)) > 4 * float(energy_loss(db, late, t)) + 0.05
    assert float(energy_loss(db, frozen, t)) > float(energy_loss(db, damped, t))


def test_accel_loss_charges_jitter_not_phase(games105_db):
    """The training's acceleration term (``train.accel_weight``): 0 for the truth, small for
    the truth 20 frames late, large for the truth with a 1-cm frame-to-frame jitter on every
    joint (what a rollout whose accel_ratio is 2.6 looks like), and larger for more jitter."""
    import torch

    from kinema.control.retrieval.metrics import pose_slice
    from kinema.control.retrieval.training import accel_loss

    db = games105_db
    rows, true, _, _ = _windows(db, 60, 40)
    t = torch.as_tensor(true)
    late = torch.as_tensor(db.pose[rows - 20])
    sign = torch.as_tensor((-1.0) ** np.arange(true.shape[1]), dtype=t.dtype)[None, :, None]

    def jitter(cm: float) -> torch.Tensor:
        out = t.clone()
        out[..., pose_slice(db, "joint_positions")] += 0.01 * cm * sign
        return out

    assert float(accel_loss(db, t, t)) == 0.0
    assert float(accel_loss(db, late, t)) < 0.1
    assert float(accel_loss(db, jitter(1.0), t)) > 0.5
    assert float(accel_loss(db, jitter(2.0), t)) > float(accel_loss(db, jitter(1.0), t))


def test_skate_loss_on_own_contacts_charges_a_sliding_root(games105_db):
    """``skate_on = "own"``: the frames with a toe on the floor are those of the predicted
    pose itself (what the skating metric reads), so a rollout is charged for sliding its
    planted toes even out of phase with the truth: the truth pays little, the truth with
    15 cm/s more root speed pays much more, and the contacts carry no gradient (lifting a
    toe is not a way out)."""
    import torch

    from kinema.control.retrieval.metrics import floor_height, pose_slice
    from kinema.control.retrieval.training import own_contacts, skate_loss

    db = games105_db
    floor = floor_height(db)
    rows, true, _, _ = _windows(db, 60, 10)
    t = torch.tensor(true, dtype=torch.float64, requires_grad=True)
    on = own_contacts(db, t, floor)
    assert not on.requires_grad and 0.1 < float(on.mean()) < 0.9
    slide = t.detach().clone()
    slide[..., pose_slice(db, "root_velocity").start + 2] += 0.15
    base = float(skate_loss(db, t, on))
    slid = float(skate_loss(db, slide, own_contacts(db, slide, floor)))
    assert slid > base + 0.04   # (15 cm/s = 0.25 cm/frame)^2 = 0.0625 on the planted frames


def test_planted_root_keeps_planted_toes_still(games105_db):
    """Planted-foot root motion (:class:`kinema.control.retrieval.rollout.RootMover`): real
    poses whose root motion is 15 cm/s too fast slide their stance toe (the stiller of the
    toes on the floor, both this frame and the one before) by about that much under the
    pose's own root motion, and by a few cm/s at most with the planted rule (both toes down:
    they share the pin); a root teleported by more than PLANT_REACH stays where it was put."""
    from kinema.control.planted import PLANT_REACH
    from kinema.control.retrieval.metrics import floor_height, pose_slice
    from kinema.control.retrieval.rollout import RootMover, toe_positions
    from kinema.features.root import yaw_rotate

    db = games105_db
    floor = floor_height(db)
    rows, true, tp, td = _windows(db, 60, 10)
    fast = true.copy()
    fast[..., pose_slice(db, "root_velocity").start + 2] += 0.15

    def stance_speed(planted):
        """Mean speed (cm/s) of the stiller down toe over the frames with a toe down."""
        mover = RootMover(db, planted)
        pos, dirs = tp[:, 0].copy(), td[:, 0].copy()
        mover.start(fast[:, 0], pos, dirs)
        prev = yaw_rotate(dirs[:, None], toe_positions(db, fast[:, 0])) + pos[:, None]
        speeds = []
        for h in range(1, fast.shape[1]):
            pos, dirs = mover(pos, dirs, fast[:, h])
            toes = yaw_rotate(dirs[:, None], toe_positions(db, fast[:, h])) + pos[:, None]
            down = (toes[..., 1] < floor) & (prev[..., 1] < floor)
            speed = np.linalg.norm((toes - prev)[..., [0, 2]], axis=-1) * db.fps * 100.0
            speeds += list(np.where(down, speed, np.inf).min(1)[down.any(1)])
            prev = toes
        assert len(speeds) > 30
        return float(np.mean(speeds))

    assert stance_speed(None) > 12.0
    assert stance_speed(floor) < 5.0
    # a teleport is not undone
    mover = RootMover(db, floor)
    mover.start(fast[:, 0], tp[:, 0], td[:, 0])
    jump = tp[:, 0] + np.array([2 * PLANT_REACH, 0.0, 0.0])
    pos, _ = mover(jump, td[:, 0], fast[:, 1])
    assert np.all(np.linalg.norm((pos - jump)[:, [0, 2]], axis=-1) < 0.1)   # one frame of its own motion


def test_path_loss_integrates_like_the_runtime(games105_db):
    """``train.path_weight``'s term integrates the predicted root motion exactly as the
    runtime's :func:`integrate_root` does (checked against it frame by frame), is near 0
    for the truth's own root motion and grows when the root speed is halved; its gradient
    reaches the root velocity of the first frame."""
    import torch

    from kinema.control.retrieval.metrics import pose_slice
    from kinema.control.retrieval.rollout import integrate_root, root_motion
    from kinema.control.retrieval.training import path_loss

    db = games105_db
    rows, true, tp, td = _windows(db, 60, 10)
    start_pos, start_dir = db.root_positions[rows[:, 0] - 1], db.root_directions[rows[:, 0] - 1]
    slow = true.copy()
    slow[..., pose_slice(db, "root_velocity")] *= 0.5
    pos, dirs, path = start_pos.copy(), start_dir.copy(), []
    for h in range(slow.shape[1]):
        pos, dirs = integrate_root(pos, dirs, root_motion(db, slow[:, h]), db.fps)
        path.append((pos, dirs))
    ref_pos, ref_dir = np.stack([p for p, _ in path], 1), np.stack([d for _, d in path], 1)
    oracle = (((ref_pos - tp)[..., [0, 2]] ** 2).sum(-1) + 1 - (ref_dir * td).sum(-1)).mean()
    t = torch.tensor(slow, dtype=torch.float64, requires_grad=True)
    loss = path_loss(db, t, start_pos, start_dir, tp, td)
    assert abs(float(loss) - oracle) < 1e-5 * max(oracle, 1.0)
    assert float(path_loss(db, torch.as_tensor(true, dtype=torch.float64), start_pos, start_dir, tp, td)) < 0.1 * float(loss)
    loss.backward()
    assert float(t.grad[:, 0, pose_slice(db, "root_velocity")].abs().sum()) > 0


def test_planted_path_moves_roots_like_the_runtime_mover(games105_db):
    """With ``train.planted`` the rollout roots of the path term are those the runtime's
    :class:`RootMover` (planted) draws, frame by frame, for poses whose root velocity is
    halved (so the planted rule has work to do: the stance toes pull the root forward); the
    planted roots end nearer the truth's than the unplanted ones, and the gradient of the
    path term reaches the toes' joint positions (the legs carry the root)."""
    import torch

    from kinema.control.retrieval.metrics import floor_height, pose_slice
    from kinema.control.retrieval.rollout import RootMover, toe_positions
    from kinema.control.retrieval.training import path_loss, rollout_roots
    from kinema.features.root import yaw_rotate

    db = games105_db
    floor = floor_height(db)
    rows, true, tp, td = _windows(db, 60, 10)
    before = rows[:, 0] - 1
    start_pos, start_dir = db.root_positions[before], db.root_directions[before]
    start_toes = yaw_rotate(start_dir[:, None], toe_positions(db, db.pose[before])) + start_pos[:, None]
    slow = true.copy()
    slow[..., pose_slice(db, "root_velocity")] *= 0.5
    mover = RootMover(db, floor)
    mover.start(db.pose[before], start_pos, start_dir)
    pos, dirs, ref = start_pos.copy(), start_dir.copy(), []
    for h in range(slow.shape[1]):
        pos, dirs = mover(pos, dirs, slow[:, h])
        ref.append(pos)
    ref = np.stack(ref, 1)
    t = torch.tensor(slow, dtype=torch.float64, requires_grad=True)
    x, z, _ = rollout_roots(db, t, start_pos, start_dir, floor, start_toes)
    got = torch.stack([x, z], -1).detach().numpy()
    assert np.abs(got - ref[..., [0, 2]]).max() < 1e-3
    free_x, free_z, _ = rollout_roots(db, t.detach(), start_pos, start_dir)
    end = lambda a, b: np.linalg.norm(np.stack([a, b], -1)[:, -1] - tp[:, -1, [0, 2]], axis=-1).mean()  # noqa: E731
    assert end(got[..., 0], got[..., 1]) < 0.8 * end(free_x.numpy(), free_z.numpy())
    loss = path_loss(db, t, start_pos, start_dir, tp, td, floor, start_toes)
    loss.backward()
    a = pose_slice(db, "joint_positions").start
    toe_cols = [a + 3 * db.roles["left_toe"], a + 3 * db.roles["right_toe"]]
    assert float(t.grad[..., toe_cols].abs().sum()) > 0


def test_stride_loss_charges_a_glide_the_energy_term_averages_away(games105_db):
    """The training's stride term (``train.stride_weight``): 0 for the truth, small for the
    truth 20 frames late, and large for the truth whose toes slow to a quarter of their
    motion in the second of two seconds while the rest of the body moves on (the glide a user
    sees: legs still, root on its path), which the whole-body, whole-window energy term
    charges several times less."""
    import torch

    from kinema.control.retrieval.metrics import pose_slice
    from kinema.control.retrieval.training import energy_loss, stride_loss

    db = games105_db
    sec = int(round(db.fps))
    rows, true, _, _ = _windows(db, 2 * sec + 1, 40)
    t = torch.as_tensor(true)
    late = torch.as_tensor(db.pose[rows - 20])
    glide = t.clone()
    pos = glide[..., pose_slice(db, "joint_positions")].reshape(t.shape[0], t.shape[1], -1, 3)
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    last, start = slice(sec, None), slice(sec, sec + 1)
    pos[:, last, toes] = pos[:, start, toes] + 0.25 * (pos[:, last, toes] - pos[:, start, toes])
    glide[..., pose_slice(db, "joint_positions")] = pos.reshape(t.shape[0], t.shape[1], -1)
    assert float(stride_loss(db, t, t)) == 0.0
    assert float(stride_loss(db, late, t)) < 0.1
    assert float(stride_loss(db, glide, t)) > 0.3
    assert float(stride_loss(db, glide, t)) > 20 * float(energy_loss(db, glide, t))
    g = glide.clone().requires_grad_(True)
    stride_loss(db, g, t).backward()
    assert torch.isfinite(g.grad).all() and g.grad.abs().sum() > 0


def test_posture_loss_charges_a_sink_not_the_gait(games105_db):
    """The training's posture term (``train.posture_weight``): 0 for the truth, small for the
    truth 20 frames late (the hips bob with the gait, a second's mean hardly), and large for
    the truth whose whole body sinks to half its height over the second of two seconds (the
    slow crouch seen in the crowd); charged from the hips alone, with a gradient there."""
    import torch

    from kinema.control.retrieval.metrics import pose_slice
    from kinema.control.retrieval.training import posture_loss

    db = games105_db
    sec = int(round(db.fps))
    rows, true, _, _ = _windows(db, 2 * sec + 1, 40)
    t = torch.as_tensor(true)
    late = torch.as_tensor(db.pose[rows - 20])
    sink = t.clone()
    cols = pose_slice(db, "joint_positions")
    pos = sink[..., cols].reshape(t.shape[0], t.shape[1], -1, 3)
    pos[:, sec:, :, 1] *= torch.linspace(1.0, 0.5, t.shape[1] - sec)[None, :, None]
    sink[..., cols] = pos.reshape(t.shape[0], t.shape[1], -1)
    assert float(posture_loss(db, t, t)) == 0.0
    assert float(posture_loss(db, late, t)) < 0.005
    assert float(posture_loss(db, sink, t)) > 10 * float(posture_loss(db, late, t))
    assert float(posture_loss(db, sink, t)) > 0.02
    g = sink.clone().requires_grad_(True)
    posture_loss(db, g, t).backward()
    hips = cols.start + 3 * db.roles["hips"] + 1
    assert float(g.grad[..., hips].abs().sum()) > 0
    other = g.grad.clone()
    other[..., hips] = 0.0
    assert float(other.abs().sum()) == 0.0


def _untrained_model_and_starts(db, r):
    """A tiny untrained kinematic RetrievalMamba (seed 0) and two start rows of the longest
    clip with room for 8 context frames and 48 more."""
    import torch

    from kinema.control.retrieval.training import make_model

    torch.manual_seed(0)
    cfg = {"model": {"d_model": 16, "n_layers": 1, "d_state": 4, "retrieval_dim": 16, "k": r.k, "kinematic": True}}
    model = make_model(cfg, db, r).eval()
    lo, hi = db.ranges[int(np.argmax(db.ranges[:, 1] - db.ranges[:, 0]))]
    assert hi - lo > 40 + 8 + 48 + 1
    return model, np.array([lo + 5, lo + 40])


def test_a_carried_rollout_continues_the_rollout_it_carries(games105_db, games105_retriever):
    """A rollout of 24 frames continued by its :class:`Carry` for 24 more is, frame by frame,
    the rollout of 48 (poses, roots, target rows; deterministic retrieval), so a training
    chain of rollouts reads the states one long drive reaches; the carry is cut from the
    graph (truncated BPTT between the chain's steps)."""
    import torch

    from kinema.control.retrieval.rollout import rollout

    db, r = games105_db, games105_retriever
    model, starts = _untrained_model_and_starts(db, r)
    with torch.no_grad():
        whole = rollout(model, r, db, starts, 8, 48, rigid=True)
        first = rollout(model, r, db, starts, 8, 24, rigid=True)
        rest = rollout(model, r, db, None, 8, 24, rigid=True, carry=first.carry)
    np.testing.assert_array_equal(np.concatenate([first.rows, rest.rows], 1), whole.rows)
    joined = torch.cat([first.pose, rest.pose], 1)
    assert float((joined - whole.pose).abs().max()) < 1e-5
    np.testing.assert_allclose(np.concatenate([first.root_pos, rest.root_pos], 1), whole.root_pos, atol=1e-5)
    np.testing.assert_array_equal(rest.start_pos, first.root_pos[:, -1])
    # a different continuation (another pose to continue from) moves the rest: the carry is read
    first.carry.prev = first.carry.prev + 0.5
    with torch.no_grad():
        moved = rollout(model, r, db, None, 8, 24, rigid=True, carry=first.carry)
    assert float((moved.pose - rest.pose).abs().max()) > 1e-3
    assert not first.carry.state.h[0].requires_grad


def test_rigid_rollouts_stay_above_the_ground(games105_db, games105_retriever):
    """An untrained network rolled out for 48 frames lets its hips drop until the legs pass a
    metre through the floor; with the ground (the evaluation's and the runtime's default,
    training's ``train.ground``) no body joint of any drawn pose goes below the data's
    lowest toe, and without it the same rollout does."""
    import torch

    from kinema.control.retrieval.metrics import body_joints
    from kinema.control.retrieval.rollout import rollout
    from kinema.control.retrieval.training import TrainSettings

    db, r = games105_db, games105_retriever
    model, starts = _untrained_model_and_starts(db, r)
    lowest = {}
    for ground in (True, False):
        with torch.no_grad():
            out = rollout(model, r, db, starts, 8, 48, rigid=True, ground=ground)
        lowest[ground] = joint_positions(db, r.norm.denormalise(out.pose.numpy()))[..., body_joints(db), 1].min()
    assert lowest[True] >= r.ground - 1e-5
    assert lowest[False] < r.ground - 0.1
    assert TrainSettings().ground is False   # the shipped recipes train without it (session 15)


def test_rigid_rollouts_keep_the_hips_within_reach(games105_db, games105_retriever):
    """The same untrained network with fed-back velocities lets its root-space hips stray
    from the root; a rigid rollout (training's, the evaluation's, like the runtime) keeps
    every drawn pose's hips within the data's reach, ground or not, and the raw prediction,
    the pose before :func:`rigid_pose`, strays past it."""
    import torch

    from kinema.control.retrieval.rollout import rollout

    db, r = games105_db, games105_retriever
    model, starts = _untrained_model_and_starts(db, r)
    hips = db.roles["hips"]
    for ground in (True, False):
        with torch.no_grad():
            out = rollout(model, r, db, starts, 8, 48, rigid=True, ground=ground, velocities=True)
        h = joint_positions(db, r.norm.denormalise(out.pose.numpy()))[..., hips, :]
        assert np.hypot(h[..., 0], h[..., 2]).max() <= r.reach + 1e-5
    with torch.no_grad():
        raw = rollout(model, r, db, starts, 8, 48, velocities=True)
    h = joint_positions(db, r.norm.denormalise(raw.pose.numpy()))[..., hips, :]
    assert np.hypot(h[..., 0], h[..., 2]).max() > 2 * r.reach


def test_a_stick_steer_asks_for_the_path_its_sticks_ask_for():
    """A :class:`StickSteer` (the stick-driven rollouts' joystick) runs the runtime's
    springs on the crowd's wandering sticks: a walking stick pushed straight ahead at its
    peak brings the requested root to the walking speed along +z within 15%, the joystick
    seen from that root points ahead of it, and a script in its stop phase asks for no
    motion at all. Before :meth:`start` it refuses to run."""
    from kinema.control.retrieval.steering import StickSteer
    from kinema.control.trajectory import ControlConfig

    fps = 60.0
    peak = (np.pi / 2 - 0.6 * 2.0) / (2 * np.pi)   # the push's sine peaks at t = 2 s
    seeds = np.array([[0.0, 0.5, peak, 0.0],       # heading +z, no turn, moving from t = 0
                      [0.0, 0.5, peak, 0.85]])     # the same, but stopped for the first 1.2 s
    steer = StickSteer(seeds, np.array([True, True]), fps)
    with pytest.raises(RuntimeError):
        steer(np.zeros((2, 3), np.float32), np.tile([0.0, 0.0, 1.0], (2, 1)).astype(np.float32))
    steer.start(np.zeros((2, 3)), np.tile([0.0, 0.0, 1.0], (2, 1)))
    root, facing = np.zeros((2, 3), np.float32), np.tile([0.0, 0.0, 1.0], (2, 1)).astype(np.float32)
    for _ in range(int(2.5 * fps)):
        stick = steer(root, facing)
    pos, dirs = steer.path()
    assert pos.shape == (2, 1 + int(2.5 * fps), 3) and dirs.shape == pos.shape
    walk = ControlConfig().walk_speeds[0]
    speed = np.linalg.norm(pos[0, -1] - pos[0, -2]) * fps
    assert 0.85 * walk < speed < 1.05 * walk
    assert abs(pos[0, -1, 0]) < 0.01 and pos[0, -1, 2] > 2.0
    assert np.all(pos[1, : int(1.2 * fps), [0, 2]] == 0.0)   # the stopped script stays put
    ahead = steer.springs.predict().features(pos[:, -1], dirs[:, -1])[0]   # seen from the requested root itself
    assert ahead[1] > 0.3 and abs(ahead[0]) < 0.05
    assert stick.shape == (2, 12) and stick.dtype == np.float32


def test_an_idle_stick_steer_asks_for_nothing_and_the_idle_share_is_drawn_apart():
    """Idle rollouts (``train.stick_idle``, a user who lets go of the stick): the same
    script pushed straight ahead requests no motion at all for 3 s, while its twin walks;
    :meth:`StickSteer.random` draws the idle flags after the scripts, so without idle
    rollouts the scripts are the ones drawn before the option existed, and a share of 0.5
    over 400 rollouts makes about half of them idle. A share outside [0, 1] is refused."""
    from kinema.control.retrieval.steering import StickSteer
    from kinema.control.retrieval.training import TrainSettings
    from kinema.errors import KinemaError

    fps = 60.0
    seeds = np.array([[0.0, 0.5, 0.3, 0.0]] * 2)
    steer = StickSteer(seeds, np.array([True, True]), fps, release=np.array([0.0, np.inf]))
    steer.start(np.zeros((2, 3)), np.tile([0.0, 0.0, 1.0], (2, 1)))
    root, facing = np.zeros((2, 3), np.float32), np.tile([0.0, 0.0, 1.0], (2, 1)).astype(np.float32)
    for _ in range(int(3 * fps)):
        stick = steer(root, facing)
    pos, _ = steer.path()
    assert np.all(pos[0] == 0.0) and np.all(stick[0, :6] == 0.0)
    assert pos[1, -1, 2] > 1.0

    plain = StickSteer.random(400, np.random.default_rng(3), fps)
    idle = StickSteer.random(400, np.random.default_rng(3), fps, idle_share=0.5)
    assert np.array_equal(plain.seeds, idle.seeds) and np.array_equal(plain.walk, idle.walk)
    assert np.all(np.isinf(plain.release)) and 0.4 < (idle.release == 0.0).mean() < 0.6
    for name in ("stick_idle", "stick_release"):
        with pytest.raises(KinemaError, match=name):
            TrainSettings(**{name: 1.5})


def test_a_released_stick_steer_stops_and_then_marks_its_frames_settled():
    """A rollout that lets go after 2 s of running (``train.stick_release``, the
    run_release scenario's user): its requested path runs, then stops within a few
    seconds, and :meth:`StickSteer.settled` marks exactly the frames that
    :func:`~kinema.control.retrieval.scenarios.settled_frames` marks on that path, across a
    :meth:`continue_path` too; its never-released twin settles nowhere. The release draws
    come after the idle ones and only release rollouts that are not idle."""
    from kinema.control.retrieval.scenarios import settled_frames
    from kinema.control.retrieval.steering import StickSteer

    fps = 60.0
    seeds = np.array([[0.0, 0.5, 0.3, 0.0]] * 2)
    steer = StickSteer(seeds, np.array([False, False]), fps, release=np.array([2.0, np.inf]))
    steer.start(np.zeros((2, 3)), np.tile([0.0, 0.0, 1.0], (2, 1)))
    root, facing = np.zeros((2, 3), np.float32), np.tile([0.0, 0.0, 1.0], (2, 1)).astype(np.float32)
    for _ in range(int(3 * fps) - 1):
        steer(root, facing)
    first_pos, first_settled = steer.path()[0], steer.settled()
    steer.continue_path()
    for _ in range(int(4 * fps)):
        steer(root, facing)
    pos = np.concatenate([first_pos, steer.path()[0]], 1)
    settled = np.concatenate([first_settled, steer.settled()], 1)
    assert settled.shape == pos.shape[:2] == (2, int(7 * fps))
    assert pos[0, int(2 * fps), 2] > 2.0                       # it ran before letting go
    assert np.array_equal(settled[0], settled_frames(pos[0], fps))
    assert not settled[0, : int(3 * fps)].any() and settled[0, -int(fps):].all()
    assert not settled[1].any()

    idle = StickSteer.random(400, np.random.default_rng(3), fps, idle_share=0.25)
    both = StickSteer.random(400, np.random.default_rng(3), fps, idle_share=0.25, release_share=0.5)
    assert np.array_equal(idle.release == 0.0, both.release == 0.0)
    later = both.release[np.isfinite(both.release) & (both.release > 0)]
    assert 0.3 < len(later) / (idle.release > 0).sum() < 0.7 and later.min() >= 0.5 and later.max() <= 6.0


def test_a_reversing_stick_steer_runs_back_the_way_it_came():
    """A rollout that reverses its stick every 3 s (``train.stick_reverse``, the turns
    scenario's user who runs back and forth): its requested path runs ahead along +z for 3 s,
    then turns round and runs back, its facing flipped, while its never-reversing twin keeps
    going; the reversal draws come after the release ones and leave the scripts, walks and
    releases as they were, and a share of 0.5 over 400 rollouts reverses about half of them
    with periods in [1.5, 5] s. A share outside [0, 1] is refused."""
    from kinema.control.retrieval.steering import StickSteer
    from kinema.control.retrieval.training import TrainSettings
    from kinema.errors import KinemaError

    fps = 60.0
    seeds = np.array([[0.0, 0.5, 0.0, 0.0]] * 2)   # heading +z, no turn, moving for the first 6.5 s
    steer = StickSteer(seeds, np.array([False, False]), fps, reverse=np.array([3.0, np.inf]))
    steer.start(np.zeros((2, 3)), np.tile([0.0, 0.0, 1.0], (2, 1)))
    root, facing = np.zeros((2, 3), np.float32), np.tile([0.0, 0.0, 1.0], (2, 1)).astype(np.float32)
    for _ in range(int(6 * fps)):
        steer(root, facing)
    pos, dirs = steer.path()
    turn = int(3 * fps)
    assert pos[0, turn, 2] > 3.0 and np.allclose(pos[0, turn], pos[1, turn])   # the same run until the reversal
    assert pos[0, -1, 2] < pos[0, turn, 2] - 3.0                                # ... then back the way it came
    assert dirs[0, -1, 2] < -0.9 and dirs[1, -1, 2] > 0.9                       # facing back; the twin ahead
    assert pos[1, -1, 2] > pos[1, turn, 2] + 3.0

    both = StickSteer.random(400, np.random.default_rng(3), fps, idle_share=0.25, release_share=0.5)
    flip = StickSteer.random(400, np.random.default_rng(3), fps, idle_share=0.25, release_share=0.5,
                             reverse_share=0.5)
    assert np.array_equal(both.seeds, flip.seeds) and np.array_equal(both.release, flip.release)
    assert np.all(np.isinf(both.reverse))
    every = flip.reverse[np.isfinite(flip.reverse)]
    assert 0.4 < len(every) / 400 < 0.6 and every.min() >= 1.5 and every.max() <= 5.0
    with pytest.raises(KinemaError, match="stick_reverse"):
        TrainSettings(stick_reverse=1.5)


def test_stick_terms_pass_the_truth_and_charge_a_glide_a_crouch_a_float_and_a_detour(games105_db, games105_retriever):
    """The stick-driven rollouts' self-supervised terms, read on real windows whose
    requested path is the actor's own: the truth strides like the data, follows its path
    and stands (each small); the same windows with the toes frozen in character space (the
    glide: the root moves, the legs do not) pay the stride and skating terms many times
    over; with the hips lowered to half their height or the body lifted by half of it, the
    posture and touch terms; with the path asked for 1 m to the side, the path term. The glide's
    planted toes are charged what the root moves under them (the real data's toes slide some
    1.6 cm per frame under their own contact test too, so skating is read against the root,
    not against the truth). The stride term's gradient reaches the toes, the touch term's
    pushes a floated toe down."""
    import types

    import torch

    from kinema.control.retrieval.metrics import floor_height, pose_slice
    from kinema.control.retrieval.training import StickTargets, stick_terms

    db = games105_db
    rows, true, tp, td = _windows(db, 121, 20)
    r = types.SimpleNamespace(start_pos=db.root_positions[rows[:, 0] - 1], start_dir=db.root_directions[rows[:, 0] - 1])
    asked = types.SimpleNamespace(path=lambda: (tp, td), settled=lambda: np.zeros(tp.shape[:2], bool))
    targets, floor = StickTargets.of(db), floor_height(db)
    cols = pose_slice(db, "joint_positions")
    toes = [db.roles["left_toe"], db.roles["right_toe"]]

    def terms(poses, steer=asked):
        return {k: float(v) for k, v in stick_terms(db, torch.as_tensor(poses), r, steer, targets, floor).items()}

    def edited(change):
        """The true windows with their joint positions (B, H, J, 3) changed in place by ``change``."""
        poses = true.copy()
        pos = poses[..., cols].reshape(true.shape[:2] + (-1, 3))
        change(pos)
        poses[..., cols] = pos.reshape(true.shape[:2] + (-1,))
        return poses

    def glide(pos):
        pos[:, :, toes] = pos[:, :1, toes]
        pos[:, :, toes, 1] = floor - 0.01   # planted, so the skating term reads every frame

    def crouch(pos):
        pos[..., 1] *= 0.5

    def float_up(pos):
        pos[..., 1] += 0.5 * targets.standing_hips   # the whole body floated half a standing height up

    truth = terms(true)
    assert truth["stride"] < 0.3 and truth["path"] < 0.01 and truth["posture"] == 0.0 and truth["stand"] == 0.0
    g = terms(edited(glide))
    assert g["stride"] > 5 * truth["stride"] + 0.5
    step = np.linalg.norm(np.diff(tp[..., [0, 2]], axis=1), axis=-1) * 100.0   # cm the root moves per frame
    assert 0.8 < g["skate"] / float((step ** 2).mean()) < 1.3   # the planted toes slide with the root
    assert terms(edited(crouch))["posture"] > 0.05
    floated = terms(edited(float_up))
    assert floated["posture"] > 0.05
    assert truth["touch"] < 0.01 and floated["touch"] > 100 * truth["touch"] + 5.0   # toes some 45 cm up: about 14
    aside = types.SimpleNamespace(path=lambda: (tp + np.array([1.0, 0.0, 0.0]), td), settled=asked.settled)
    assert terms(true, aside)["path"] > 0.9
    t = torch.as_tensor(true).requires_grad_(True)
    stick_terms(db, t, r, asked, targets, floor)["stride"].backward()
    assert float(t.grad[..., [cols.start + 3 * j for j in toes]].abs().sum()) > 0
    t = torch.as_tensor(edited(float_up)).requires_grad_(True)
    stick_terms(db, t, r, asked, targets, floor)["touch"].backward()
    assert float(t.grad[..., [cols.start + 3 * j + 1 for j in toes]].sum()) > 0   # pushes a toe down


def test_the_stand_loss_passes_the_actor_standing_and_charges_a_raised_knee(games105_db):
    """:func:`stand_loss` on the actor's own settled rows (root still for a second, as
    ``database_feet_down_share`` reads them): about 0, as little as a tenth of a raised toe's
    cost; the same rows with the left toe lifted 0.3 m (a raised knee) pay about
    (0.25 / 0.1)^2 / 2 (one toe of two); the whole body lowered to 0.6 of its height with
    the toes kept on the floor (a kneel, all fours) pays for its hips; the lift on frames
    not settled is free; the gradient reaches the toe's height."""
    import torch

    from kinema.control.retrieval.metrics import floor_height, pose_slice
    from kinema.control.retrieval.scenarios import settled_frames, standing_hips
    from kinema.control.retrieval.training import stand_loss

    db = games105_db
    settled = np.concatenate([settled_frames(db.root_positions[a:b], db.fps) for a, b in db.ranges])
    rows = np.flatnonzero(settled)
    assert len(rows) > 60, "the games105 sample has standing rows"
    rows = rows[np.linspace(0, len(rows) - 1, 120).astype(np.int64)]
    poses, floor, standing = db.pose[rows][None].copy(), floor_height(db), standing_hips(db)
    on, off = np.ones((1, len(rows)), bool), np.zeros((1, len(rows)), bool)
    cols = pose_slice(db, "joint_positions")
    left = cols.start + 3 * db.roles["left_toe"] + 1
    raised = poses.copy()
    raised[..., left] = np.maximum(raised[..., left], floor) + 0.3
    kneel = poses.copy()
    heights = kneel[..., cols][..., 1::3]
    kneel[..., cols.start + 1:cols.stop:3] = np.minimum(heights, floor + (heights - floor) * 0.6)
    stand = float(stand_loss(db, torch.as_tensor(poses), on, floor, standing))
    knee = float(stand_loss(db, torch.as_tensor(raised), on, floor, standing))
    low = float(stand_loss(db, torch.as_tensor(kneel), on, floor, standing))
    assert stand < 0.1 * knee and 2.5 < knee < 4.0 and low > 4.0
    assert float(stand_loss(db, torch.as_tensor(raised), off, floor, standing)) == 0.0
    t = torch.as_tensor(raised).requires_grad_(True)
    stand_loss(db, t, on, floor, standing).backward()
    assert float(t.grad[..., left].sum()) > 0


def test_a_stick_driven_rollout_takes_its_joystick_from_the_steer(games105_db, games105_retriever):
    """A rollout with a ``steer`` reads its joystick from the steer's springs (one call per
    predicted frame after the first), not from the clip, so its poses differ from the
    truth-driven rollout's from the second frame on. Continued by its carry for 40 more
    frames (past the clip's end: a steered rollout's rows stop there) it is, frame by frame,
    the 88-frame steered rollout, the steer's path then holding the continuation's frames;
    a truth-driven carry refuses a steer and a steered one needs it."""
    import torch

    from kinema.control.retrieval.rollout import rollout
    from kinema.control.retrieval.steering import StickSteer
    from kinema.errors import KinemaError

    db, r = games105_db, games105_retriever
    model, starts = _untrained_model_and_starts(db, r)
    steer = StickSteer(np.array([[0.25, 0.9, 0.0, 0.0], [0.75, 0.1, 0.5, 0.0]]), np.array([False, True]), db.fps)
    with torch.no_grad():
        driven = rollout(model, r, db, starts, 8, 48, rigid=True, steer=steer)
        clip = rollout(model, r, db, starts, 8, 48, rigid=True)
    assert steer.frames == 47 and steer.path()[0].shape == (2, 48, 3)
    np.testing.assert_allclose(steer.path()[0][:, 0], driven.start_pos * [1, 0, 1], atol=1e-6)
    assert float((driven.pose[:, 0] - clip.pose[:, 0]).abs().max()) == 0.0
    assert float((driven.pose[:, 1:] - clip.pose[:, 1:]).abs().max()) > 1e-3
    with pytest.raises(KinemaError, match="steer"):
        rollout(model, r, db, None, 8, 24, rigid=True, carry=clip.carry, steer=steer)
    with pytest.raises(KinemaError, match="steer"):
        rollout(model, r, db, None, 8, 24, rigid=True, carry=driven.carry)
    seeds, walk = np.array([[0.25, 0.9, 0.0, 0.0], [0.75, 0.1, 0.5, 0.0]]), np.array([False, True])
    starts = np.array([starts[0], db.ranges[db.clip_of(starts[:1]), 1][0] - 8 - 49])   # the second ends its clip at 48
    whole_steer, part_steer = StickSteer(seeds, walk, db.fps), StickSteer(seeds, walk, db.fps)
    with torch.no_grad():
        whole = rollout(model, r, db, starts, 8, 88, rigid=True, steer=whole_steer)
        first = rollout(model, r, db, starts, 8, 48, rigid=True, steer=part_steer)
        rest = rollout(model, r, db, None, 8, 40, rigid=True, carry=first.carry, steer=part_steer)
    assert float((torch.cat([first.pose, rest.pose], 1) - whole.pose).abs().max()) < 1e-5
    np.testing.assert_allclose(np.concatenate([first.root_pos, rest.root_pos], 1), whole.root_pos, atol=1e-5)
    assert part_steer.path()[0].shape == (2, 40, 3)
    np.testing.assert_allclose(part_steer.path()[0], whole_steer.path()[0][:, 48:], atol=1e-9)
    assert rest.rows[1].max() == db.ranges[db.clip_of(starts[1:]), 1][0] - 1


def test_adjust_roots_halves_the_lag_every_halflife_and_never_lets_it_pass_the_clamp():
    """:func:`adjust_roots` (the runtime's Motion Matching adjustment): a root 0.3 m behind
    its simulation object, facing 60 degrees off it, is pulled one halflife of frames and
    lags by half (0.15 m, 30 degrees); one 2 m behind is held at the clamp from the first
    frame; the object's height is ignored (roots stay on the floor)."""
    from kinema.control.retrieval.rollout import ADJUST_CLAMP, ADJUST_HALFLIFE, adjust_roots
    from kinema.maths import angles

    fps = 60.0
    pos = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    dirs = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], np.float32)
    goal = np.array([[0.3, 0.5, 0.0], [2.0, 0.0, 0.0]])
    goal_dir = np.array([[np.sin(np.pi / 3), 0.0, np.cos(np.pi / 3)]] * 2)
    first = adjust_roots(pos, dirs, goal, goal_dir, 1 / fps)[0]
    assert np.linalg.norm(first[1] - goal[1]) == pytest.approx(ADJUST_CLAMP, abs=1e-5)
    for _ in range(int(round(ADJUST_HALFLIFE * fps))):
        pos, dirs = adjust_roots(pos, dirs, goal, goal_dir, 1 / fps)
    assert np.linalg.norm(pos[0] - goal[0] * [1, 0, 1]) == pytest.approx(0.15, abs=1e-4) and pos[0, 1] == 0.0
    assert np.degrees(angles.yaw(dirs[0])) == pytest.approx(30.0, abs=1e-3)


def test_an_adjusted_stick_rollout_draws_the_runtimes_roots_and_charges_its_legs_for_them(games105_db,
                                                                                           games105_retriever):
    """``rollout(..., adjust=True)``: an untrained network's steered roots stay within the
    clamp of the springs' path at every frame, where its own roots wander farther; a rollout
    without a steer refuses it. :func:`drawn_skate_loss` on the roots the poses' own root
    motion integrates to is :func:`skate_loss` (the actor's windows), and the same poses
    drawn on roots that slide 2 cm a frame more pay the slide: the legs are charged for the
    ground the adjustment moves them over."""
    import torch

    from kinema.control.retrieval.metrics import floor_height
    from kinema.control.retrieval.rollout import ADJUST_CLAMP, integrate_root, rollout, root_motion
    from kinema.control.retrieval.steering import StickSteer
    from kinema.control.retrieval.training import drawn_skate_loss, own_contacts, skate_loss
    from kinema.errors import KinemaError

    db, r = games105_db, games105_retriever
    model, starts = _untrained_model_and_starts(db, r)
    seeds, walk = np.array([[0.25, 0.9, 0.0, 0.0], [0.75, 0.1, 0.5, 0.0]]), np.array([False, True])
    with torch.no_grad():
        steer = StickSteer(seeds, walk, db.fps)
        drawn = rollout(model, r, db, starts, 8, 48, rigid=True, steer=steer, adjust=True)
        path = steer.path()[0]
        own_steer = StickSteer(seeds, walk, db.fps)
        own = rollout(model, r, db, starts, 8, 48, rigid=True, steer=own_steer)
    lag = np.linalg.norm((drawn.root_pos - path)[..., [0, 2]], axis=-1)
    own_lag = np.linalg.norm((own.root_pos - own_steer.path()[0])[..., [0, 2]], axis=-1)
    assert lag.max() <= ADJUST_CLAMP + 1e-4 and own_lag.max() > lag.max() + 0.05
    with pytest.raises(KinemaError, match="adjust"):
        rollout(model, r, db, starts, 8, 24, rigid=True, adjust=True)

    rows, true, tp, td = _windows(db, 61, 20)
    pos, dirs, roots, facings = tp[:, 0].copy(), td[:, 0].copy(), [], []
    for t in range(true.shape[1]):
        if t:
            pos, dirs = integrate_root(pos, dirs, root_motion(db, true[:, t]), db.fps)
        roots.append(pos)
        facings.append(dirs)
    roots, facings = np.stack(roots, 1), np.stack(facings, 1)
    poses = torch.as_tensor(true)
    on = own_contacts(db, poses, floor_height(db))
    plain = float(skate_loss(db, poses, on))
    assert float(drawn_skate_loss(db, poses, on, roots, facings)) == pytest.approx(plain, rel=1e-3)
    slid = roots + np.arange(true.shape[1])[None, :, None] * np.array([0.02, 0.0, 0.0])
    assert float(drawn_skate_loss(db, poses, on, slid, facings)) > plain + 2.0   # 2 cm a frame: 4 cm^2 where planted


def test_stick_weights_take_each_stick_term_s_weight_from_the_settings():
    """:func:`stick_weights` gives the posture, stride, skate, stand, touch, step, support, still and torso terms
    the settings' weights (posture 1, stride 1 and skate 0.1 by default, the earlier
    constants) and the path its fixed one (:data:`STICK_TERMS`), so raising
    ``train.stick_stride`` by 2 raises the objective by twice the stride term and nothing else."""
    import torch

    from kinema.control.retrieval.training import STICK_TERMS, TrainSettings, stick_objective, stick_weights

    terms = {name: torch.tensor(float(i + 1)) for i, name in
             enumerate(["stride", "path", "posture", "skate", "stand", "touch", "step", "support", "still", "torso"])}
    default = stick_weights(TrainSettings())
    assert default["stride"] == 1.0 and default["skate"] == 0.1 and default["posture"] == 1.0
    assert default["stand"] == default["touch"] == default["step"] == default["support"] == default["still"] == 0.0
    assert default["torso"] == 0.0
    assert all(default[k] == v for k, v in STICK_TERMS.items())
    assert set(default) == set(terms)
    tuned = stick_weights(TrainSettings(stick_stride=3.0, stick_skate=0.5, stick_stand=0.5, stick_touch=2.0,
                                        stick_step=1.5, stick_posture=4.0, stick_support=2.5, stick_still=0.7,
                                        stick_torso=1.2))
    assert (tuned["stride"], tuned["skate"], tuned["stand"], tuned["touch"], tuned["step"], tuned["posture"],
            tuned["support"], tuned["still"], tuned["torso"]) == (3.0, 0.5, 0.5, 2.0, 1.5, 4.0, 2.5, 0.7, 1.2)
    base = float(stick_objective(terms, default))
    assert base == pytest.approx(1.0 + 2.0 * 2.0 + 1.0 * 3.0 + 0.1 * 4.0)
    more = float(stick_objective(terms, stick_weights(TrainSettings(stick_stride=3.0))))
    assert more - base == pytest.approx(2.0 * float(terms["stride"]))


def test_torso_loss_passes_every_row_of_the_data_and_charges_a_bow(games105_db):
    """:func:`torso_loss` on the sample's rows (:func:`standing_torso` of them): every row of
    the data pays 0 (the actor's torso never leans below 0.83 of its median height); the
    same rows with the head lowered to 0.6 of the torso above the hips pay 1, and with the
    head hung at the hips' height (the bow the Bandai-Namco networks fell into when let go
    of) 16; its gradient raises the head and lowers the hips."""
    import torch

    from kinema.control.retrieval.scenarios import head_joint, standing_torso
    from kinema.control.retrieval.training import TORSO_SHARE, _joint_positions, torso_loss

    db = games105_db
    torso = standing_torso(db)
    assert 0.3 < torso < 0.7   # metres: a person's hips-to-head height
    pos = _joint_positions(db, torch.as_tensor(db.pose[None]))
    head, hips = head_joint(db), db.roles["hips"]
    assert float(torso_loss(db, pos, torso, head)) == 0.0
    for share, paid in [(0.6, 1.0), (0.0, 16.0)]:
        bowed = pos.clone()
        bowed[..., head, 1] = bowed[..., hips, 1] + share * torso
        assert float(torso_loss(db, bowed, torso, head)) == pytest.approx(paid, rel=1e-4)
    bowed = pos.clone()
    bowed[..., head, 1] = bowed[..., hips, 1]
    bowed.requires_grad_(True)
    torso_loss(db, bowed, torso, head).backward()
    assert float(bowed.grad[..., head, 1].max()) < 0.0   # raising the head lowers the cost
    assert float(bowed.grad[..., hips, 1].min()) > 0.0
    assert TORSO_SHARE == 0.8


def test_still_loss_standing_actor_pays_nothing_and_a_creep_pays(games105_db):
    """:func:`still_loss` on the sample's own roots: every second in which the actor's root
    path has stood still (:func:`~kinema.control.retrieval.scenarios.settled_frames`) drifts
    under :data:`STILL_DRIFT_M`, so the actor pays 0; the same roots with a 3.5 cm/s creep
    added pay log(3.5)^2 = 1.57 within the drift the actor adds; a 1 m/s runaway pays
    log(100)^2 = 21.2, and its gradient per metre is smaller than the creep's; windows with a
    moving frame pay nothing (a walk is the path term's), and a gradient reaches the roots."""
    import torch

    from kinema.control.retrieval.scenarios import settled_frames
    from kinema.control.retrieval.training import STILL_DRIFT_M, still_loss

    db, fps = games105_db, games105_db.fps
    a, b = db.ranges[[i for i, n in enumerate(db.clip_names) if n == "idle"][0]]
    p = db.root_positions[a:b].astype(np.float64)
    settled = settled_frames(p, fps)[None]
    assert settled.mean() > 0.5   # the idle take stands for most of its length
    x, z = torch.tensor(p[None, :, 0], requires_grad=True), torch.tensor(p[None, :, 2])
    assert float(still_loss(x, z, settled, fps).detach()) == 0.0
    creep = torch.arange(b - a, dtype=torch.float64)[None] * 0.035 / fps
    paid = float(still_loss(x + creep, z, settled, fps).detach())
    assert 1.0 < paid < 2.2   # 1.57 for the creep alone, the actor's own sway within 1 cm either way
    assert float(still_loss(x + creep, z, np.zeros_like(settled), fps).detach()) == 0.0
    still_loss(x + creep, z, settled, fps).backward()
    creep_grad = float(x.grad.abs().sum())
    assert creep_grad > 0.0
    x.grad = None
    run = torch.arange(b - a, dtype=torch.float64)[None] * 1.0 / fps
    assert float(still_loss(x + run, z, settled, fps).detach()) == pytest.approx(np.log(100.0) ** 2, rel=0.02)
    still_loss(x + run, z, settled, fps).backward()
    assert float(x.grad.abs().sum()) < creep_grad
    assert STILL_DRIFT_M == 0.01


def test_the_support_loss_passes_the_actor_and_a_run_s_flights_and_charges_walking_in_the_air(games105_db):
    """:func:`support_loss` on the actor's own moving windows: about 0 (the lower toe's
    median height each second is on the floor); both toes held 0.2 m above the floor pay
    ((0.2 - 0.025) / 0.1)^2 in every window; the actor's windows with both toes lifted 0.5 m
    in two frames of every five (flights, fewer than half of each second) still pay about 0,
    where a float that touches down once every half second passes :func:`touch_loss`'s
    lowest-frame rule and pays this term in full; nothing is charged while the requested path stands, and
    the gradient pushes the lower toe down."""
    import torch

    from kinema.control.retrieval.metrics import floor_height, pose_slice
    from kinema.control.retrieval.training import TOUCH_SECONDS, support_loss, touch_loss

    db = games105_db
    rows, true, _, _ = _windows(db, 121, 20)
    floor = floor_height(db)
    cols = pose_slice(db, "joint_positions")
    toes = [cols.start + 3 * db.roles[t] + 1 for t in ("left_toe", "right_toe")]
    moving, still = np.zeros(true.shape[:2], bool), np.ones(true.shape[:2], bool)
    floating, flights, touching = true.copy(), true.copy(), true.copy()
    lift = np.arange(true.shape[1]) % 5 < 2
    every = max(1, round(TOUCH_SECONDS * db.fps))
    for toe in toes:
        floating[..., toe] = floor + 0.2
        flights[:, lift, toe] += 0.5
        touching[..., toe] = floor + 0.2
        touching[:, ::every, toe] = floor

    def cost(poses, settled=moving):
        return float(support_loss(db, torch.as_tensor(poses), settled, floor))

    expected = ((0.2 - 0.025) / 0.1) ** 2
    assert cost(true) < 0.05 * expected
    assert cost(floating) == pytest.approx(expected, rel=1e-4)
    assert cost(flights) < 0.05 * expected
    assert cost(floating, still) == 0.0
    assert float(touch_loss(db, torch.as_tensor(touching), floor)) == 0.0
    assert cost(touching) == pytest.approx(expected, rel=1e-4)
    t = torch.as_tensor(floating).requires_grad_(True)
    support_loss(db, t, moving, floor).backward()
    assert float(t.grad[..., toes].sum()) > 0


def test_the_step_loss_passes_the_actor_walking_and_charges_a_hop_and_a_float(games105_db):
    """:func:`step_loss` on the actor's own moving windows: about 0 (each toe comes down at
    least once a second); the same windows with the left toe held 0.3 m up (a hop on the
    right foot) pay about ((0.3 - 0.025) / 0.1)^2 / 2 (one toe of two), with both toes up
    twice that; the hop is free while the requested path stands (settled), and the gradient
    pushes the raised toe down."""
    import torch

    from kinema.control.retrieval.metrics import floor_height, pose_slice
    from kinema.control.retrieval.training import step_loss

    db = games105_db
    rows, true, _, _ = _windows(db, 121, 20)
    floor = floor_height(db)
    cols = pose_slice(db, "joint_positions")
    left, right = (cols.start + 3 * db.roles[t] + 1 for t in ("left_toe", "right_toe"))
    moving, still = np.zeros(true.shape[:2], bool), np.ones(true.shape[:2], bool)
    hop, both = true.copy(), true.copy()
    hop[..., left] = np.maximum(hop[..., left], floor) + 0.3
    both[..., [left, right]] = np.maximum(both[..., [left, right]], floor) + 0.3

    def cost(poses, settled=moving):
        return float(step_loss(db, torch.as_tensor(poses), settled, floor))

    expected = ((0.3 - 0.025) / 0.1) ** 2 / 2
    assert cost(true) < 0.05 * expected
    assert 0.9 * expected < cost(hop) < 1.3 * expected
    assert 1.8 * expected < cost(both) < 2.6 * expected
    assert cost(hop, still) == 0.0
    t = torch.as_tensor(hop).requires_grad_(True)
    step_loss(db, t, moving, floor).backward()
    assert float(t.grad[..., left].sum()) > 0 and float(t.grad[..., right].abs().sum()) == 0.0
