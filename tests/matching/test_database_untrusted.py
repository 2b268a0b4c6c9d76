"""Hostile database files: a relabelled fingerprint or config, missing metadata, arrays
inconsistent with the config, and size bombs are refused on load with a CheckpointError
naming the file; the fingerprint itself is unchanged by the integrity hash."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from kinema.errors import CheckpointError, LimitError
from kinema.limits import Limits
from kinema.matching.database import Database, _content_hash, _integrity_hash, build_from_paths


@pytest.fixture(scope="module")
def small(shared_data, tmp_path_factory):
    files = sorted((shared_data / "bandai_namco" / "dataset-1").glob("*.bvh"))[:2]
    db = build_from_paths(files, "bandai", progress=False)
    path = db.save(tmp_path_factory.mktemp("db") / "small.npz")
    return db, path


def _arrays(path) -> tuple[dict, dict]:
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    return data, json.loads(data.pop("metadata").tobytes())


def _write(path, data: dict, meta: dict, reseal: bool = False):
    if reseal:                          # a careful forger recomputes the integrity hash
        meta["integrity_sha256"] = _integrity_hash(meta)
    buf = io.BytesIO()
    np.savez(buf, **data, metadata=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    path.write_bytes(buf.getvalue())
    return path


def test_round_trip_keeps_the_fingerprint(small):
    db, path = small
    loaded = Database.load(path)
    assert loaded.fingerprint == db.fingerprint and loaded.rows == db.rows
    assert _arrays(path)[1]["integrity_sha256"] == _integrity_hash(_arrays(path)[1])


def test_relabelled_fingerprint_is_refused(small, tmp_path):
    data, meta = _arrays(small[1])
    meta["fingerprint"] = "8a7712459f3f025e"          # the LaFAN1 checkpoint's database
    p = _write(tmp_path / "relabel.npz", data, meta)
    with pytest.raises(CheckpointError, match=r"relabel\.npz: database metadata .* does not match its integrity "
                                              "hash: the file was edited or relabelled"):
        Database.load(p)


def test_relabelled_config_is_refused_even_when_resealed(small, tmp_path):
    data, meta = _arrays(small[1])
    meta["config"]["trajectory_frames"] = [10, 20, 30, 40]     # another config, same arrays
    with pytest.raises(CheckpointError, match="integrity hash"):
        Database.load(_write(tmp_path / "config.npz", data, meta))
    with pytest.raises(CheckpointError, match=r"config\.npz: database array 'features' has shape \(\d+, 27\), "
                                              r"expected \(\d+, 31\)"):
        Database.load(_write(tmp_path / "config.npz", data, meta, reseal=True))


def test_missing_metadata_keys(small, tmp_path):
    for key in ("clip_names", "joint_names", "fps", "config"):
        data, meta = _arrays(small[1])
        del meta[key]
        with pytest.raises(CheckpointError, match=rf"nokey\.npz: database metadata lacks '{key}'"):
            Database.load(_write(tmp_path / "nokey.npz", data, meta, reseal=True))
    data, meta = _arrays(small[1])
    meta["clip_names"] = "walk"
    with pytest.raises(CheckpointError, match="'clip_names' has the wrong type"):
        Database.load(_write(tmp_path / "nokey.npz", data, meta, reseal=True))


def test_older_file_without_integrity_hash(small, tmp_path):
    data, meta = _arrays(small[1])
    del meta["integrity_sha256"]
    with pytest.raises(CheckpointError, match="without an integrity hash: rebuild it"):
        Database.load(_write(tmp_path / "old.npz", data, meta))


def test_bad_ranges_and_values(small, tmp_path):
    data, meta = _arrays(small[1])
    data["ranges"] = data["ranges"][::-1].copy()
    meta["content_sha256"] = _content_hash(data)
    with pytest.raises(CheckpointError, match="clip ranges are not consecutive"):
        Database.load(_write(tmp_path / "ranges.npz", data, meta, reseal=True))


def test_size_limits_before_reading(small):
    with pytest.raises(LimitError, match=r"small\.npz: npz member '\w+\.npy' inflates to \d+ bytes, over 1000 "
                                         r".*max_array_bytes"):
        Database.load(small[1], limits=Limits(max_array_bytes=1000))
    with pytest.raises(CheckpointError, match="max_json_bytes"):
        Database.load(small[1], limits=Limits(max_json_bytes=100))


def test_deep_metadata(small, tmp_path):
    data, _ = _arrays(small[1])
    p = tmp_path / "deep.npz"
    buf = io.BytesIO()
    np.savez(buf, **data, metadata=np.frombuffer(("[" * 100_000 + "]" * 100_000).encode(), np.uint8))
    p.write_bytes(buf.getvalue())
    with pytest.raises(CheckpointError, match=r"deep\.npz: database metadata: JSON nested too deeply"):
        Database.load(p)
