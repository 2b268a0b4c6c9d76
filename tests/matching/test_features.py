"""The feature registry: one declaration per matching feature group gives the layout, the
rows and the queries; the shipped databases and checkpoints keep their fingerprints and
their features (to float32 rounding; queries bit for bit)."""
from __future__ import annotations

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

# What the implementation before the registry (commit efde6a0, three hand-kept copies of each
# feature) built from the bundled sample (and, for the dog, the registry's first build, equal
# to it): per array, its dtype, shape, norm and four fixed random projections (see _summary).
# The registry must reproduce them to float32 rounding. They were hashes of the bytes until
# session 34, when a machine with another CPU moved the last bits of the same numpy code's
# float32 results (efde6a0 and the registry still agreed bit for bit there).
BEFORE = {
    "games105": {
        "raw_features": ("<f4", (1114, 27), [111.680699101, -39.3662824679, 8.36887993571, -24.188723423, 100.754699037]),
        "features": ("<f4", (1114, 27), [217.862662901, 22.2954281462, 201.493181604, -96.4393370287, 6.34258966694]),
        "feature_mean": ("<f4", (27,), [2.27179881225, -2.10860394695, 3.95590943744, 2.52317182714, 0.0563774194337]),
        "feature_scale": ("<f4", (27,), [1.99008089256, -1.44754029358, 2.98711638749, 1.3277949645, 1.38845625443]),
        "pose": ("<f4", (1114, 246), [321.495608204, -572.690797778, 241.94236087, 96.5635677483, 18.6396695298]),
        "contacts": ("|b1", (1114, 2), [37.2558720204, -42.3071879597, 24.548288515, 48.8253263997, 49.6498831815]),
    },
    "games105_pose": {
        "raw_features": ("<f4", (1114, 36), [126.29924827, 63.7922036567, -99.4649376624, 94.8003265779, -108.188520616]),
        "features": ("<f4", (1114, 36), [224.654798447, -162.621327987, -328.698652508, 243.068634599, -310.882203688]),
        "feature_mean": ("<f4", (36,), [2.87366302701, -2.04441433337, -0.128207249572, -0.631522826457, 3.91366237197]),
        "feature_scale": ("<f4", (36,), [2.01178676624, -1.78130720597, 5.3990909275, -0.13153629688, 4.04491276973]),
        "pose": ("<f4", (1114, 246), [321.495608204, -572.690797778, 241.94236087, 96.5635677483, 18.6396695298]),
        "contacts": ("|b1", (1114, 2), [37.2558720204, -42.3071879597, 24.548288515, 48.8253263997, 49.6498831815]),
    },
    "dog": {
        "features": ("<f4", (10666, 39), [501.976461494, -143.423956673, 50.6925296824, 235.235353013, -254.210636953]),
        "mean": ("<f8", (39,), [2.37083556818, -0.382757923431, 6.54683209363, 4.75014860267, -2.78504821007]),
        "std": ("<f8", (39,), [3.6724488551, -1.33005252555, 7.98469093491, -1.19222197897, -2.28156285646]),
        "weights": ("<f8", (39,), [6.42261628933, -3.31017226636, 15.2854392344, 0.585346926629, -3.31752426157]),
    },
}
SUMMARY_RTOL = 1e-5   # of the array's norm: float32 rounding moves a summary by about 1e-7 of it
POSE_JOINTS = {"base": "games105", "pose_joints": ["lWrist", "rWrist", "torso_head"], "pose_joint_weight": 0.5}


def _summary(a: np.ndarray) -> np.ndarray:
    """The norm and four projections on fixed random vectors (float64, (5,)) of an array's
    values: a last-bit change moves them by about 1e-7 of the norm, a wrong feature by far
    more."""
    x = np.asarray(a, np.float64).ravel()
    w = np.random.default_rng(0).standard_normal((4, x.size))
    return np.array([np.sqrt((x ** 2).sum()), *(w @ x)])


def _assert_as_before(arrays: dict[str, np.ndarray], before: dict[str, tuple]) -> None:
    assert sorted(arrays) == sorted(before)
    for name, a in arrays.items():
        dtype, shape, summary = before[name]
        a = np.asarray(a)
        assert (a.dtype.str, a.shape) == (dtype, shape), name
        ref = np.array(summary)
        np.testing.assert_allclose(_summary(a), ref, rtol=0, atol=SUMMARY_RTOL * ref[0], err_msg=name)


def _database_arrays(db) -> dict[str, np.ndarray]:
    return {k: getattr(db, k) for k in ("raw_features", "features", "feature_mean", "feature_scale", "pose", "contacts")}


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


def test_rows_as_before(sample_db, sample_paths):
    """The registry's rows are the pre-registry implementation's (to float32 rounding), and
    the check sees a feature a thousandth off in one column."""
    _assert_as_before(_database_arrays(sample_db), BEFORE["games105"])
    posed = build_from_paths(sample_paths, DatabaseConfig.from_dict(POSE_JOINTS), mirror=True, progress=False)
    _assert_as_before(_database_arrays(posed), BEFORE["games105_pose"])
    off = _database_arrays(sample_db)
    off["raw_features"] = off["raw_features"].copy()
    off["raw_features"][:, 5] *= 1.001
    with pytest.raises(AssertionError, match="raw_features"):
        _assert_as_before(off, BEFORE["games105"])
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


def test_dog_features_as_before(shared_data):
    db = quadruped.build_database(quadruped.default_paths())
    _assert_as_before({"features": db.features, "mean": db.normaliser.mean, "std": db.normaliser.std,
                       "weights": db.normaliser.weight}, BEFORE["dog"])
    assert [g[0] for g in db.feature_set.layout] == ["trajectory_position", "trajectory_direction", "paw_positions",
                                                     "paw_velocities", "hip_velocity"]
    assert db.feature_set.joystick == slice(0, 12) and db.feature_set.width == db.features.shape[1]
