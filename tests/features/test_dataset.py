"""The feature dataset: split by clip, memory-mapped caches, vectorised windows that match
the per-clip trajectory functions, mirroring, normalisation round trip, torch loader."""
from __future__ import annotations

import json

import numpy as np
import pytest

import kinema
from kinema.errors import KinemaError
from kinema.features import root as R
from kinema.features import trajectory as T
from kinema.features.dataset import FeatureDataset, FeatureSpec, Normalisation, build_dataset, split_by_clip


@pytest.fixture(scope="module")
def walks(shared_data):
    files = sorted((shared_data / "bandai_namco" / "dataset-1").glob("*_walk_*.bvh"))[:8]
    files += sorted((shared_data / "bandai_namco" / "dataset-1").glob("*_run_*.bvh"))[:2]
    return files


@pytest.fixture(scope="module")
def dataset(walks, tmp_path_factory):
    # built at 60 fps from 30 fps files: the resampling path is exercised too
    spec = FeatureSpec.bandai(fps=60.0, joint_series=T.TimeSeries(0.0, 1 / 60, 2))
    return build_dataset(walks, tmp_path_factory.mktemp("ds") / "bandai", spec, mirror=True,
                         validation=0.3, seed=1, progress=False)


def test_split_is_by_clip_and_mirrors_follow_their_source(dataset, walks):
    val = {c.source for c in dataset.clips if c.split == "validation"}
    train = {c.source for c in dataset.clips if c.split == "train"}
    assert val and train and not (val & train)
    assert len(val) == 3 and len(dataset.clips) == 2 * len(walks)
    ftrain, fval = dataset.frames("train"), dataset.frames("validation")
    assert ftrain.size + fval.size == dataset.num_frames
    assert not np.intersect1d(ftrain, fval).size
    # every frame's clip is wholly on one side
    assert set(dataset.clip_of[fval]) == {i for i, c in enumerate(dataset.clips) if c.split == "validation"}
    explicit = split_by_clip(["a", "b", "c"], ["b"])
    assert explicit == {"a": "train", "b": "validation", "c": "train"}
    with pytest.raises(KinemaError):
        split_by_clip(["a"], ["zzz"])


def test_caches_are_memory_mapped_and_resampled(dataset, walks):
    assert all(isinstance(v, np.memmap) for v in dataset.caches.values())
    first = kinema.load(walks[0])
    assert dataset.clips[0].stop - dataset.clips[0].start == first.resample(60).num_frames
    assert dataset.spec.fps == 60.0 and list(dataset.joint_offsets) == [0, 1]


def test_windows_equal_the_per_clip_trajectory_features(dataset, walks):
    # clip 2 (an original, not a mirror): compare the sampled windows with the functions
    i = 2
    clip = dataset.clips[i]
    assert not clip.mirrored
    m = kinema.load(clip.source).resample(60)
    gr, gp = m.global_transforms()
    root = R.compute_root(gp, gr, m.skeleton, dataset.spec.root)
    frames = np.array([0, 5, 50, m.num_frames - 30, m.num_frames - 1])
    batch = dataset.sample(clip.start + frames)
    traj = T.root_trajectory(root, dataset.spec.root_series, 60, frames=frames)
    jt = T.joint_trajectory(gp, gr, root, dataset.spec.joint_series, 60, frames=frames)
    n = frames.size
    np.testing.assert_allclose(batch["root_positions"], traj.positions[..., [0, 2]].reshape(n, -1), atol=1e-4)
    np.testing.assert_allclose(batch["root_directions"], traj.directions[..., [0, 2]].reshape(n, -1), atol=1e-5)
    np.testing.assert_allclose(batch["root_velocities"], traj.velocities[..., [0, 2]].reshape(n, -1), atol=1e-3)
    np.testing.assert_allclose(batch["joint_positions"], jt.positions.reshape(n, -1), atol=1e-4)
    np.testing.assert_allclose(batch["joint_rotations"], jt.rotations.reshape(n, -1), atol=1e-5)
    np.testing.assert_allclose(batch["joint_velocities"], jt.velocities.reshape(n, -1), atol=1e-3)
    # windows are clamped inside the clip: the last frame's future is the last frame
    last = batch["root_positions"][-1].reshape(-1, 2)
    np.testing.assert_allclose(last[len(last) // 2:], 0, atol=1e-6)
    sizes = dataset.group_sizes()
    assert {k: v.shape[1] for k, v in batch.items()} == sizes


def test_feature_space_mirror_equals_the_stored_mirrored_clip(dataset):
    orig, mirrored = dataset.clips[0], dataset.clips[1]
    assert mirrored.mirrored and mirrored.source == orig.source
    frames = np.arange(0, orig.stop - orig.start, 7)
    a = dataset.sample(orig.start + frames, mirror=True)
    b = dataset.sample(mirrored.start + frames)
    for k in a:
        tol = 2e-3 if "velocities" in k else 2e-4
        np.testing.assert_allclose(a[k], b[k], atol=tol, err_msg=k)


def test_normalisation_is_saved_and_round_trips(dataset, tmp_path):
    norm = dataset.normalisation
    assert norm is not None and set(norm.mean) == set(dataset.group_sizes())
    again = dataset.compute_normalisation()
    for k in norm.mean:
        np.testing.assert_array_equal(norm.mean[k], again.mean[k])
        np.testing.assert_array_equal(norm.std[k], again.std[k])
    # the stats are those of the training frames
    train = dataset.sample(dataset.frames("train"))
    for k, v in train.items():
        np.testing.assert_allclose(norm.mean[k], v.mean(0), atol=1e-4)
        np.testing.assert_allclose(norm.std[k], np.maximum(v.std(0), 1e-6), rtol=1e-3, atol=1e-5)
    x = dataset.sample(dataset.frames("validation")[:256])
    back = norm.denormalise(norm.normalise(x))
    for k in x:
        np.testing.assert_allclose(back[k], x[k], atol=1e-4)
    norm.save(tmp_path / "n.npz")
    loaded = Normalisation.load(tmp_path / "n.npz")
    for k in norm.mean:
        np.testing.assert_array_equal(loaded.mean[k], norm.mean[k])
        np.testing.assert_array_equal(loaded.std[k], norm.std[k])
    z = norm.normalise(train)
    assert abs(float(np.mean(z["joint_positions"]))) < 1e-3
    # a strided subset (for very large datasets) gives nearly the same statistics
    sub = dataset.compute_normalisation(max_frames=2000)
    for k in norm.mean:
        assert np.abs(sub.mean[k] - norm.mean[k]).max() <= 0.1 * norm.std[k].max() + 1e-6, k


def test_reopen_and_torch_loader(dataset):
    import torch
    ds = FeatureDataset(dataset.folder)
    assert ds.num_frames == dataset.num_frames
    loader = ds.dataloader("train", batch_size=256, shuffle=True, seed=3, mirror_probability=0.5)
    seen = 0
    for batch in loader:
        assert set(batch) == set(ds.group_sizes())
        assert all(v.dtype == torch.float32 and v.shape[0] <= 256 for v in batch.values())
        assert all(torch.isfinite(v).all() for v in batch.values())
        seen += batch["contacts"].shape[0]
    assert seen == ds.frames("train").size and len(loader) == -(-seen // 256)
    # shuffled order changes per epoch, deterministically
    tb = ds.torch_dataset("train", batch_size=64, seed=3)
    first = tb.order.copy()
    tb.set_epoch(1)
    assert not np.array_equal(first, tb.order)
    assert np.array_equal(np.sort(first), np.sort(tb.order))


def test_bad_dataset_folders_raise(tmp_path, dataset):
    with pytest.raises(KinemaError, match="dataset.json"):
        FeatureDataset(tmp_path)
    meta = json.loads((dataset.folder / "dataset.json").read_text())
    (tmp_path / "dataset.json").write_text(json.dumps(meta))
    (tmp_path / "positions.f32").write_bytes(b"\0" * 16)
    with pytest.raises(KinemaError):
        FeatureDataset(tmp_path)
    with pytest.raises(KinemaError, match="already"):
        build_dataset([], dataset.folder)


def test_parallel_build_writes_the_same_dataset(walks, tmp_path):
    spec = FeatureSpec.bandai()
    one = build_dataset(walks[:3], tmp_path / "one", spec, validation=0.0, progress=False)
    two = build_dataset(walks[:3], tmp_path / "two", spec, validation=0.0, progress=False, workers=2)
    assert [(c.name, c.start, c.stop) for c in one.clips] == [(c.name, c.start, c.stop) for c in two.clips]
    for k in one.caches:
        np.testing.assert_array_equal(np.asarray(one.caches[k]), np.asarray(two.caches[k]))
