"""Retrieval controller data on the bundled GAMES-105 clips: database rows, mirror twins,
leakage exclusion, candidate payloads in the current root space, refresh schedule, joystick."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kinema.control.retrieval.metrics import joint_positions
from kinema.control.retrieval.rollout import control_at, integrate_root, root_motion
from kinema.control.retrieval.sequences import WindowSampler
from kinema.control.retrieval.training import build_clips
from kinema.matching.config import DatabaseConfig

CLIPS = ["idle", "run_forward", "walk_and_turn_left", "walk_forward"]   # the games105_db fixture's clips


@pytest.fixture
def db(games105_db):
    return games105_db


@pytest.fixture
def retriever(games105_retriever):
    return games105_retriever


def test_rows_ranges_twins_and_widths(db):
    c = len(CLIPS)
    assert db.clip_names[0::2] == CLIPS and db.clip_names[1::2] == [n + "_mirror" for n in CLIPS]
    assert np.array_equal(db.twins, np.arange(2 * c) ^ 1)
    assert db.pose_width == 12 * 20 + 6 and db.features.shape == (db.rows, 27)
    lengths = db.ranges[:, 1] - db.ranges[:, 0]
    assert np.array_equal(lengths[0::2], lengths[1::2]) and db.ranges[-1, 1] == db.rows
    # walk_forward is at 100 fps in the file: resampled to 60 Hz over the same duration
    assert lengths[6] == 60
    # the mirror of a clip turns the other way: yaw rates have opposite signs
    a, b = db.ranges[4], db.ranges[5]
    m = root_motion(db, db.pose)
    np.testing.assert_allclose(m[a[0]:a[1], 2], -m[b[0]:b[1], 2], atol=1e-4)
    # the walk covers ground at a walking speed (m/s)
    speed = np.linalg.norm(m[a[0] + 30:a[1] - 30, :2], axis=1)
    assert 0.5 < np.median(speed) < 2.5
    assert np.array_equal(db.clip_ids(["walk_and_turn_left"]), [4, 5])


def test_pose_features_rebuild_the_database_features(db):
    f = db.features_from_pose(db.pose, db.trajectory)
    np.testing.assert_allclose(f, db.raw_features, atol=1e-5)


def test_payload_is_the_candidate_transplanted_to_the_current_root(db, retriever):
    """Root-space rows are valid at any root: moving the candidate's world joints onto the
    current character's root and expressing them there gives back the payload's pose."""
    row, cur = db.ranges[4, 0] + 100, db.ranges[2, 0] + 10
    payload = retriever.payload(np.array([row]), np.array([0.5], np.float32))[0]
    assert payload.shape == (retriever.width,) == (2 * db.pose_width + 3,)
    local = joint_positions(db, db.pose[row])
    # world joints of the candidate, from its own root
    d, p = db.root_directions[row], db.root_positions[row]
    world = np.stack([d[2] * local[:, 0] + d[0] * local[:, 2], local[:, 1], d[2] * local[:, 2] - d[0] * local[:, 0]], -1) + p
    # transplant: rigidly move the candidate's root onto the current root
    a = np.arctan2(db.root_directions[cur, 0], db.root_directions[cur, 2]) - np.arctan2(d[0], d[2])
    rel = world - p
    moved = np.stack([np.cos(a) * rel[:, 0] + np.sin(a) * rel[:, 2], rel[:, 1], np.cos(a) * rel[:, 2] - np.sin(a) * rel[:, 0]], -1)
    dc = db.root_directions[cur]
    back = np.stack([dc[2] * moved[:, 0] - dc[0] * moved[:, 2], moved[:, 1], dc[2] * moved[:, 2] + dc[0] * moved[:, 0]], -1)
    pose_n = payload[:db.pose_width]
    got = joint_positions(db, retriever.norm.denormalise(pose_n))
    np.testing.assert_allclose(got, back, atol=1e-4)
    # successor delta and extras
    np.testing.assert_allclose(payload[db.pose_width:2 * db.pose_width] * retriever.norm.std,
                               db.pose[row + 1] - db.pose[row], atol=1e-4)
    np.testing.assert_array_equal(payload[-3:-1], db.contacts[row])
    assert payload[-1] == np.float32(0.5)


def test_training_retrieval_excludes_own_clip_and_mirror_twin(db, retriever):
    rows = np.arange(db.ranges[4, 0], db.ranges[4, 1], 7)
    clips = db.clip_of(rows)
    idx, cost = retriever.search(db.features[rows], retriever.exclusions(clips))
    got = db.clip_of(idx)
    assert not np.isin(got, [4, 5]).any()
    assert np.all(np.diff(cost, axis=1) >= 0)
    # without the exclusion a query finds itself at cost 0
    idx0, cost0 = retriever.search(db.features[rows])
    assert np.array_equal(idx0[:, 0], rows) and np.all(cost0[:, 0] == 0)


def test_sampling_prefers_low_cost_and_stays_in_the_top(db, retriever):
    rng = np.random.default_rng(0)
    idx, cost = retriever.search(db.features[np.full(4000, db.ranges[4, 0] + 50)])
    pick, pc = retriever.sample(idx, cost, rng)
    assert pick.shape == (4000, 4) and np.isin(pick, idx[0]).all()
    assert all(len(set(r)) == 4 for r in pick[:50])                       # without replacement
    counts = np.array([(pick == r).sum() for r in idx[0]])
    assert counts[:4].sum() > counts[-4:].sum()                            # p ~ exp(-cost / tau)


def test_window_candidates_refresh_every_6_frames_and_advance_by_one(db, retriever):
    sampler = WindowSampler(retriever, np.arange(len(db.ranges)), 24, seed=1)
    batch = sampler.batch(8)
    assert batch.candidates.shape == (8, 24, 4, retriever.width)
    # decode candidate rows from their pose payload
    flat = batch.candidates[..., :db.pose_width].reshape(-1, db.pose_width)
    rows = np.array([((retriever.poses_n - f) ** 2).sum(-1).argmin() for f in flat]).reshape(8, 24, 4)
    np.testing.assert_array_equal(retriever.poses_n[rows], batch.candidates[..., :db.pose_width])
    steps = np.diff(rows, axis=1)                                          # (8, 23, 4)
    at_end = rows[:, :-1] == db.ranges[db.clip_of(rows[:, :-1]), 1] - 1
    advancing = ((steps == 1) | ((steps == 0) & at_end)).all(-1)
    assert advancing.mean() > 0.6                                          # 5 of every 6 frames
    assert (~advancing).sum(1).max() <= 24 // 6 + 1                       # at most one search per 6 frames
    for b in range(8):
        c = db.clip_of(batch.rows[b, 0])
        assert not np.isin(db.clip_of(rows[b]), [c, db.twins[c]]).any()


def _decode_rows(retriever, payload_pose):
    """Database rows of candidate payload poses (..., P), by exact match."""
    flat = payload_pose.reshape(-1, payload_pose.shape[-1])
    return np.array([((retriever.poses_n - f) ** 2).sum(-1).argmin() for f in flat]).reshape(payload_pose.shape[:-1])


def test_own_take_candidates_sit_at_a_constant_offset_and_leave_every_other_draw_alone(db, retriever):
    clips = np.arange(len(db.ranges))
    base = WindowSampler(retriever, clips, 24, seed=1).batch(16)
    own = WindowSampler(retriever, clips, 24, seed=1, own_share=0.5, own_shift=10).batch(16)
    # windows, poses and every other slot drawn exactly as without the option (the twin's recipe)
    np.testing.assert_array_equal(base.rows, own.rows)
    np.testing.assert_array_equal(base.pose, own.pose)
    changed = (base.candidates != own.candidates).any(-1).any(1)            # (B, k)
    assert (changed.sum(1) <= 1).all() and 2 <= changed.any(1).sum() <= 14
    for b in np.flatnonzero(changed.any(1)):
        s = int(np.flatnonzero(changed[b])[0])
        rows = _decode_rows(retriever, own.candidates[b, :, s, :db.pose_width])
        assert (db.clip_of(rows) == db.clip_of(own.rows[b, 0])).all()       # its own take
        offset = rows - own.rows[b, :-1]
        inside = (rows > db.ranges[db.clip_of(rows), 0]) & (rows < db.ranges[db.clip_of(rows), 1] - 2)
        assert np.abs(offset).max() <= 10 and len(set(offset[inside])) <= 1   # one constant shift
    # offset 0: the exact row, at the cost 0 of a perfect match
    exact = WindowSampler(retriever, clips, 24, seed=1, own_share=1.0, own_shift=0).batch(4)
    slot = (exact.candidates[..., -1] == 0).all(1)                           # (B, k)
    assert slot.any(1).all()
    for b in range(4):
        s = int(np.flatnonzero(slot[b])[0])
        np.testing.assert_array_equal(_decode_rows(retriever, exact.candidates[b, :, s, :db.pose_width]),
                                      exact.rows[b, :-1])
    with pytest.raises(ValueError, match="own_share"):
        WindowSampler(retriever, clips, 24, own_share=1.5)


def test_rollout_own_take_slot_follows_the_truth_with_the_predicted_states_cost(db, retriever):
    from kinema.control.retrieval.rollout import CandidateStream, query
    from kinema.control.retrieval.sequences import OwnTake
    rows = np.array([db.ranges[0, 0] + 30, db.ranges[2, 0] + 40, db.ranges[4, 0] + 50])
    which, shift, slot = own = OwnTake(1.0, 5, np.random.default_rng(0)).pick(3, retriever.k)
    assert which.all() and np.abs(shift).max() <= 5
    stream = CandidateStream(retriever, retriever.exclusions(db.clip_of(rows)), None, own=own)
    poses, ctrl = db.pose[rows] + 0.01, db.trajectory[rows]          # a drifted state
    got, _ = stream(0, poses, ctrl, rows)
    b = np.arange(3)
    np.testing.assert_array_equal(got[b, slot], rows + shift)
    q = query(retriever, poses, ctrl)
    np.testing.assert_allclose(stream.cost[b, slot], ((db.features[rows + shift] - q) ** 2).sum(-1), rtol=1e-5)
    others = np.ones(got.shape, bool)
    others[b, slot] = False
    assert not (db.clip_of(got) == db.clip_of(rows)[:, None])[others].any()   # the rest: other takes
    got, _ = stream(1, poses, ctrl, rows + 1)                                  # advancing with the truth
    np.testing.assert_array_equal(got[b, slot], rows + shift + 1)


def test_joystick_is_relative_to_the_given_root(db):
    rows = np.arange(db.ranges[4, 0], db.ranges[4, 1] - 1, 11)
    true = control_at(db, rows, db.root_positions[rows], db.root_directions[rows])
    np.testing.assert_allclose(true, db.trajectory[rows], atol=1e-5)
    # a root turned by 90 degrees sees the same future rotated: directions swap axes
    turned = np.stack([db.root_directions[rows, 2], np.zeros(len(rows)), -db.root_directions[rows, 0]], -1)
    c2 = control_at(db, rows, db.root_positions[rows], turned)
    assert not np.allclose(c2, true, atol=1e-2)
    np.testing.assert_allclose(np.hypot(c2[:, 0::2][:, :3], c2[:, 1::2][:, :3]),
                               np.hypot(true[:, 0::2][:, :3], true[:, 1::2][:, :3]), atol=1e-5)


def test_integrating_the_root_motion_reproduces_the_root(db):
    """The pose's root velocity and turning rate carry the root along its own track (the
    free-running root), on the turning walk and its mirror."""
    for c in (4, 5):
        a, b = db.ranges[c]
        pos, d = db.root_positions[a:a + 1].copy(), db.root_directions[a:a + 1].copy()
        for r in range(a + 1, b):
            pos, d = integrate_root(pos, d, root_motion(db, db.pose[r:r + 1]), db.fps)
        travelled = np.linalg.norm(db.root_positions[b - 1] - db.root_positions[a])
        assert travelled > 2.0
        assert np.linalg.norm(pos[0] - db.root_positions[b - 1]) < 0.02 * travelled   # central differences
        assert np.dot(d[0], db.root_directions[b - 1]) > np.cos(np.radians(1))


def test_fingerprint_is_the_db_build_fingerprint(db, sample_data, tmp_path):
    """The training database is what ``kinema db build`` writes: same fingerprint, and any
    change of files, order or config changes it."""
    from kinema.cli.main import main
    from kinema.matching.database import Database

    files = [str(sample_data / "games105" / f"{c}.bvh") for c in CLIPS]
    assert main(["db", "build", *files, "--config", "games105", "--mirror", "-o", str(tmp_path / "db.npz"),
                 "--quiet"]) == 0
    assert Database.load(tmp_path / "db.npz").fingerprint == db.fingerprint and len(db.fingerprint) == 16
    # the folder with the held-out clips excluded: the same files in the same order
    assert main(["db", "build", str(sample_data / "games105"), "--exclude", "walk60", "walk_and_ture_right",
                 "--config", "games105", "--mirror", "-o", str(tmp_path / "db2.npz"), "--quiet"]) == 0
    assert Database.load(tmp_path / "db2.npz").fingerprint == db.fingerprint
    other = build_clips([sample_data / "games105" / f"{c}.bvh" for c in CLIPS],
                        DatabaseConfig.from_dict({"base": "games105", "contact_speed": 0.3}), True)
    assert other.fingerprint != db.fingerprint
    fewer = build_clips([sample_data / "games105" / f"{c}.bvh" for c in CLIPS[:-1]],
                        DatabaseConfig.preset("games105"), True)
    assert fewer.fingerprint != db.fingerprint


def test_the_cards_rebuild_command_is_data_root_relative(db, sample_data, tmp_path, monkeypatch):
    """The card's ``kinema db build`` command names clips relative to the data roots, not the
    current folder: run from another folder it rebuilds the training database (same
    fingerprint), for ``sample:`` patterns and for absolute paths inside ``KINEMA_DATA``."""
    import shlex

    from kinema.cli.main import main
    from kinema.control.retrieval.training import db_build_command, load_config
    from kinema.matching.database import Database

    shared = tmp_path / "data"
    (shared / "games105").mkdir(parents=True)
    for c in [*CLIPS, "walk60"]:
        (shared / "games105" / f"{c}.bvh").write_bytes((sample_data / "games105" / f"{c}.bvh").read_bytes())
    monkeypatch.setenv("KINEMA_DATA", str(shared))
    cfg = load_config(Path(__file__).parents[2] / "configs" / "retrieval_tiny.toml")
    absolute = {**cfg, "data": {**cfg["data"], "clips": [str(shared / "games105" / "*.bvh")]}}
    relative = {**cfg, "data": {**cfg["data"], "clips": ["games105/*.bvh"], "base": str(shared)}}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for c, needle in ((cfg, " sample:games105/idle.bvh "), (absolute, "'shared:games105/*.bvh'"),
                      (relative, "'shared:games105/*.bvh'")):
        cmd = db_build_command(c)
        assert needle in cmd and str(tmp_path) not in cmd and "--exclude walk60" in cmd, cmd
        argv = shlex.split(cmd)
        assert argv[:3] == ["kinema", "db", "build"] and argv[-2:] == ["-o", "DB.npz"]
        assert main([*argv[1:-1], str(tmp_path / "rebuilt.npz"), "--quiet"]) == 0
        assert Database.load(tmp_path / "rebuilt.npz").fingerprint == db.fingerprint


def test_group_exclusion_keeps_a_query_out_of_its_whole_group(db, retriever):
    """``retrieval.exclude_group``: a training query retrieves from none of the clips whose
    names share its group (here "walk": walk_and_turn_left and walk_forward, mirrors too),
    as a held-out actor's queries find no clip of that actor at test time."""
    from kinema.control.retrieval.sequences import Retriever
    from kinema.control.retrieval.training import clip_groups, make_retriever
    from kinema.errors import KinemaError

    groups = clip_groups(db, "walk")
    names = [n.removesuffix("_mirror") for n in db.clip_names]
    walks = [i for i, n in enumerate(names) if n.startswith("walk")]
    assert len(walks) == 4 and len(set(groups[walks])) == 1 and len(set(groups)) == 3
    cfg = {"model": {"k": 4}, "retrieval": {"exclude_group": "walk"}}
    grouped = make_retriever(cfg, db, retriever.norm)
    assert isinstance(grouped, Retriever) and np.array_equal(grouped.excluded, Retriever(db, retriever.norm, groups=groups).excluded)
    c = names.index("walk_forward")
    assert sorted(grouped.exclusions(np.array([c]))[0].tolist()) == walks
    idle = names.index("idle")
    assert sorted(grouped.exclusions(np.array([idle]))[0].tolist()) == [-1, -1, idle, idle + 1]
    rows = np.arange(db.ranges[c, 0], db.ranges[c, 1], 5)
    idx, _ = grouped.search(db.features[rows], grouped.exclusions(db.clip_of(rows)))
    assert not np.isin(db.clip_of(idx), walks).any()
    idx, _ = retriever.search(db.features[rows], retriever.exclusions(db.clip_of(rows)))
    assert np.isin(db.clip_of(idx), walks).any()   # by clip only, the other walk is the nearest
    sampler = WindowSampler(grouped, np.array(walks), 24, seed=2)
    batch = sampler.batch(6)
    flat = batch.candidates[..., :db.pose_width].reshape(-1, db.pose_width)
    got = np.array([((grouped.poses_n - f) ** 2).sum(-1).argmin() for f in flat])
    assert not np.isin(db.clip_of(got), walks).any()
    with pytest.raises(KinemaError, match="regular expression"):
        clip_groups(db, "subject(")
    with pytest.raises(ValueError, match="one entry per database clip"):
        Retriever(db, retriever.norm, groups=np.zeros(3))


def test_upright_training_starts_stay_on_their_feet(shared_data):
    """``train.upright``: every teacher-forced window and every rollout start is drawn where
    the data's hips stay within 15% of their median height for the whole window (checked
    frame by frame), on LaFAN1, whose falls, crawls and crouches the rule leaves out; without
    it some windows hold them."""
    from kinema.control.retrieval.evaluate import cached_database
    from kinema.control.retrieval.sequences import Retriever
    from kinema.control.retrieval.training import rollout_starts
    from kinema.features.normalisation import Normaliser
    from kinema.matching.database import _hips_height, upright_rows
    from kinema.nn.checkpoint import read_metadata

    if not (shared_data / "lafan1").is_dir():
        pytest.skip("lafan1 not in the shared data folder")
    model = Path(__file__).resolve().parents[2] / "models" / "retrieval_lafan1.safetensors"
    db = cached_database(model, Path.home() / ".cache" / "kinema")
    norm = Normaliser.from_json(read_metadata(model)["normalisation"]["pose"])
    hips = _hips_height(db)
    off = np.abs(hips / np.median(hips) - 1) > 0.15
    clips = np.arange(0, len(db.ranges), 2)          # the originals, not their mirrors
    length = 64
    sampler = WindowSampler(Retriever(db, norm), clips, length, seed=0, allowed=upright_rows(db, length + 1))
    rng = np.random.default_rng(0)
    for starts, n in ((sampler.starts(256), length + 1), (rollout_starts(db, clips, 400, 256, rng, upright=True), 400)):
        rows = starts[:, None] + np.arange(n)[None]
        assert not off[rows].any()
        assert np.all(db.clip_of(rows[:, -1]) == db.clip_of(starts)) and np.isin(db.clip_of(starts), clips).all()
    free = rollout_starts(db, clips, 400, 256, np.random.default_rng(0))
    assert off[free[:, None] + np.arange(400)[None]].any()     # without the rule some windows leave their feet


def test_upright_rollouts_restrict_only_the_free_rollouts():
    """``train.upright_rollouts``: the free rollouts start where the data stays on its feet
    (:attr:`TrainSettings.upright_free`), while the teacher-forced windows keep every row
    (``upright`` stays off, so the sampler is not restricted); ``upright`` restricts both."""
    from kinema.control.retrieval.training import TrainSettings

    assert not TrainSettings().upright_free
    only = TrainSettings(upright_rollouts=True)
    assert only.upright_free and not only.upright
    assert TrainSettings(upright=True).upright_free
