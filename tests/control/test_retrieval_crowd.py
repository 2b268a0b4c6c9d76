"""The batched retrieval runtime: a crowd of B characters stepped at once equals the same
characters stepped one by one, and the single-character controller (a view of a crowd of
one) still produces what it produced before batching (outputs pinned from that code)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kinema.control.retrieval.controller import MODES, RetrievalController, RetrievalCrowd
from kinema.control.retrieval.metrics import joint_positions
from kinema.errors import KinemaError

ROOT = Path(__file__).resolve().parents[2]
# the sample network the pins were written with (the first stage of the sample model shipped in
# sessions 39-40, kept for these pins when session 41 retrained the first stage)
MODEL = ROOT / "models" / "retrieval_sample_games105_pinned.safetensors"
BASELINE = ROOT / "models" / "retrieval_sample_games105_pinned_noretrieval.safetensors"
PINNED = Path(__file__).parent / "data" / "retrieval_single_sample.npz"


@pytest.fixture(scope="module")
def sample_db():
    from kinema.control.retrieval.evaluate import open_database
    from kinema.nn.checkpoint import read_metadata

    return open_database(None, read_metadata(MODEL))


@pytest.fixture()
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)   # as the pinned outputs were written
    yield
    torch.set_num_threads(before)


def test_single_controller_reproduces_the_pre_batching_outputs(sample_db, one_thread):
    """Pinned: 60 frames of every mode written by the one-character controller before it
    became a view of a crowd (tests/control/data/retrieval_single_sample.npz), which had
    no floor: with the ground off they are reproduced; with it (the default) the network's
    poses, which dip 2 mm under the sample's lowest toe by frame 5, are lifted onto it."""
    from kinema.control.retrieval.metrics import body_joints

    ref = np.load(PINNED)
    ctl = RetrievalController(MODEL, sample_db, BASELINE)
    grounded = RetrievalController(MODEL, sample_db, BASELINE)
    ground = ctl.retriever.ground
    ctl.retriever.ground = None
    grounded.reset(7, (0.5, 0.0, -1.0), (0.6, 0.0, 0.8))
    lifted = []
    for f, c in enumerate(ref["control"]):
        lifted.append(grounded.step(c))
        grounded.adjust_toward(np.array([0.5 + f * 0.02, 0, -1.0]), np.array([0.0, 0, 1.0]), 1 / 60)
    assert joint_positions(sample_db, np.stack(lifted))[:, body_joints(sample_db), 1].min() >= ground - 1e-6
    assert joint_positions(sample_db, ref["retrieval_pose"])[:, body_joints(sample_db), 1].min() < ground - 1e-3
    for mode in MODES:
        ctl.reset(7, (0.5, 0.0, -1.0), (0.6, 0.0, 0.8))
        ctl.set_mode(mode)
        poses, roots, contacts = [], [], []
        for f, c in enumerate(ref["control"]):
            poses.append(ctl.step(c))
            ctl.adjust_toward(np.array([0.5 + f * 0.02, 0, -1.0]), np.array([0.0, 0, 1.0]), 1 / 60)
            roots.append(np.concatenate(ctl.root))
            contacts.append(ctl.contacts.copy())
        # float32 products round differently on other CPUs' kernels (seen: 1.7e-6 on values
        # near 2.5, 5e-7 relative): a few ulps, far below any change of behaviour
        np.testing.assert_allclose(np.stack(poses), ref[f"{mode}_pose"], rtol=1e-5, atol=1e-5, err_msg=mode)
        np.testing.assert_allclose(np.stack(roots), ref[f"{mode}_root"], rtol=1e-5, atol=1e-5, err_msg=mode)
        np.testing.assert_array_equal(np.stack(contacts), ref[f"{mode}_contacts"], err_msg=mode)


@pytest.mark.parametrize("mode", ["retrieval", "matching"])
def test_crowd_equals_its_characters_stepped_one_by_one(sample_db, mode, one_thread):
    """Five characters from different rows, roots and search phases, each with its own
    joystick: the batch's poses, roots and contacts are those of five single controllers."""
    db = sample_db
    b, frames = 5, 48
    rng = np.random.default_rng(3)
    rows = rng.integers(0, db.rows - 200, b)
    phase = np.array([0, 1, 2, 3, 5])
    pos = (rng.normal(size=(b, 3)) * [1, 0, 1]).astype(np.float32)
    yaw = rng.uniform(-np.pi, np.pi, b)
    dirs = np.stack([np.sin(yaw), np.zeros(b), np.cos(yaw)], -1).astype(np.float32)
    controls = (db.trajectory[rng.integers(0, db.rows, (frames, b))] + rng.normal(size=(frames, b, 12)) * 0.05
                ).astype(np.float32)
    crowd = RetrievalCrowd(MODEL, db, b, mode=mode, phase=phase)
    crowd.reset(rows, pos, dirs)
    singles = [RetrievalController(MODEL, db, mode=mode, phase=int(phase[i])) for i in range(b)]
    for i, s in enumerate(singles):
        s.reset(int(rows[i]), pos[i], dirs[i])
    for f in range(frames):
        goal = pos + f * 0.01
        out = crowd.step(controls[f])
        crowd.adjust_toward(goal, dirs, 1 / 60)
        ref = np.stack([s.step(controls[f, i]) for i, s in enumerate(singles)])
        for i, s in enumerate(singles):
            s.adjust_toward(goal[i], dirs[i], 1 / 60)
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-4, err_msg=f"frame {f}")
        np.testing.assert_allclose(crowd.root_pos, np.concatenate([s.root_pos for s in singles]), atol=1e-5)
        np.testing.assert_array_equal(crowd.contacts, np.stack([s.contacts for s in singles]))
    rot, jp = crowd.world_pose()
    assert rot.shape == (b, db.num_joints, 4) and jp.shape == (b, db.num_joints, 3)
    np.testing.assert_allclose(jp, np.stack([s.world_pose()[1] for s in singles]), atol=1e-4)
    np.testing.assert_allclose(crowd.joint_positions(), np.stack([s.joint_positions() for s in singles]), atol=1e-4)
    # the characters really differ (the comparison is not between copies of one)
    assert np.ptp(crowd.root_pos[:, 0]) > 0.1


def test_staggered_crowd_searches_a_share_of_its_characters_per_frame(sample_db):
    """With phases 0..refresh-1 each frame after the first searches only the characters
    due: B / refresh queries a frame instead of B every refresh frames."""
    db = sample_db
    b = 12
    crowd = RetrievalCrowd(MODEL, db, b, phase=np.arange(b) % 6)
    searched = []
    search = crowd.retriever.search

    def counting(features, exclude=None):
        searched.append(len(features))
        return search(features, exclude)
    crowd.retriever.search = counting
    control = np.repeat(db.trajectory[100:101], b, 0)
    for _ in range(13):
        crowd.step(control)
    assert searched == [b] + [b // 6] * 12


def test_crowd_refuses_bad_settings(sample_db):
    with pytest.raises(KinemaError, match="at least one character"):
        RetrievalCrowd(MODEL, sample_db, 0)
    with pytest.raises(KinemaError, match="unknown controller mode"):
        RetrievalCrowd(MODEL, sample_db, 2, mode="dance")


def test_drive_is_the_runtime_frame_the_springs_and_the_adjustment(sample_db, one_thread):
    """drive(stick) equals the frame written out by hand (springs from the reset roots, their
    prediction as the joystick, the step, the pull toward the simulation), bit for bit, for a
    crowd of three started at different roots; the single controller's drive is character 0's
    with one character's shapes."""
    from kinema.control.trajectory import TrajectoryController
    from kinema.maths import angles

    rows = np.array([3, 40, 90])
    pos = np.array([[0.5, 0.0, -1.0], [2.0, 0.0, 0.0], [-1.0, 0.0, 3.0]], np.float32)
    facing = np.array([[0.6, 0.0, 0.8], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]], np.float32)
    driven = RetrievalCrowd(MODEL, sample_db, 3, start_row=rows)
    by_hand = RetrievalCrowd(MODEL, sample_db, 3, start_row=rows)
    driven.reset(rows, pos, facing)
    by_hand.reset(rows, pos, facing)
    traj = TrajectoryController(position=pos.astype(np.float64), yaw=angles.yaw(facing.astype(np.float64)), batch=3)
    single = RetrievalController(MODEL, sample_db, start_row=3)
    single.reset(3, pos[0], facing[0])
    walk = np.array([True, False, True])
    for f in range(90):
        sticks = np.stack([np.sin([0.05 * f, 1.0, 2.0 + 0.03 * f]), np.cos([0.05 * f, 1.0, 2.0])], -1)
        sim = driven.drive(sticks, 1 / 60, walk=walk)
        ref = traj.update(sticks, 1 / 60, walk=walk)
        by_hand.step(traj.predict().features(by_hand.root_pos, by_hand.root_dir))
        by_hand.adjust_toward(ref.position, ref.direction, 1 / 60)
        one = single.drive(sticks[0], 1 / 60, walk=True)
        assert one.position.shape == (3,) and isinstance(one.gait, float)
        np.testing.assert_array_equal(sim.position, ref.position)
        np.testing.assert_array_equal(one.position, sim.position[0])
    np.testing.assert_array_equal(driven.poses, by_hand.poses)
    np.testing.assert_array_equal(driven.root_pos, by_hand.root_pos)
    np.testing.assert_allclose(single.pose, driven.poses[0], rtol=0, atol=1e-5)
    assert np.linalg.norm(driven.root_pos[1] - pos[1]) > 0.5     # the sticks moved them


@pytest.mark.parametrize("mode", ["retrieval", "matching"])
def test_a_search_mask_keeps_every_search_inside_it(sample_db, mode, one_thread):
    """With ``search_mask`` every searched row (all k candidates, or the row motion matching
    jumps to) is an allowed one; without it the same drive leaves that set; an empty mask
    is refused."""
    db = sample_db
    mask = np.zeros(db.rows, bool)
    mask[db.ranges[0, 0]:db.ranges[0, 1]] = True          # one clip's rows only
    sticks = np.random.default_rng(3).uniform(-1, 1, (240, 3, 2))
    searched = {}
    for name, use in (("masked", mask), ("free", None)):
        crowd = RetrievalCrowd(MODEL, db, 3, mode=mode, start_row=np.array([0, 40, 80]), search_mask=use)
        rows = []
        for stick in sticks:
            crowd.drive(stick, 1 / 60)
            # the searched rows (the played rows advance from them between searches)
            rows.append(crowd.stream.rows.ravel() if mode == "retrieval" else crowd.played.copy())
        searched[name] = np.concatenate(rows)
    assert mask[searched["masked"]].all()
    assert not mask[searched["free"]].all()               # the mask is what kept it inside
    with pytest.raises(KinemaError, match="search mask"):
        RetrievalCrowd(MODEL, db, 1, search_mask=np.zeros(db.rows, bool))


def test_upright_mask_against_a_row_by_row_reading(sample_db):
    """``upright_mask``: a row is allowed exactly when the hips stay within the band of their
    median height from it to ``ahead`` rows on or to its clip's end, checked row by row on a
    database where the rule cuts something (the sample's crouched idle rows, with a tight
    band); None where it would allow every row."""
    from kinema.matching.database import _hips_height, upright_mask

    db = sample_db
    hips = _hips_height(db)
    band = float(np.quantile(np.abs(hips / np.median(hips) - 1), 0.7))
    mask = upright_mask(db, ahead=30, band=band)
    assert mask is not None and 0 < mask.sum() < db.rows
    for r in range(db.rows):
        end = min(r + 30, db.ranges[db.clip_of(np.array([r]))[0], 1])
        assert mask[r] == bool(np.all(np.abs(hips[r:end] / np.median(hips) - 1) <= band)), r
    assert upright_mask(db, band=10.0) is None
