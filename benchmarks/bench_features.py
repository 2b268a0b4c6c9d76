"""Training windows from all the mocap in ../shared/data, scaled to 20 hours.

kinema's pipeline (``build_dataset``: BVH load, resample to 30 fps, FK, root, contacts,
phases, caches written to memory-mapped files, normalisation; then windows for every frame
in vectorised batches) against a straightforward per-sample implementation of the same
windows (a Python loop over samples, per-sample NumPy on the same caches), measured in the
same run on a subset and checked to give the same numbers.

    .venv/bin/python benchmarks/bench_features.py [--peer-samples N] [--repeat R]
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

import kinema
from common import print_table, timeit
from kinema.data import shared_root
from kinema.features.dataset import FeatureDataset, FeatureSpec, build_dataset, clip_caches
from kinema.features.root import RootConfig
from kinema.maths import quat

TWENTY_HOURS = 20 * 3600.0


def _groups(root: Path) -> dict[tuple, list[Path]]:
    """Every BVH take outside characters/, grouped by skeleton topology."""
    groups: dict[tuple, list[Path]] = {}
    for f in sorted(root.rglob("*.bvh")):
        if "characters" in f.parts:
            continue
        sk = kinema.load(f).skeleton
        groups.setdefault((tuple(sk.names), tuple(sk.parents.tolist())), []).append(f)
    return groups


def _spec(names: tuple[str, ...]) -> FeatureSpec:
    if "Spine2" in names and "LeftToe" in names:
        return FeatureSpec.lafan1()
    if "UpperLeg_L" in names:
        return FeatureSpec.bandai()
    return FeatureSpec()  # root guessed from the skeleton, no contacts


def build_all(groups, folder: Path, workers: int = 1) -> list[FeatureDataset]:
    if folder.exists():
        shutil.rmtree(folder)
    return [build_dataset(files, folder / str(i), _spec(key[0]), validation=0.1, progress=False, workers=workers)
            for i, (key, files) in enumerate(groups.items())]


def _caches_only(motions) -> None:
    setups = {}
    for m, spec, key in motions:
        if key not in setups:
            root = spec.root or RootConfig.guess(m.skeleton)
            contacts = np.array([m.skeleton.index(j) for j in spec.contact_joints], np.int64)
            setups[key] = (replace(spec, root=root), np.arange(m.num_joints), contacts)
        spec, joints, contacts = setups[key]
        clip_caches(m, spec, joints, contacts, spec.root)


def windows_all(datasets: list[FeatureDataset], batch_size: int = 16384) -> int:
    n = 0
    for ds in datasets:
        frames = ds.frames()
        for i in range(0, frames.size, batch_size):
            batch = ds.sample(frames[i:i + batch_size])
            n += batch["root_positions"].shape[0]
    return n


def per_sample_windows(ds: FeatureDataset, frames: np.ndarray) -> dict[str, np.ndarray]:
    """The same windows, one sample at a time: the straightforward implementation."""
    c = ds.caches
    out: dict[str, list] = {k: [] for k in ds.group_sizes()}
    for n in frames:
        clip = ds.clip_of[n]
        lo, hi = ds.starts[clip], ds.stops[clip]
        d = c["root_directions"][n]
        yaw = np.array([np.cos(0.5 * np.arctan2(d[0], d[2])), 0, np.sin(0.5 * np.arctan2(d[0], d[2])), 0])
        inv = quat.inv(yaw)
        rp = c["root_positions"][n]
        rpos, rdir, rvel = [], [], []
        for o in ds.root_offsets:
            k = min(max(n + o, lo), hi - 1)
            rpos.append(quat.rotate(inv, c["root_positions"][k] - rp)[[0, 2]])
            rdir.append(quat.rotate(inv, c["root_directions"][k])[[0, 2]])
            rvel.append(quat.rotate(inv, c["root_velocities"][k])[[0, 2]])
        jpos, jrot, jvel, con, pha = [], [], [], [], []
        for o in ds.joint_offsets:
            k = min(max(n + o, lo), hi - 1)
            for j in range(c["positions"].shape[1]):
                jpos.append(quat.rotate(inv, c["positions"][k, j] - rp))
                jrot.append(np.concatenate([quat.rotate(inv, c["sixd"][k, j, :3]), quat.rotate(inv, c["sixd"][k, j, 3:])]))
                jvel.append(quat.rotate(inv, c["velocities"][k, j]))
            con.append(c["contacts"][k])
            a = 2 * np.pi * c["phases"][k]
            pha.append(np.stack([np.sin(a), np.cos(a)], -1))
        for key, parts in (("root_positions", rpos), ("root_directions", rdir), ("root_velocities", rvel),
                           ("joint_positions", jpos), ("joint_rotations", jrot), ("joint_velocities", jvel),
                           ("contacts", con), ("phases", pha)):
            out[key].append(np.concatenate([np.ravel(p) for p in parts]) if parts else np.zeros(0))
    return {k: np.stack(v).astype(np.float32) for k, v in out.items()}


def _cpu(fn) -> float:
    """CPU seconds (user + system, this process and its finished children) of one ``fn()``."""
    t0 = os.times()
    fn()
    t1 = os.times()
    return (t1.user + t1.system + t1.children_user + t1.children_system
            - t0.user - t0.system - t0.children_user - t0.children_system)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--peer-samples", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    root = shared_root()
    if root is None:
        print("bench_features: ../shared/data not found (set KINEMA_DATA)")
        return 1
    load_before = os.getloadavg()[0]
    groups = _groups(root)
    seconds = sum(kinema.load(f).duration for files in groups.values() for f in files)
    scale = TWENTY_HOURS / seconds
    tmp = Path(tempfile.mkdtemp(prefix="bench_features_"))
    stages: dict[str, tuple[float, float]] = {}

    def stage(name, fn, warmup=0):
        stages[name] = (timeit(fn, repeat=args.repeat, warmup=warmup), _cpu(fn))

    try:
        stage("load", lambda: [kinema.load(f) for files in groups.values() for f in files])
        motions = [(kinema.load(f).resample(30.0), _spec(key[0]), key) for key, files in groups.items() for f in files]
        stage("caches", lambda: _caches_only(motions))
        stage("build1", lambda: build_all(groups, tmp / "ds"))
        stage("build2", lambda: build_all(groups, tmp / "ds", workers=2))
        datasets = [FeatureDataset(p) for p in sorted((tmp / "ds").iterdir())]
        frames = sum(ds.num_frames for ds in datasets)
        stage("windows", lambda: windows_all(datasets), warmup=1)
        # the peer on a random subset of the largest group (same caches), checked equal
        big = max(datasets, key=lambda d: d.num_frames)
        subset = np.random.default_rng(0).choice(big.num_frames, args.peer_samples, replace=False)
        t0, c0 = time.perf_counter(), time.process_time()
        ref = per_sample_windows(big, subset)
        t_peer = (time.perf_counter() - t0) / subset.size
        c_peer = (time.process_time() - c0) / subset.size
        ours = big.sample(subset)
        for k in ours:
            np.testing.assert_allclose(ours[k], ref[k], atol=1e-4, err_msg=k)
        width = sum(big.group_sizes().values())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def row(label, wall, cpu, note=""):
        return [label, f"{wall:.2f} s", f"{cpu:.2f} s", f"{wall * scale:.1f} s", f"{cpu * scale:.1f} s", note]

    wl, cl = stages["windows"]
    b1, b2 = stages["build1"], stages["build2"]
    rows = [
        ["mocap in ../shared/data", f"{seconds / 60:.1f} min", "", f"x{scale:.1f}", "",
         f"{frames} frames at 30 fps, {len(groups)} skeletons"],
        row("BVH load only (io layer)", *stages["load"]),
        row("per-frame caches from loaded motions (FK, root, contacts, phases)", *stages["caches"], "1 process"),
        row("build_dataset, 1 process (load + caches + memmap files + norm.)", *b1),
        row("build_dataset, 2 worker processes", *b2, "CPU includes the workers"),
        row("windows for every frame, vectorised batches", wl, cl,
            f"{frames / wl:,.0f} windows/s, {width} values each (largest set)"),
        row("total: build (2 workers) + windows", b2[0] + wl, b2[1] + cl, "target < 60 s for 20 h"),
        row("total without BVH parsing: caches + windows", stages["caches"][0] + wl, stages["caches"][1] + cl,
            "AI4AnimationPy's claim also excludes conversion"),
        row("peer: per-sample loop, extrapolated to every frame", t_peer * frames, c_peer * frames,
            f"{1 / t_peer:,.0f} windows/s on {subset.size} samples"),
        ["windows: speed-up over the per-sample loop", f"{t_peer * frames / wl:,.0f}x", f"{c_peer * frames / cl:,.0f}x",
         "", "", "identical values (checked)"],
    ]
    print_table("feature windows: kinema vs a per-sample loop (scaled to 20 h of mocap)",
                ["stage", "wall", "CPU", "wall, 20 h", "CPU, 20 h", "note"], rows)
    print(f"\n1-minute load average of this 2-core machine: {load_before:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end (wall times stretch under load; CPU times less so)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
