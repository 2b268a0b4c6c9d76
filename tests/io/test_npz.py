"""Motion npz: exact round trip, plain-NumPy readability without pickle, versioning,
atomic writes (also under SIGKILL), AI4AnimationPy npz import, and bad files."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest

import kinema
from kinema.errors import FormatError
from kinema.io import npz
from kinema.maths import quat
from kinema.motion import Motion, Skeleton


def rot_angle(a, b):
    r = quat.mul(quat.inv(np.asarray(a, np.float64)), np.asarray(b, np.float64))
    return 2 * np.arctan2(np.linalg.norm(r[..., 1:], axis=-1), np.abs(r[..., 0]))


@pytest.fixture(scope="module")
def walk(sample_data):
    return kinema.load(sample_data / "games105" / "walk_forward.bvh", scale=1.0)


def test_round_trip_is_exact(walk, tmp_path):
    path = tmp_path / "walk.npz"
    walk.metadata["extra"] = {"tags": ["a", "b"], "weight": 0.5, "n": np.int64(3)}
    kinema.save(walk, path)
    back = kinema.load(path)
    assert back.joint_names == walk.joint_names
    assert np.array_equal(back.parents, walk.parents)
    assert np.array_equal(back.skeleton.offsets, walk.skeleton.offsets)
    assert np.array_equal(back.rotations, walk.rotations)
    assert np.array_equal(back.positions, walk.positions)
    assert back.fps == walk.fps and back.name == walk.name == "walk_forward"
    assert back.metadata["extra"] == {"tags": ["a", "b"], "weight": 0.5, "n": 3}
    assert back.metadata["bvh"] == walk.metadata["bvh"]
    # and again: a second round trip is byte-for-byte the same arrays
    kinema.save(back, tmp_path / "again.npz")
    again = np.load(tmp_path / "again.npz", allow_pickle=False)
    first = np.load(path, allow_pickle=False)
    assert sorted(again.files) == sorted(first.files)
    for k in first.files:
        assert np.array_equal(again[k], first[k]), k


def test_plain_numpy_reads_it_without_pickle(walk, tmp_path):
    path = tmp_path / "walk.npz"
    npz.save(walk, path, compress=False)
    z = np.load(path, allow_pickle=False)
    assert str(z["format"]) == "kinema.motion" and int(z["format_version"]) == npz.FORMAT_VERSION
    assert all(z[k].dtype != object for k in z.files)
    f, j = walk.num_frames, walk.num_joints
    assert z["rotations"].shape == (f, j, 4) and z["global_positions"].shape == (f, j, 3)
    # world arrays are what FK gives, so other tools need no kinematics of their own
    np.testing.assert_allclose(z["global_positions"], walk.global_positions(), atol=1e-6)
    assert rot_angle(z["global_rotations"], walk.global_rotations()).max() < 1e-6
    assert [str(n) for n in z["joint_names"]] == walk.joint_names
    import json
    assert json.loads(str(z["metadata"]))["format"] == "bvh"


def test_newer_version_and_wrong_files_are_refused(walk, tmp_path):
    path = tmp_path / "w.npz"
    npz.save(walk, path)
    arrays = dict(np.load(path, allow_pickle=False))
    arrays["format_version"] = np.asarray(99)
    np.savez(tmp_path / "future.npz", **arrays)
    with pytest.raises(FormatError, match="format_version 99"):
        kinema.load(tmp_path / "future.npz")

    bad_shape = dict(arrays, format_version=np.asarray(1), positions=arrays["positions"][:, :3])
    np.savez(tmp_path / "shape.npz", **bad_shape)
    with pytest.raises(FormatError, match="'positions' has shape"):
        kinema.load(tmp_path / "shape.npz")

    pickled = dict(arrays, format_version=np.asarray(1), joint_names=np.asarray(walk.joint_names, dtype=object))
    np.savez(tmp_path / "pickled.npz", **pickled)
    with pytest.raises(FormatError, match="pickle"):
        kinema.load(tmp_path / "pickled.npz")

    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    with pytest.raises(FormatError, match="not a motion npz"):
        kinema.load(tmp_path / "other.npz")

    raw = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(FormatError):
        kinema.load(tmp_path / "cut.npz")

    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(FormatError):
        kinema.load(tmp_path / "text.npz")

    np.save(tmp_path / "single.npy", np.zeros(3))
    os.replace(tmp_path / "single.npy", tmp_path / "single.npz")
    with pytest.raises(FormatError, match="single .npy"):
        kinema.load(tmp_path / "single.npz")


def test_corrupted_member_raises_format_error(walk, tmp_path):
    path = tmp_path / "w.npz"
    npz.save(walk, path, compress=True)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("rotations.npy")
    start = info.header_offset + 30 + len(info.filename) + 40
    raw[start:start + 200] = bytes(200)            # zero out compressed bytes
    (tmp_path / "corrupt.npz").write_bytes(bytes(raw))
    with pytest.raises(FormatError):
        kinema.load(tmp_path / "corrupt.npz")


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(walk, tmp_path, monkeypatch):
    path = tmp_path / "w.npz"
    npz.save(walk, path)
    before = path.read_bytes()

    def half_write(f, **arrays):
        f.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", half_write)
    with pytest.raises(KeyboardInterrupt):
        npz.save(walk[:10], path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.npz"]


KILL_SCRIPT = textwrap.dedent("""
    import sys, numpy as np
    from kinema.io import npz
    from kinema.motion import Motion, Skeleton
    f, j = 4000, 60
    rng = np.random.default_rng(0)
    sk = Skeleton([f"j{i}" for i in range(j)], np.arange(j) - 1, rng.normal(size=(j, 3)))
    q = rng.normal(size=(f, j, 4)); q /= np.linalg.norm(q, axis=-1, keepdims=True)
    m = Motion(sk, 30.0, q, rng.normal(size=(f, j, 3)), name="big")
    k = 0
    while True:
        m.name = f"write{k}"
        npz.save(m, sys.argv[1], compress=True)
        print(k, flush=True)
        k += 1
""")


def test_sigkill_during_write_never_leaves_a_half_file(tmp_path):
    target = tmp_path / "big.npz"
    interrupted = False
    for attempt in range(5):
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(target)], stdout=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout.readline().strip() == "0"       # one complete write done
            time.sleep(0.05 + 0.05 * attempt)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
        leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
        interrupted |= bool(leftovers)
        m = kinema.load(target)                        # always a complete, readable file
        assert m.num_frames == 4000 and m.name.startswith("write")
        for p in leftovers:
            p.unlink()
        if interrupted:
            break
    assert interrupted, "never caught the writer mid-write; the test proved nothing"


def test_ai4animation_npz_matches_its_world_data(shared_data):
    path = shared_data / "quadruped" / "ai4animation_npz" / "D1_008_KAN01_001.npz"
    assert npz.kind(path) == "ai4animation"
    m = kinema.load(path)
    z = np.load(path, allow_pickle=False)
    assert m.joint_names == [str(n) for n in z["bone_names"]]
    assert m.parents.tolist() == z["parent_indices"].tolist()
    assert m.fps == pytest.approx(float(z["framerate"]))
    assert m.name == "D1_008_KAN01_001" and m.metadata["format"] == "ai4animation-npz"
    np.testing.assert_allclose(m.global_positions(), z["positions"], atol=1e-5)
    assert rot_angle(m.global_rotations(), z["quaternions"][..., [3, 0, 1, 2]]).max() < 1e-5
    with pytest.raises(ValueError):                 # the key kinema must never touch
        z["parent_names"]


def test_ai4animation_style100_and_conversion_to_kinema_npz(shared_data, tmp_path):
    path = shared_data / "style100" / "WalkingStickLeft_BR.npz"
    m = kinema.load(path)
    assert m.num_joints == 23 and m.num_frames == 5483
    kinema.save(m, tmp_path / "s.npz")
    back = kinema.load(tmp_path / "s.npz")
    assert np.array_equal(back.rotations, m.rotations)
    assert npz.info(tmp_path / "s.npz")["format"] == "kinema-npz"
    assert npz.info(path)["format"] == "ai4animation-npz"


def test_metadata_must_be_json(tmp_path):
    sk = Skeleton(["a"], [-1], np.zeros((1, 3)))
    m = Motion.rest(sk, frames=2, metadata={"bad": object()})
    with pytest.raises(FormatError, match="JSON"):
        npz.save(m, tmp_path / "x.npz")
    assert not list(tmp_path.iterdir())
