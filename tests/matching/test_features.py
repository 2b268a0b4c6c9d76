"""The feature registry: one declaration per matching feature group gives the layout, the
rows and the queries; the shipped databases and checkpoints keep their fingerprints and
their features bit for bit."""
from __future__ import annotations

import hashlib
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from kinema.matching import quadruped
from kinema.matching.config import DatabaseConfig
from kinema.matching.database import build_from_paths
from kinema.matching.features import FeatureGroup, FeatureInputs, FeatureSet, biped_features, trajectory_groups
from kinema.nn.checkpoint import read_metadata

MODELS = Path(__file__).resolve().parents[2] / "models"
SAMPLE_CLIPS = ["idle", "run_forward", "walk_and_turn_left", "walk_forward"]

# SHA-256 (see _digest) of the arrays the implementation before the registry (commit
# efde6a0, three hand-kept copies of each feature) built from the bundled sample: the
# registry must reproduce them bit for bit. float32 results of the same numpy code on the
# same inputs; a different CPU or numpy could move the last bit, then compare the arrays
# with that build instead.
BEFORE = {
    "games105": "d9e453c0998d0226f2d528a8b01fcc13cec3f15c5434b39231cb3e6f1e3c5000",
    "games105_pose": "ed9b471dfccb6edae55c4cd9c3b073470c6dbe8898987e75a67393f080d4824a",
    "dog": "2eb25daeb9add8ff4e3b7d5b32017bd479f9fdf05a745b27e5ae9603a41c6bd9",
}
POSE_JOINTS = {"base": "games105", "pose_joints": ["lWrist", "rWrist", "torso_head"], "pose_joint_weight": 0.5}


def _digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _database_digest(db) -> str:
    return _digest({k: getattr(db, k) for k in ("raw_features", "features", "feature_mean", "feature_scale",
                                                 "pose", "contacts")})


@pytest.fixture(scope="module")
def sample_paths(sample_data):
    return [sample_data / "games105" / f"{c}.bvh" for c in SAMPLE_CLIPS]


@pytest.fixture(scope="module")
def sample_db(sample_paths):
    return build_from_paths(sample_paths, "games105", mirror=True, progress=False)


def test_sample_database_keeps_the_checkpoint_fingerprint(sample_db):
    """The database the shipped sample model was trained on rebuilds with the fingerprint its
    checkpoint stores (the controller refuses any other)."""
    meta = read_metadata(MODELS / "retrieval_sample_games105.safetensors")
    assert sample_db.fingerprint == meta["fingerprint"] == meta["database"]["fingerprint"]
    assert sample_db.rows == meta["database"]["rows"] and sample_db.clip_names == meta["database"]["clips"]
    assert [list(s) for s in sample_db.pose_layout] == meta["database"]["pose_layout"]


def test_rows_bit_identical_to_before(sample_db, sample_paths):
    assert _database_digest(sample_db) == BEFORE["games105"]
    posed = build_from_paths(sample_paths, DatabaseConfig.from_dict(POSE_JOINTS), mirror=True, progress=False)
    assert _database_digest(posed) == BEFORE["games105_pose"]
    assert posed.features.shape[1] == 27 + 9 and posed.trajectory_start == 24


def test_queries_are_the_rows(sample_db):
    """A query from a row's pose vector and its own trajectory is the row, bit for bit."""
    np.testing.assert_array_equal(sample_db.features_from_pose(sample_db.pose, sample_db.trajectory),
                                  sample_db.raw_features)
    one = sample_db.features_from_pose(sample_db.pose[7], sample_db.trajectory[7])
    np.testing.assert_array_equal(one, sample_db.raw_features[7])


def test_every_config_weight_is_one_groups_weight():
    """Each ``*_weight`` field of the (fingerprinted) config weighs the groups it names, and no
    group's weight comes from anywhere else."""
    base = DatabaseConfig(pose_joints=("Head",))
    weights = [f.name for f in fields(DatabaseConfig) if f.name.endswith("_weight")]
    assert len(weights) == 6
    owners = {}
    for i, name in enumerate(weights):
        marked = replace(base, **{name: 10.0 + i})
        changed = [g for g, (_n, _a, _b, w) in zip(biped_features(base).layout, biped_features(marked).layout)
                   if w == 10.0 + i]
        assert changed, f"{name} weighs no feature group"
        owners.update({g[0]: name for g in changed})
    assert sorted(owners) == sorted(g.name for g in biped_features(base).groups)


def test_a_group_is_one_declaration():
    """Layout, width, joystick columns and values all follow the declared groups."""
    names = ["Hips", "Head", "Hand"]
    rng = np.random.default_rng(1)
    x = FeatureInputs(names, rng.normal(size=(5, 3, 3)), rng.normal(size=(5, 3, 3)), rng.normal(size=(5, 8)))
    head_height = FeatureGroup("head_height", 1, 2.0, lambda i: i.position("Head")[..., 1:2])
    fs = FeatureSet((FeatureGroup("hands", 6, 1.0, lambda i: i.position("Hand", "Head")), head_height,
                     *trajectory_groups(2, 1.0, 1.5)))
    assert fs.layout == [("hands", 0, 6, 1.0), ("head_height", 6, 7, 2.0), ("trajectory_position", 7, 11, 1.0),
                         ("trajectory_direction", 11, 15, 1.5)]
    assert fs.width == 15 and fs.joystick == slice(7, 15)
    out = fs.compute(x)
    assert out.dtype == np.float32 and out.shape == (5, 15)
    np.testing.assert_array_equal(out[:, 3:6], x.positions[:, 1].astype(np.float32))
    np.testing.assert_array_equal(out[:, 6], x.positions[:, 1, 1].astype(np.float32))
    np.testing.assert_array_equal(out[:, 7:], x.trajectory.astype(np.float32))
    with pytest.raises(ValueError, match="declared 2"):
        FeatureSet((FeatureGroup("bad", 2, 1.0, lambda i: i.position("Head")),)).compute(x)
    with pytest.raises(ValueError, match="stand together"):
        _ = FeatureSet((trajectory_groups(2, 1, 1)[0], head_height, trajectory_groups(2, 1, 1)[1])).joystick
    with pytest.raises(KeyError, match="Tail"):
        x.position("Tail")


def test_dog_features_bit_identical_to_before(shared_data):
    db = quadruped.build_database(quadruped.default_paths())
    assert _digest({"features": db.features, "mean": db.normaliser.mean, "std": db.normaliser.std,
                    "weights": db.normaliser.weight}) == BEFORE["dog"]
    assert [g[0] for g in db.feature_set.layout] == ["trajectory_position", "trajectory_direction", "paw_positions",
                                                     "paw_velocities", "hip_velocity"]
    assert db.feature_set.joystick == slice(0, 12) and db.feature_set.width == db.features.shape[1]
