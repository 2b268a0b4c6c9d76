"""The motion-matching controller on a real (small) database: exact playback without
search, continuity through transitions, following a stick, and the demo's metrics."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kinema.cli.main import main
from kinema.control.matching import MatchingConfig, MotionMatchingController
from kinema.control.retrieval.scenarios import bone_lengths, rigid_bones
from kinema.features.root import yaw_rotate
from kinema.matching.database import build_from_paths, row_offsets
from kinema.motion.kinematics import positions_with_lengths


@pytest.fixture(scope="module")
def db(shared_data):
    files = sorted((shared_data / "bandai_namco" / "dataset-1").glob("*_active_*.bvh"))
    assert len(files) == 7
    return build_from_paths(files, "bandai", mirror=True, progress=False)


def test_playback_without_search_reproduces_the_database(db):
    cfg = MatchingConfig(search_every=10**9, force_search_rate=np.inf, adjust_speed_ratio=0.0,
                         clamp_distance=np.inf, clamp_angle=np.inf)
    start = int(db.ranges[2, 0]) + 5
    c = MotionMatchingController(db, config=cfg, start_frame=start)
    c.root_position = db.root_positions[start].astype(np.float64)
    c.root_direction = db.root_directions[start].astype(np.float64)
    j = len(db.joint_names)
    for n in range(1, 60):
        out = c.step(np.zeros(2), 1 / 60)
        row = start + n
        assert out.frame == row and not out.transitioned
        ref = yaw_rotate(db.root_directions[row].astype(np.float64),
                         db.pose[row, :3 * j].reshape(j, 3).astype(np.float64)) + db.root_positions[row]
        np.testing.assert_allclose(out.positions, ref, atol=0.02)  # root integration drift only (1 s)
        np.testing.assert_allclose(np.linalg.norm(out.rotations, axis=-1), 1.0, atol=1e-6)


def test_follows_the_stick_with_continuous_pose(db):
    c = MotionMatchingController(db)
    prev = None
    steps, at_transition = [], []
    for n in range(360):
        stick = np.array([0.0, 1.0]) if n < 180 else np.array([1.0, 0.0])
        out = c.step(stick, 1 / 60)
        local = yaw_rotate(out.root_direction, out.positions - out.root_position, inverse=True)
        if prev is not None:
            change = np.abs(local - prev).max()  # root-space joint motion in one frame
            (at_transition if out.transitioned else steps).append(change)
        prev = local
        sim = c.trajectory.sim
        assert np.linalg.norm(out.root_position - sim.position) <= c.config.clamp_distance + 1e-9
    assert len(at_transition) > 0
    # inertialized: a transition moves the joints no more than ordinary playback does
    assert max(at_transition) <= 1.2 * np.percentile(steps, 99)
    # moved forward (+Z) first, then toward -X (stick right, camera looking along +Z)
    assert c.trajectory.sim.position[2] > 4 and c.trajectory.sim.position[0] < -1
    assert out.root_direction[0] < -0.7


def test_transition_without_inertialization_would_jump(db):
    """The check above can fail: with a near-zero halflife the pose jumps at transitions."""
    c = MotionMatchingController(db, config=MatchingConfig(inertialize_halflife=1e-6))
    prev, jumps, steps = None, [], []
    for n in range(360):
        out = c.step(np.array([0.0, 1.0]) if n < 180 else np.array([1.0, 0.0]), 1 / 60)
        local = yaw_rotate(out.root_direction, out.positions - out.root_position, inverse=True)
        if prev is not None:
            (jumps if out.transitioned else steps).append(np.abs(local - prev).max())
        prev = local
    assert max(jumps) > 1.2 * np.percentile(steps, 99)


def test_transitions_keep_every_bone_its_rest_length(db):
    """Each joint's position is inertialized on an offset of its own, which moves joints
    apart: the drawn bones are set back to their rest lengths, so no transition stretches a
    bone (before, on LaFAN1's scripted sticks: up to 22 cm), and the legs are solved so the
    toes stay where the inertialized pose puts them (a planted toe does not slide for the
    fix). The check can fail: the inertialized positions themselves stretch bones by
    centimetres here."""
    c = MotionMatchingController(db)
    rigid = rigid_bones(db)
    drawn, raw, toe_moved, transitions = [], [], [], 0
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    hips_only = []   # the toes' displacement if the lengths were rebuilt from the hips alone
    for n in range(360):
        out = c.step(np.array([0.0, 1.0]) if n < 180 else np.array([1.0, -1.0]), 1 / 60)
        transitions += out.transitioned
        rest = np.linalg.norm(row_offsets(db, out.frame), axis=-1)
        local = yaw_rotate(out.root_direction, out.positions - out.root_position, inverse=True)
        inertialized = c._pose(c.frames).positions[0] + c.inertializer.pos_offset[0]
        drawn.append(np.abs(bone_lengths(local, db.parents) - rest)[rigid].max())
        raw.append(np.abs(bone_lengths(inertialized, db.parents) - rest)[rigid].max())
        toe_moved.append(np.linalg.norm(local[toes] - inertialized[toes], axis=-1).max())
        rebuilt = positions_with_lengths(inertialized, db.parents, rest, anchors=[db.roles["hips"]])
        hips_only.append(np.linalg.norm(rebuilt[toes] - inertialized[toes], axis=-1).max())
    assert transitions >= 10
    # metres: on most frames the toes lie where inertialization puts them (on the others the
    # inertialized leg is longer than the leg: the toe as near as the straight leg reaches)
    assert np.mean(np.array(toe_moved) < 1e-6) >= 0.6
    assert np.mean(toe_moved) <= 0.5 * np.mean(hips_only)
    assert max(drawn) < 1e-5                       # metres: every frame, every bone
    assert max(raw) > 0.01                         # what the rebuild removes


def test_demo_headless_metrics(shared_data, tmp_path, capsys):
    files = sorted((shared_data / "bandai_namco" / "dataset-1").glob("*_active_*.bvh"))
    out = tmp_path / "demo"
    rc = main(["demo", "matching", "--headless", "--frames", "480", "--no-video", "--out", str(out), "--config", "bandai",
               "--data", *map(str, files)])
    assert rc == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["frames"] == 480
    assert m["root_position_error_m"]["max"] <= 0.15 + 1e-6
    assert 0 < m["root_position_error_m"]["mean"] < 0.15
    assert m["heading_error_deg"]["mean"] < 30
    assert np.isfinite(m["foot_skating_m_per_s"]["mean"]) and m["foot_skating_m_per_s"]["contact_samples"] > 0
    assert m["searches"] >= 480 // 6 and m["transitions"] > 0
    assert m["distance_travelled_m"] > 10  # the scripted track runs for most of 8 s
    adj = m["root_adjustment_m_per_s"]  # the root's pull toward the simulation, m/s
    assert 0 < adj["mean"] <= adj["max"] < 60 * 0.15 + 10  # at most a clamp jump plus a run step
    assert "root error" in capsys.readouterr().out and m["foot_lock"]
    # foot locking reduces the skating of the same run
    rc = main(["demo", "matching", "--headless", "--frames", "480", "--no-video", "--out", str(tmp_path / "nolock"),
               "--config", "bandai", "--no-foot-lock", "--data", *map(str, files)])
    free = json.loads((tmp_path / "nolock" / "metrics.json").read_text())
    assert free["foot_skating_m_per_s"]["mean"] > m["foot_skating_m_per_s"]["mean"]


def test_foot_lock_pins_toes_on_the_scripted_track(shared_data):
    """MM-style toe locking and MM transition timing: on a small LaFAN1 database (walk +
    obstacles, mirrored) over 600 steps of the demo's joystick track, horizontal toe speed
    in contact with foot locking was mean 1.29 / median 0.118 m/s before (the ankle was
    pinned, so the rolling foot swung the toe; transitions decayed the offset one frame
    early) and is now 0.55 / 0.000 m/s; the lock removes 59% of the unlocked figure (was
    23%). What remains is mostly the 0.15 m clamp dragging the root while this small
    database cannot run as fast as the stick asks. Root and heading errors (before 0.135 m,
    5.02 deg; now 0.136 m, 5.26 deg) may not get worse than 0.145 m / 5.52 deg."""
    from kinema.demos.matching import joystick_track
    from kinema.engine import stick

    files = [shared_data / "lafan1" / f for f in ("walk4_subject1.bvh", "obstacles1_subject1.bvh")]
    db = build_from_paths(files, "lafan1", mirror=True, progress=False)
    toes = [db.joint_names.index(db.config.left_toe), db.joint_names.index(db.config.right_toe)]
    track = joystick_track(600)
    figures = {}
    for lock in (False, True):
        c = MotionMatchingController(db, config=MatchingConfig(foot_lock=lock, unlock_radius=0.3))
        prev, skate, root_err, heading = None, [], [], []
        for n in range(600):
            inp = track.read(n, 60.0)
            out = c.step(stick(inp), 1 / 60, walk=inp.gamepad_axes.get("right_trigger", -1.0) > 0.0)
            toe = out.positions[toes]
            if prev is not None:
                skate.extend((np.linalg.norm((toe - prev)[:, [0, 2]], axis=1) * 60)[out.contacts])
            prev = toe
            root_err.append(np.linalg.norm(out.root_position - c.trajectory.sim.position))
            heading.append(np.degrees(np.arccos(np.clip(out.root_direction @ c.trajectory.sim.direction, -1, 1))))
        figures[lock] = (np.mean(skate), np.median(skate), np.mean(root_err), np.mean(heading), len(skate))
    free, locked = figures[False], figures[True]
    assert locked[4] > 100 and free[4] > 100  # enough contact samples
    assert locked[1] < 0.02
    assert locked[0] < 0.8 and locked[0] < 0.55 * free[0]
    for f in (free, locked):
        assert f[2] <= 0.135 + 0.01 and f[3] <= 5.02 + 0.5


def test_pose_angular_velocities_are_world_rates_in_root_space(db):
    """The controller's pose rows carry world velocities (the root's yaw rate included), so
    inertialization offsets keep the world pose's rates through a transition. Oracle: scipy
    composes each row's world rotations (root yaw x root-space rotation) and differences
    them; expressed in the root frame they must match the pose's angular velocities on
    turning frames, which they would miss by the yaw rate without it."""
    from scipy.spatial.transform import Rotation as R

    c = MotionMatchingController(db)
    a = c.layout["root_angular_velocity"][0]
    yaw_rate = db.pose[:, a + 1].astype(np.float64)
    stops = set((db.ranges[:, 1] - 1).tolist())
    rows = [r for r in np.flatnonzero(np.abs(yaw_rate) > 0.5)[::5] if r not in stops and r + 1 not in stops][:60]
    assert len(rows) >= 20
    errors, rates = [], []
    for r in rows:
        world = []
        for k in (r, r + 1):
            d = db.root_directions[k].astype(np.float64)
            yaw = R.from_rotvec([0.0, np.arctan2(d[0], d[2]), 0.0])
            world.append(yaw * R.from_quat(c._pose(k).rotations, scalar_first=True))
        yaw_r = R.from_rotvec([0.0, np.arctan2(*db.root_directions[r, [0, 2]].astype(np.float64)), 0.0])
        omega = yaw_r.inv().apply((world[1] * world[0].inv()).as_rotvec() * db.fps)  # (J, 3) root frame
        errors.append(np.median(np.linalg.norm(c._pose(r).angular_velocities - omega, axis=-1)))
        rates.append(abs(yaw_rate[r]))
    assert np.median(errors) < 0.25 * np.median(rates)


def test_query_puts_the_stick_after_pose_joint_features(shared_data):
    """With ``pose_joints`` the trajectory no longer starts at column 15: the query keeps the
    playing row's pose features (feet, hips, the named joints) and writes the springs'
    prediction into the trajectory columns only."""
    files = [shared_data / "lafan1" / "walk4_subject1.bvh"]
    db = build_from_paths(files, "lafan1_pose", progress=False)
    c = MotionMatchingController(db)
    for _n in range(90):
        c.step(np.array([1.0, 0.5]), 1 / 60)
    t = db.trajectory_start
    q = c.query()
    np.testing.assert_allclose(q[:t], db.features[c.frame, :t], atol=1e-6)
    traj = c.trajectory.predict().features(c.root_position, c.root_direction)
    np.testing.assert_allclose(db.denormalise(q)[t:], traj, atol=1e-4)


@pytest.mark.parametrize("foot_lock", [False, True])
def test_batch_equals_characters_stepped_one_by_one(db, foot_lock):
    """Six characters from different rows, each with its own stick, walk flag and strafe
    stick, stepped as one batch (one search over those due, one inertializer) play the same
    rows, transitions and world poses as six single controllers."""
    b, frames = 6, 150
    rng = np.random.default_rng(11)
    starts = db.ranges[rng.integers(0, len(db.ranges), b), 0] + 10
    cfg = MatchingConfig(foot_lock=foot_lock)
    batch = MotionMatchingController(db, config=cfg, start_frame=starts, batch=b)
    singles = [MotionMatchingController(db, config=cfg, start_frame=int(s)) for s in starts]
    angles = rng.uniform(-np.pi, np.pi, b)
    searches = 0
    for f in range(frames):
        sticks = np.stack([np.sin(angles + 0.02 * f), np.cos(angles + 0.02 * f)], -1) * ((f + np.arange(b) * 17) % 90 < 70)[:, None]
        walk = (f // 40 + np.arange(b)) % 2 == 1
        facing = np.tile([0.0, 1.0], (b, 1)) if 60 < f < 90 else None
        out = batch.step(sticks, 1 / 60, walk=walk, facing_stick=facing)
        refs = [s.step(sticks[i], 1 / 60, walk=bool(walk[i]), facing_stick=None if facing is None else facing[i])
                for i, s in enumerate(singles)]
        assert out.positions.shape == (b, len(db.joint_names), 3)
        np.testing.assert_array_equal(out.frame, [r.frame for r in refs])
        np.testing.assert_array_equal(out.transitioned, [r.transitioned for r in refs])
        np.testing.assert_allclose(out.positions, np.stack([r.positions for r in refs]), rtol=0, atol=1e-9)
        np.testing.assert_allclose(out.rotations, np.stack([r.rotations for r in refs]), rtol=0, atol=1e-9)
        np.testing.assert_allclose(out.root_position, np.stack([r.root_position for r in refs]), rtol=0, atol=1e-9)
        searches += int(out.searched.sum())
    assert searches > frames * b / cfg.search_every * 0.9    # it did search, as batches
    assert np.ptp(batch.root_position[:, 0]) > 0.5           # and the characters went their own ways


def test_search_mask_keeps_every_transition_inside_it(db):
    """With a search mask, every row the controller jumps to is an allowed one (it then plays
    that row's successors); with the upright rows, a released stick stays on its feet."""
    from kinema.errors import KinemaError
    from kinema.matching.database import upright_rows

    up = upright_rows(db)
    assert 0 < len(up) < db.rows
    mask = np.zeros(db.rows, bool)
    mask[up] = True
    c = MotionMatchingController(db, start_frame=int(up[0]), search_mask=mask)
    jumps = 0
    hips = []
    a = next(lo for name, lo, _ in db.pose_layout if name == "joint_positions")
    for f in range(600):
        stick = np.array([np.sin(f / 40), np.cos(f / 40)]) if f < 300 else np.zeros(2)
        out = c.step(stick, 1 / 60)
        if out.transitioned:
            jumps += 1
            assert mask[out.frame], out.frame
        hips.append(db.pose[out.frame, a + 3 * db.roles["hips"] + 1])
    assert jumps > 5
    median = np.median(db.pose[:, a + 3 * db.roles["hips"] + 1])
    assert np.min(hips[300:]) > 0.8 * median      # released: standing, not crouched or fallen
    with pytest.raises(KinemaError, match="search_mask"):
        MotionMatchingController(db, search_mask=np.zeros(db.rows, bool))


def test_transition_cost_leaves_a_row_only_for_a_clearly_better_match(db):
    """The higher ``transition_cost``, the fewer transitions on the same stick (a search
    here mostly finds a match far better than continuing: 83 transitions in 100 searches
    at cost 0, and about as many at 1); with an unpayable cost the controller transitions
    only where its clip runs out."""
    stops = {}
    for cost in (0.0, 1.0, 20.0, 1e9):
        c = MotionMatchingController(db, config=MatchingConfig(transition_cost=cost))
        count, prev = 0, c.frames[0]
        for n in range(600):
            out = c.step(np.array([np.sin(n / 50), np.cos(n / 50)]), 1 / 60)
            if out.transitioned:
                count += 1
                if cost == 1e9:   # the row before was its clip's last playable one
                    assert prev + 1 >= c._clip_stop[0], (prev, c._clip_stop[0])
            prev = out.frame
        stops[cost] = count
    assert stops[0.0] >= stops[1.0] > stops[20.0] > stops[1e9] >= 0, stops
    assert stops[0.0] > 10
