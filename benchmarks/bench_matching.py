"""Exact top-4 motion-matching search: kinema's SearchIndex vs scipy's cKDTree and NumPy
brute force, side by side, on real features.

Databases: every biped clip of ../shared/data with a preset (LaFAN1 and both Bandai-Namco
datasets), resampled to 60 Hz with mirroring (about 370k rows x 27 features), and a
1,000,000-row version of it: the same clips resampled densely enough (about 160 Hz, the
trajectory samples kept at 1/3, 2/3 and 1 s). Queries are database rows plus Gaussian
noise (sigma 0.1 per normalised dimension), like runtime queries near the data.

Reported: median time of one query (``search(q)``), time per query of a 1000-query batch,
the same with Motion-Matching's exclusions (+-20 frames around the current row, the last
20 rows of every clip; cKDTree has no exclusions, brute force applies them), ratios, the
build times (database and index) and memory. Results are checked to be exact (costs equal
to the peers') in the same run.

    .venv/bin/python benchmarks/bench_matching.py [--no-1m] [--repeat R]
"""
from __future__ import annotations

import os

# One BLAS thread: every method runs on one core (cKDTree and kinema do), and OpenBLAS
# threads spin badly on a shared, oversubscribed machine. Effective when NumPy is not yet
# imported (running this file directly).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import itertools  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402

from common import print_table, timeit  # noqa: E402

from kinema.data import shared_root  # noqa: E402
from kinema.matching.config import DatabaseConfig  # noqa: E402
from kinema.matching.database import build_from_paths  # noqa: E402
from kinema.matching.search import Exclusion, SearchIndex, brute_force  # noqa: E402

NOISE = 0.1


def _config(preset: str, fps: float) -> DatabaseConfig:
    frames = [int(round(fps * t)) for t in (1 / 3, 2 / 3, 1.0)]
    return DatabaseConfig.from_dict({"base": preset, "fps": fps, "trajectory_frames": frames})


def build_biped(fps: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """Features (N, 27) and clip ranges of all preset bipeds at ``fps`` with mirroring."""
    root = shared_root()
    parts = [("lafan1", [root / "lafan1"]), ("bandai", [root / "bandai_namco"])]
    feats, ranges, info, offset = [], [], {}, 0
    t0 = time.perf_counter()
    for preset, paths in parts:
        db = build_from_paths(paths, _config(preset, fps), mirror=True, progress=False)
        feats.append(db.features)
        ranges.append(db.ranges + offset)
        offset += db.rows
        info[preset] = db.rows
        del db
    info["build_s"] = time.perf_counter() - t0
    return np.concatenate(feats), np.concatenate(ranges), info


def numpy_brute(features: np.ndarray, q: np.ndarray, k: int = 4) -> np.ndarray:
    """The plain NumPy peer: every squared distance, then the k smallest."""
    d = ((features - q) ** 2).sum(axis=1)
    idx = np.argpartition(d, k)[:k]
    return idx[np.argsort(d[idx])]


def numpy_brute_blas(features: np.ndarray, norms: np.ndarray, queries: np.ndarray, k: int = 4) -> np.ndarray:
    """Batched NumPy peer with BLAS: |f|^2 - 2 f.q + |q|^2 in chunks (approximate costs)."""
    out = []
    for s in range(0, len(queries), 64):
        q = queries[s:s + 64]
        d = norms[None] - 2.0 * (q @ features.T)
        idx = np.argpartition(d, k, axis=1)[:, :k]
        out.append(np.take_along_axis(idx, np.argsort(np.take_along_axis(d, idx, 1), 1), 1))
    return np.concatenate(out)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def bench(name: str, feats: np.ndarray, ranges: np.ndarray, info: dict, repeat: int, rows: list) -> None:
    n = len(feats)
    rng = np.random.default_rng(0)
    src = rng.integers(0, n, 1300)
    queries = (feats[src] + rng.normal(0, NOISE, (len(src), feats.shape[1]))).astype(np.float32)
    single, batch = queries[:300], queries[300:]
    bsrc = src[300:]

    m0 = _rss_mb()
    t0 = time.perf_counter()
    index = SearchIndex(feats, ranges)
    t_index = time.perf_counter() - t0
    m1 = _rss_mb()
    t0 = time.perf_counter()
    tree = cKDTree(feats)
    t_tree = time.perf_counter() - t0
    m2 = _rss_mb()

    # exactness in this run: costs equal to cKDTree's (squared) and to brute force's
    ours_i, ours_c = index.search(batch, k=4)
    kd_d, kd_i = tree.query(batch, k=4)
    assert np.allclose(ours_c, kd_d.astype(np.float64) ** 2, rtol=1e-4, atol=1e-6), "differs from cKDTree"
    ex = Exclusion(current=bsrc[:20], around=20, clip_end=20)
    assert np.array_equal(index.search(batch[:20], 4, ex)[0], brute_force(feats, batch[:20], 4, ex, ranges)[0])

    def cycle(qs):
        it = itertools.cycle(range(len(qs)))
        return lambda: qs[next(it)]

    nxt = cycle(single)
    t_ours = timeit(lambda: index.search(nxt(), k=4), repeat=repeat, warmup=5)
    nxt = cycle(single)
    t_kd = timeit(lambda: tree.query(nxt(), k=4), repeat=repeat, warmup=5)
    nxt = cycle(single)
    t_brute = timeit(lambda: numpy_brute(feats, nxt()), repeat=max(7, repeat // 20), warmup=1)
    it = itertools.cycle(range(len(single)))

    def ours_ex():
        i = next(it)
        return index.search(single[i], 4, Exclusion(current=int(src[i]), around=20, clip_end=20))

    def brute_ex():
        i = next(it)
        return brute_force(feats, single[i], 4, Exclusion(current=int(src[i]), around=20, clip_end=20), ranges)
    t_ours_ex = timeit(ours_ex, repeat=repeat, warmup=5)
    t_brute_ex = timeit(brute_ex, repeat=max(7, repeat // 20), warmup=1)

    nb = len(batch)
    tb_ours = timeit(lambda: index.search(batch, k=4), repeat=3) / nb
    tb_kd = timeit(lambda: tree.query(batch, k=4, workers=1), repeat=3) / nb
    norms = (feats.astype(np.float32) ** 2).sum(1)
    tb_blas = timeit(lambda: numpy_brute_blas(feats, norms, batch[:256]), repeat=3) / 256
    exb = Exclusion(current=bsrc, around=20, clip_end=20)
    tb_ours_ex = timeit(lambda: index.search(batch, 4, exb), repeat=3) / nb

    us = 1e6
    rows += [
        [name, n, "kinema SearchIndex", t_ours * us, tb_ours * us, t_kd / t_ours, t_brute / t_ours, tb_kd / tb_ours],
        [name, n, "scipy cKDTree", t_kd * us, tb_kd * us, 1.0, t_brute / t_kd, 1.0],
        [name, n, "NumPy brute force", t_brute * us, tb_blas * us, t_kd / t_brute, 1.0, tb_kd / tb_blas],
        [name, n, "kinema + MM exclusions", t_ours_ex * us, tb_ours_ex * us, "-", t_brute_ex / t_ours_ex, "-"],
        [name, n, "brute force + MM exclusions", t_brute_ex * us, "-", "-", 1.0, "-"],
    ]
    print(f"{name}: {n} rows; database build {info['build_s']:.1f} s ({info}); index build {t_index:.2f} s "
          f"(+{m1 - m0:.0f} MB RSS, {index.nbytes / 2**20:.0f} MB arrays); cKDTree build {t_tree:.2f} s "
          f"(+{m2 - m1:.0f} MB RSS); features {feats.nbytes / 2**20:.0f} MB; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MB", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-1m", action="store_true", help="skip the 1,000,000-row database")
    parser.add_argument("--repeat", type=int, default=300, help="single queries timed per method")
    args = parser.parse_args(argv)
    if shared_root() is None:
        print("bench_matching: ../shared/data not found (set KINEMA_DATA); skipped")
        return 0
    rows: list = []
    feats, ranges, info = build_biped(60.0)
    bench("bipeds 60 Hz + mirror", feats, ranges, info, args.repeat, rows)
    if not args.no_1m:
        fps = 60.0 * 1_000_000 / len(feats)
        del feats, ranges
        feats, ranges, info = build_biped(fps)
        bench(f"same at {fps:.0f} Hz", feats, ranges, info, args.repeat, rows)
    print_table("exact top-4 search (single: median per query; batched: 1000 queries, per query; "
                "ratios are speed-ups of the row's method)",
                ["database", "rows", "method", "single us", "batched us/query", "x vs cKDTree single",
                 "x vs brute single", "x vs cKDTree batched"], rows)
    print("\nBatched brute force uses BLAS (|f|^2 - 2 f.q), single brute force the plain difference of "
          "squares; cKDTree batched runs with workers=1 (one core, like kinema).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
