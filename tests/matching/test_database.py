"""The matching database on real data (LaFAN1, Bandai-Namco): layout, normalisation,
feature semantics, mirroring, exact search on real features, files and fingerprints."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kinema.errors import CheckpointError, KinemaError
from kinema.matching.config import DatabaseConfig
from kinema.matching.database import BUILDER_VERSION, Database, build_database, build_from_paths, source_from_file
from kinema.matching.search import Exclusion


@pytest.fixture(scope="module")
def lafan(shared_data):
    return build_from_paths([shared_data / "lafan1"], "lafan1", mirror=True, progress=False)


@pytest.fixture(scope="module")
def bandai(shared_data):
    return build_from_paths([shared_data / "bandai_namco" / "dataset-1"], "bandai", mirror=True, progress=False)


def _frames30(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("Frames:"):
            return int(line.split()[1])
    raise AssertionError(path)


def test_layout_and_sizes(lafan, shared_data):
    files = sorted((shared_data / "lafan1").glob("*.bvh"))
    expected = sum(2 * _frames30(f) - 1 for f in files)  # 30 -> 60 Hz over the same span
    assert lafan.rows == 2 * expected  # plus mirrors
    assert lafan.pose_width == 270 == 22 * 12 + 6
    assert lafan.features.shape == (lafan.rows, 27) and lafan.features.dtype == np.float32
    assert lafan.frame_time == pytest.approx(1 / 60)
    assert len(lafan.clip_names) == 14 and lafan.clip_names[1] == lafan.clip_names[0] + "_mirror"
    assert lafan.ranges[0, 0] == 0 and lafan.ranges[-1, 1] == lafan.rows
    assert np.all(lafan.ranges[1:, 0] == lafan.ranges[:-1, 1])
    assert lafan.contacts.shape == (lafan.rows, 2)
    assert 0.2 < lafan.contacts.mean() < 0.9


def test_normalisation_groups(lafan, bandai):
    for db in (lafan, bandai):
        np.testing.assert_allclose(db.features.mean(0), 0, atol=1e-3)
        std = db.features.astype(np.float64).std(0)
        for name, a, b, w in db.feature_layout:
            assert std[a:b].mean() == pytest.approx(w, rel=1e-3), name
        np.testing.assert_allclose(db.denormalise(db.features), db.raw_features, atol=1e-4)


def test_trajectory_features_from_root(lafan):
    raw, rp, rd = lafan.raw_features, lafan.root_positions.astype(np.float64), lafan.root_directions.astype(np.float64)
    for c in (0, 5):
        s, e = lafan.ranges[c]
        rows = np.arange(s, e)
        for i, off in enumerate((20, 40, 60)):
            fut = np.minimum(rows + off, e - 1)  # clamped at the clip end
            d = rp[fut] - rp[rows]
            yaw = np.arctan2(rd[rows, 0], rd[rows, 2])
            x = np.cos(yaw) * d[:, 0] - np.sin(yaw) * d[:, 2]
            z = np.sin(yaw) * d[:, 0] + np.cos(yaw) * d[:, 2]
            np.testing.assert_allclose(raw[rows, 15 + 2 * i], x, atol=1e-4)
            np.testing.assert_allclose(raw[rows, 16 + 2 * i], z, atol=1e-4)
        np.testing.assert_allclose(raw[e - 1, 15:21], 0, atol=1e-6)  # last frame: no future
    # characters mostly move forward: +z trajectory dominates
    assert np.median(raw[:, 20]) > 0.3


def test_mirror_rows_mirror_the_features(lafan):
    a, b = lafan.ranges[0], lafan.ranges[1]
    orig, mir = lafan.raw_features[a[0]:a[1]], lafan.raw_features[b[0]:b[1]]
    expect = orig.copy()
    expect[:, 0:3], expect[:, 3:6] = orig[:, 3:6], orig[:, 0:3]  # left <-> right foot
    expect[:, 6:9], expect[:, 9:12] = orig[:, 9:12], orig[:, 6:9]
    expect[:, [0, 3, 6, 9, 12, 15, 17, 19, 21, 23, 25]] *= -1  # x components flip
    np.testing.assert_allclose(mir, expect, atol=2e-3)


def _oracle_topk(features, queries, allowed, k):
    """float64 costs in chunks of queries; (Q, k) sorted costs of allowed rows.
    ``allowed(qs (C, 1), rows (1, N))`` broadcasts to (C, N)."""
    f = features.astype(np.float64)
    fn = (f * f).sum(1)
    rows = np.arange(len(f))[None]
    out = []
    for s in range(0, len(queries), 100):
        q = queries[s:s + 100].astype(np.float64)
        d = fn[None] - 2 * q @ f.T + (q * q).sum(1)[:, None]
        d = np.where(allowed(np.arange(s, s + len(q))[:, None], rows), np.maximum(d, 0), np.inf)
        out.append(np.sort(np.partition(d, k - 1, axis=1)[:, :k], axis=1))
    return np.concatenate(out)


@pytest.mark.parametrize("which", ["lafan", "bandai"])
def test_search_equals_brute_force_on_real_features(which, request):
    db = request.getfixturevalue(which)
    rng = np.random.default_rng(0)
    n = 600
    src = rng.integers(0, db.rows, n)
    noise = rng.choice([0.0, 0.02, 0.2, 1.0], n)[:, None]
    q = (db.features[src] + noise * rng.normal(size=(n, 27))).astype(np.float32)
    clip = db.clip_of(np.arange(db.rows))
    stop = db.ranges[clip, 1]
    own = db.clip_of(src)
    twin = own ^ 1  # mirrors follow their clip
    mask = rng.random(db.rows) > 0.1
    settings = {
        "none": (None, lambda qs, r: np.ones(np.broadcast_shapes(qs.shape, r.shape), bool)),
        "around": (Exclusion(current=src, around=20, clip_end=20),
                   lambda qs, r: ~((np.abs(r - src[qs]) <= 20) & (clip[r] == own[qs])) & (r < stop[r] - 20)),
        "clips+mask": (Exclusion(clips=np.stack([own, twin], 1), mask=mask),
                       lambda qs, r: (clip[r] != own[qs]) & (clip[r] != twin[qs]) & mask[r]),
    }
    for name, (ex, allowed) in settings.items():
        idx, cost = db.search(q, k=4, exclude=ex)
        ref = _oracle_topk(db.features, q, allowed, 4)
        np.testing.assert_allclose(cost, ref, rtol=1e-5, atol=1e-6, err_msg=name)
        assert allowed(np.arange(n)[:, None], idx).all(), name  # every returned row is allowed
        d = ((db.features[idx].astype(np.float64) - q[:, None].astype(np.float64)) ** 2).sum(-1)
        np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-6, err_msg=name)  # the rows have those costs


def test_save_load_round_trip_and_damage(bandai, tmp_path):
    path = bandai.save(tmp_path / "db.npz")
    db = Database.load(path)
    assert db.fingerprint == bandai.fingerprint and db.info() == bandai.info()
    for k in ("features", "pose", "contacts", "ranges", "raw_features", "root_positions"):
        np.testing.assert_array_equal(getattr(db, k), getattr(bandai, k))
    assert db.config == bandai.config and db.clip_names == bandai.clip_names
    # damaged: flip bytes in the features array
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError):
        Database.load(bad)
    # pickled object arrays are refused
    obj = tmp_path / "obj.npz"
    np.savez(obj, features=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CheckpointError):
        Database.load(obj)


def test_fingerprint_depends_on_inputs_and_config_only(shared_data, tmp_path):
    files = sorted((shared_data / "bandai_namco" / "dataset-1").glob("*walk_happy*.bvh"))[:2]
    assert len(files) == 2
    a = build_from_paths(files, "bandai", progress=False)
    copies = [Path(shutil.copy(f, tmp_path / f.name)) for f in files]  # another location
    b = build_from_paths(copies, "bandai", progress=False)
    assert a.fingerprint == b.fingerprint and len(a.fingerprint) == 16
    int(a.fingerprint, 16)
    # independent recomputation from the documented recipe
    h = hashlib.sha256(f"kinema.matching.database|{BUILDER_VERSION}|".encode())
    h.update(DatabaseConfig.preset("bandai").canonical_json().encode())
    h.update(b"|plain")
    for f in files:
        h.update(f"|{f.stem}|{hashlib.sha256(f.read_bytes()).hexdigest()}".encode())
    assert a.fingerprint == h.hexdigest()[:16]
    # any change changes it: mirror, config, clip order, data
    assert build_from_paths(files, "bandai", mirror=True, progress=False).fingerprint != a.fingerprint
    cfg = DatabaseConfig.from_dict({"base": "bandai", "trajectory_direction_weight": 1.0})
    assert build_from_paths(files, cfg, progress=False).fingerprint != a.fingerprint
    # files are taken in one canonical (sorted) order: a reversed list is the same database,
    # while clips stacked in another order are another database
    assert build_from_paths(files[::-1], "bandai", progress=False).fingerprint == a.fingerprint
    srcs = [source_from_file(f) for f in files]
    assert build_database(srcs[::-1], "bandai", progress=False).fingerprint != a.fingerprint
    text = copies[1].read_text().splitlines()
    text[-1] = " ".join(f"{float(v) + 0.001:.6f}" for v in text[-1].split())  # nudge the last frame
    copies[1].write_text("\n".join(text) + "\n")
    changed = build_from_paths(copies, "bandai", progress=False)
    assert changed.fingerprint != a.fingerprint
    assert not np.array_equal(changed.pose[-1], a.pose[-1])


def test_config_file_and_errors(shared_data, tmp_path):
    cfg_file = tmp_path / "cfg.json"
    cfg_file.write_text(json.dumps({"base": "bandai", "trajectory_frames": [10, 20, 30, 40],
                                    "root": {"smoothing": "gaussian"}}))
    files = sorted((shared_data / "bandai_namco" / "dataset-1").glob("*.bvh"))[:1]
    db = build_from_paths(files, cfg_file, progress=False)
    assert db.features.shape[1] == 15 + 16 and db.config.root.smoothing == "gaussian"
    with pytest.raises(KinemaError, match="LeftFoot"):
        build_from_paths(files, "lafan1", progress=False)  # wrong skeleton for the preset
    with pytest.raises(KinemaError, match="unknown database config keys"):
        DatabaseConfig.from_dict({"feet": 1})
    with pytest.raises(KinemaError, match="skeleton differs"):
        build_from_paths([files[0], shared_data / "lafan1" / "push1_subject2.bvh"], "bandai", progress=False)


def test_pose_joint_features(shared_data):
    """``pose_joints`` adds the named joints' root-space positions before the trajectory:
    the other groups are unchanged, the runtime query reproduces the rows, and on a clip the
    database has not seen, the nearest row is closer in pose than with Holden's features."""
    names = ["obstacles1_subject1", "walk4_subject1", "multipleActions1_subject2"]
    files = [shared_data / "lafan1" / f"{n}.bvh" for n in names]
    plain = build_from_paths(files, "lafan1", progress=False)
    posed = build_from_paths(files, "lafan1_pose", progress=False)
    joints = list(posed.config.pose_joints)
    assert posed.features.shape == (plain.rows, 27 + 3 * len(joints)) and posed.trajectory_start == 33
    layout = {g[0]: g[1:] for g in posed.feature_layout}
    a, b, w = layout["pose_joint_positions"]
    assert (a, b, w) == (15, 33, posed.config.pose_joint_weight)
    np.testing.assert_array_equal(posed.raw_features[:, :15], plain.raw_features[:, :15])
    np.testing.assert_array_equal(posed.trajectory, plain.trajectory)
    idx = [posed.joint_names.index(j) for j in joints]
    # oracle: world joint positions taken into the root's frame (yaw about +Y, then offset)
    motion = source_from_file(files[0]).motion.resample(60.0)
    _, gpos = motion.global_transforms()
    r0, r1 = posed.ranges[posed.clip_names.index(names[0])]
    d = posed.root_directions[r0:r1].astype(np.float64)
    yaw = np.arctan2(d[:, 0], d[:, 2])
    rel = gpos[:, idx] - posed.root_positions[r0:r1, None].astype(np.float64)
    c, s = np.cos(-yaw)[:, None], np.sin(-yaw)[:, None]
    local = np.stack([c * rel[..., 0] + s * rel[..., 2], rel[..., 1], -s * rel[..., 0] + c * rel[..., 2]], -1)
    np.testing.assert_allclose(posed.raw_features[r0:r1, a:b], local.reshape(r1 - r0, -1), atol=1e-4)
    np.testing.assert_allclose(posed.features_from_pose(posed.pose, posed.trajectory), posed.raw_features, atol=1e-6)
    for name, _a, _b, weight in posed.feature_layout:  # each group's share of the cost is its weight
        assert posed.features[:, _a:_b].std(0).mean() == pytest.approx(weight, rel=1e-3), name

    held = build_from_paths([shared_data / "lafan1" / "obstacles3_subject3.bvh"], "lafan1_pose", progress=False)
    rows = np.arange(0, held.rows, 20)
    true = held.pose[rows, :66].reshape(len(rows), 22, 3)

    def top1_error(db, feats):
        hit = db.search(db.normalise(feats), 1)[0][:, 0]
        return np.linalg.norm(db.pose[hit, :66].reshape(len(rows), 22, 3) - true, axis=-1).mean()

    with_pose = top1_error(posed, held.raw_features[rows])
    without = top1_error(plain, plain.features_from_pose(held.pose[rows], held.trajectory[rows]))
    assert with_pose < 0.75 * without, (with_pose, without)


def test_pose_joint_config():
    cfg = DatabaseConfig.preset("lafan1_pose")
    assert DatabaseConfig.from_dict(json.loads(cfg.canonical_json())) == cfg
    # unused, the option is absent from the fingerprinted JSON (older databases keep theirs)
    assert "pose_joints" not in DatabaseConfig.preset("lafan1").canonical_json()
    custom = DatabaseConfig.from_dict({"base": "lafan1", "pose_joints": ["Head"], "pose_joint_weight": 2})
    assert custom.pose_joints == ("Head",) and custom.pose_joint_weight == 2


def test_pose_joint_unknown_name(shared_data):
    cfg = DatabaseConfig.from_dict({"base": "lafan1", "pose_joints": ["LeftPaw"]})
    with pytest.raises(KinemaError, match="LeftPaw"):
        build_from_paths([shared_data / "lafan1" / "walk4_subject1.bvh"], cfg, progress=False)


def test_carry_above_hips_takes_the_world_position_out_of_the_pose(shared_data):
    """Bandai-Namco's joint_Root stays at the world origin, so as recorded its root-space slots
    are the world origin seen from the character (checked against scipy); carried with the
    root they are constant, and nothing else in the database changes."""
    from scipy.spatial.transform import Rotation

    from kinema.features.trajectory import quat_to_sixd

    clip = shared_data / "bandai_namco" / "dataset-1" / "dataset-1_walk_normal_001.bvh"
    plain = build_from_paths([clip], "bandai", mirror=True, progress=False)
    carried = build_from_paths([clip], DatabaseConfig.from_dict({"base": "bandai", "carry_above_hips": True}),
                               mirror=True, progress=False)
    top = int(plain.parents[plain.roles["hips"]])
    assert plain.joint_names[top] == "joint_Root"
    lay = {name: (a, b) for name, a, b in plain.pose_layout}
    pos = lay["joint_positions"][0] + 3 * top + np.arange(3)
    rot = lay["joint_rotations_6d"][0] + 6 * top + np.arange(6)
    vel = lay["joint_velocities"][0] + 3 * top + np.arange(3)

    # as recorded: metres from the character and moving with it, the world origin in root space
    origin = plain.pose[:, pos].astype(np.float64)
    assert np.ptp(origin[:, [0, 2]], axis=0).max() > 1.0
    d = plain.root_directions.astype(np.float64)
    facing = Rotation.from_euler("y", np.arctan2(d[:, 0], d[:, 2])[:, None])
    np.testing.assert_allclose(facing.apply(origin) + plain.root_positions, 0.0, atol=2e-3)

    # carried: the same in every row
    np.testing.assert_allclose(carried.pose[:, pos], 0.0, atol=1e-5)
    identity = quat_to_sixd(np.array([[1.0, 0.0, 0.0, 0.0]]))[0]
    np.testing.assert_allclose(carried.pose[:, rot], np.broadcast_to(identity, (carried.rows, 6)), atol=1e-5)
    # its velocity: as recorded 0 (the origin never moves) while its position runs, which the
    # runtime's one-step kinematics cannot follow; carried, the root's own velocity
    np.testing.assert_array_equal(plain.pose[:, vel], 0.0)
    u = carried.pose[:, lay["root_velocity"][0]:lay["root_velocity"][1]]
    assert np.abs(u).max() > 1.0
    np.testing.assert_allclose(carried.pose[:, vel], u, atol=0.05)

    # nothing else moves: every other pose column, the features, contacts and roots
    others = np.setdiff1d(np.arange(plain.pose_width), np.concatenate([pos, rot, vel]))
    np.testing.assert_array_equal(carried.pose[:, others], plain.pose[:, others])
    np.testing.assert_array_equal(carried.raw_features, plain.raw_features)
    np.testing.assert_array_equal(carried.contacts, plain.contacts)
    np.testing.assert_array_equal(carried.root_positions, plain.root_positions)

    # off, the option is absent from the hashed config: the shipped models' databases keep their fingerprints
    assert "carry_above_hips" not in plain.config.to_dict()
    assert carried.fingerprint != plain.fingerprint


def test_a_carried_database_has_a_rebuild_command(shared_data, tmp_path, monkeypatch):
    """A training config whose database is ``{base = "bandai", carry_above_hips = true}`` gets
    the card command ``--config bandai --carry-above-hips``, which rebuilds that database (same
    fingerprint, not the plain preset's); a table that sets anything else names a JSON file."""
    import shlex

    from kinema.cli.main import main
    from kinema.control.retrieval.training import db_build_command

    monkeypatch.setenv("KINEMA_DATA", str(shared_data))
    rel = "bandai_namco/dataset-1/dataset-1_walk_normal_001.bvh"
    spec = {"base": "bandai", "carry_above_hips": True}
    cmd = db_build_command({"data": {"clips": [f"shared:{rel}"], "database": spec, "mirror": False}})
    assert " --config bandai --carry-above-hips -o DB.npz" in cmd, cmd
    argv = shlex.split(cmd)
    assert main([*argv[1:-1], str(tmp_path / "carried.npz"), "--quiet"]) == 0
    carried = build_from_paths([shared_data / rel], DatabaseConfig.from_dict(spec), mirror=False, progress=False)
    plain = build_from_paths([shared_data / rel], "bandai", mirror=False, progress=False)
    rebuilt = Database.load(tmp_path / "carried.npz")
    assert rebuilt.fingerprint == carried.fingerprint != plain.fingerprint
    assert rebuilt.config.carry_above_hips
    other = db_build_command({"data": {"clips": [f"shared:{rel}"], "database": {"base": "bandai", "contact_height": 0.1}}})
    assert "--config CONFIG.json" in other, other
