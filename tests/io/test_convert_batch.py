"""Batch conversion: file discovery and output naming, per-animation outputs, fps/scale
options, failures collected per file, and the process pool giving the same files."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import kinema
from kinema.io import bvh, convert, gltf, npz


@pytest.fixture()
def tree(sample_data, tmp_path):
    """in/a: walk60.bvh, run_forward.bvh, walk60.npz (same stem as the BVH); in/b: fox.glb
    (3 animations); in/c: broken.bvh (truncated); in/.hidden/x.bvh; in/notes.txt."""
    src = tmp_path / "in"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir()
    (src / "c").mkdir()
    (src / ".hidden").mkdir()
    shutil.copy(sample_data / "games105" / "walk60.bvh", src / "a")
    shutil.copy(sample_data / "games105" / "run_forward.bvh", src / "a")
    shutil.copy(sample_data / "fox" / "fox.glb", src / "b")
    kinema.save(kinema.load(sample_data / "games105" / "idle.bvh", scale=1.0), src / "a" / "walk60.npz")
    text = (sample_data / "games105" / "run_forward.bvh").read_text()
    (src / "c" / "broken.bvh").write_text(text[: len(text) // 2])
    shutil.copy(sample_data / "games105" / "idle.bvh", src / ".hidden" / "x.bvh")
    (src / "notes.txt").write_text("not motion")
    return src


def test_plan_recurses_filters_and_disambiguates(tree, tmp_path):
    out = tmp_path / "out"
    jobs = convert.plan([tree], out)
    got = {j.source.relative_to(tree).as_posix(): j.dest_base.relative_to(out).as_posix() for j in jobs}
    assert got == {
        "a/run_forward.bvh": "a/run_forward",
        "a/walk60.bvh": "a/walk60_bvh",          # walk60.bvh and walk60.npz would collide
        "a/walk60.npz": "a/walk60_npz",
        "b/fox.glb": "b/fox",
        "c/broken.bvh": "c/broken",
    }
    # a file given directly lands at the top of OUT; an OUT inside the input is skipped
    inner = tree / "converted"
    jobs = convert.plan([tree / "a" / "run_forward.bvh", tree], inner)
    assert jobs[0].dest_base == inner / "run_forward"
    (inner / "a").mkdir(parents=True)
    shutil.copy(tree / "a" / "run_forward.bvh", inner / "a" / "old.bvh")
    assert all(inner not in j.source.parents for j in convert.plan([tree], inner))
    with pytest.raises(kinema.UnsupportedFormatError):
        convert.plan([tree / "notes.txt"], out)
    with pytest.raises(FileNotFoundError):
        convert.plan([tree / "missing"], out)


def test_convert_all_writes_every_good_file_and_reports_the_bad_one(tree, tmp_path):
    out = tmp_path / "out"
    summary = convert.convert_all(convert.plan([tree], out), jobs_n=1, progress=False)
    assert [r.source for r in summary.failed] == [str(tree / "c" / "broken.bvh")]
    err = summary.failed[0].error
    assert err.startswith("FormatError:") and "broken.bvh:" in err
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.npz"))
    assert names == ["a/run_forward.npz", "a/walk60_bvh.npz", "a/walk60_npz.npz",
                     "b/fox__Run.npz", "b/fox__Survey.npz", "b/fox__Walk.npz"]
    assert not list(out.rglob("broken*"))
    # the npz holds exactly what loading the source gives
    src = bvh.load(tree / "a" / "run_forward.bvh")
    got = npz.load(out / "a" / "run_forward.npz")
    assert np.array_equal(got.rotations, src.rotations) and np.array_equal(got.positions, src.positions)
    assert got.metadata["source"] == str(tree / "a" / "run_forward.bvh")
    # one npz per glTF animation, each equal to loading that animation
    for anim in gltf.animation_names(tree / "b" / "fox.glb"):
        want = gltf.load(tree / "b" / "fox.glb", animation=anim)
        got = npz.load(out / "b" / f"fox__{anim}.npz")
        assert got.metadata["animation"] == anim
        assert np.array_equal(got.rotations, want.rotations) and got.num_frames == want.num_frames
    assert summary.frames == sum(npz.load(p).num_frames for p in out.rglob("*.npz"))


def test_fps_and_scale_options(sample_data, tmp_path):
    path = sample_data / "games105" / "walk60.bvh"
    jobs = convert.plan([path], tmp_path)
    summary = convert.convert_all(jobs, jobs_n=1, fps=30.0, scale=1.0, progress=False)
    assert not summary.failed
    got = npz.load(tmp_path / "walk60.npz")
    src = bvh.load(path, scale=1.0)
    assert src.fps == 60.0 and got.fps == 30.0
    assert got.num_frames == (src.num_frames - 1) // 2 + 1
    np.testing.assert_allclose(got.positions, src.positions[::2], atol=1e-6)   # metres, every 2nd frame
    # a format without a scale option gets its lengths multiplied
    glb = tmp_path / "fox.glb"
    shutil.copy(sample_data / "fox" / "fox.glb", glb)
    convert.convert_all(convert.plan([glb], tmp_path / "o"), jobs_n=1, scale=2.0, progress=False)
    want = gltf.load(glb, animation="Walk")
    got = npz.load(tmp_path / "o" / "fox__Walk.npz")
    np.testing.assert_allclose(got.positions, want.positions * 2.0, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got.global_positions(), want.global_positions() * 2.0, rtol=1e-5, atol=1e-5)


def test_process_pool_gives_the_same_files(tree, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    s1 = convert.convert_all(convert.plan([tree / "a", tree / "c"], one), jobs_n=1, progress=False)
    s2 = convert.convert_all(convert.plan([tree / "a", tree / "c"], two), jobs_n=2, progress=False)
    assert [r.source for r in s1.results] == [r.source for r in s2.results]
    assert [r.error is None for r in s1.results] == [r.error is None for r in s2.results]
    assert len(s2.failed) == 1
    for p in one.rglob("*.npz"):
        a, b = np.load(p, allow_pickle=False), np.load(two / p.relative_to(one), allow_pickle=False)
        for k in a.files:
            if k != "metadata":
                assert np.array_equal(a[k], b[k]), (p, k)


def test_safe_names():
    assert convert.safe_name("mixamo.com") == "mixamo.com"
    assert convert.safe_name("Take 001/left:arm") == "Take_001_left_arm"
    assert convert.safe_name("..") == "animation"
