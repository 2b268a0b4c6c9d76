"""Exact top-4 motion-matching search: kinema's SearchIndex vs scipy's cKDTree and NumPy
brute force (and faiss / hnswlib when installed), side by side, on real features.

Databases: LaFAN1 (the 7 original takes) and Bandai-Namco datasets 1 and 2, resampled to
60 Hz with mirroring (369,732 rows x 27 features), and a ~4,000,000-row version of it: the
same clips resampled densely enough (about 650 Hz, the trajectory samples kept at 1/3,
2/3 and 1 s). Queries are held-out motion, as a controller's are: every tenth clip and its
mirror twin are left out of the index and their rows are the queries (the index and every
peer hold the other rows).

Reported: index build time (kinema and cKDTree on the same rows, process CPU time,
median of 3 alternating builds), time of one query (``search(q)``, one call per query,
timed over passes through 300 queries, median pass), time per query
of a 1000-query batch, the same with Motion-Matching's exclusions (+-20 frames around the
current row, taken as the query's nearest indexed row, and the last 20 rows of every
clip; cKDTree has no exclusions, brute force applies them), ratios and memory; and the
fixed cost of one ``search(q)`` (on a 64-row index: nearly all Python, dispatch and setup).
Results are checked to be exact (equal to brute force, costs equal to cKDTree's) in the
same run. Every time is taken both as wall time and as process CPU time (the same calls);
ratios use CPU time, which a loaded machine distorts less.

Peers. Single query: ``numpy_brute`` (every squared difference summed, argpartition) and,
for reference, ``numpy_brute_gemv`` (|f|^2 - 2 f.q, one matrix-vector product); with
exclusions the module's own ``brute_force`` (one cost kernel, rules over every row).
Batched: ``numpy_brute_blas`` (|f|^2 - 2 Q F^T in chunks of 64, one GEMM per chunk) and
``numpy_brute_blas_ex`` (the same with excluded rows set to inf). faiss ``IndexFlatL2``
(exact) and hnswlib (approximate: its recall is printed) only if importable; the project
does not depend on them.

A second table runs the batches on ``--threads`` threads (default 2): kinema's
``search(..., threads=T)``, cKDTree with ``workers=T`` and the BLAS brute force split over T
Python threads (one BLAS thread each; NumPy releases the GIL in GEMM and argpartition), so
every method gets the same threads. Those ratios use wall time (process CPU time adds the
threads up); the one-core table above is the headline.

    .venv/bin/python benchmarks/bench_matching.py [--no-4m] [--repeat R] [--threads T]
"""
from __future__ import annotations

import os

# One BLAS thread: every method runs on one core (cKDTree and kinema do), and OpenBLAS
# threads spin badly on a shared, oversubscribed machine. Effective when NumPy is not yet
# imported (running this file directly).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import itertools  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402

from common import print_table, timeit  # noqa: E402
from kinema.data import shared_root  # noqa: E402
from kinema.matching.config import DatabaseConfig  # noqa: E402
from kinema.matching.database import build_from_paths  # noqa: E402
from kinema.matching.search import Exclusion, SearchIndex, brute_force  # noqa: E402


def _config(preset: str, fps: float) -> DatabaseConfig:
    frames = [int(round(fps * t)) for t in (1 / 3, 2 / 3, 1.0)]
    return DatabaseConfig.from_dict({"base": preset, "fps": fps, "trajectory_frames": frames})


def build_biped(fps: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """Features (N, 27) and clip ranges of LaFAN1 and Bandai-Namco 1 + 2 at ``fps`` with
    mirroring (each clip followed by its mirror twin)."""
    root = shared_root()
    bandai = root / "bandai_namco"
    # the 369,732-row set: dataset-2-styles (added to the data later) stays out
    parts = [("lafan1", [root / "lafan1"]), ("bandai", [bandai / "dataset-1", bandai / "dataset-2"])]
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


def hold_out(feats: np.ndarray, ranges: np.ndarray, every: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split off every ``every``-th clip pair (a clip and its mirror twin): (index features,
    index clip ranges, held-out rows)."""
    pair = np.arange(len(ranges)) // 2
    held = pair % every == 0
    lengths = ranges[:, 1] - ranges[:, 0]
    row_held = np.repeat(held, lengths)
    keep = ~held
    stops = np.cumsum(lengths[keep])
    index_ranges = np.stack([stops - lengths[keep], stops], axis=1)
    return np.ascontiguousarray(feats[~row_held]), index_ranges, feats[row_held]


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


def numpy_brute_gemv(features: np.ndarray, norms: np.ndarray, q: np.ndarray, k: int = 4) -> np.ndarray:
    """Single-query peer with BLAS: |f|^2 - 2 f.q (approximate costs), k smallest."""
    d = norms - 2.0 * (features @ q)
    idx = np.argpartition(d, k)[:k]
    return idx[np.argsort(d[idx])]


def numpy_brute_blas_ex(features: np.ndarray, norms_ok: np.ndarray, queries: np.ndarray, current: np.ndarray,
                        around: int, ranges: np.ndarray, clip_of_row: np.ndarray, k: int = 4) -> np.ndarray:
    """Batched BLAS peer with Motion-Matching exclusions: ``norms_ok`` is |f|^2 with inf at
    rows never allowed (clip ends); each query's +-around window in its clip is set to inf."""
    out = []
    for s in range(0, len(queries), 64):
        q = queries[s:s + 64]
        d = norms_ok[None] - 2.0 * (q @ features.T)
        for i, cur in enumerate(current[s:s + 64]):
            start, stop = ranges[clip_of_row[cur]]
            d[i, max(cur - around, start):min(cur + around + 1, stop)] = np.inf
        idx = np.argpartition(d, k, axis=1)[:, :k]
        out.append(np.take_along_axis(idx, np.argsort(np.take_along_axis(d, idx, 1), 1), 1))
    return np.concatenate(out)


def split_blas(features: np.ndarray, norms: np.ndarray, queries: np.ndarray, pool: ThreadPoolExecutor,
               threads: int) -> np.ndarray:
    """:func:`numpy_brute_blas` with the queries split over ``threads`` threads."""
    parts = np.array_split(queries, threads)
    return np.concatenate(list(pool.map(lambda part: numpy_brute_blas(features, norms, part), parts)))


def timed(fn, repeat: int, warmup: int = 1) -> tuple[float, float]:
    """(median wall time, median process CPU time) of ``fn()`` in seconds, same calls."""
    cpu: list[float] = []

    def wrapped():
        t0 = time.process_time()
        fn()
        cpu.append(time.process_time() - t0)
    wall = timeit(wrapped, repeat=repeat, warmup=warmup)
    return wall, statistics.median(cpu[warmup:])


def per_query(fn, queries: np.ndarray, passes: int) -> tuple[float, float]:
    """(median wall, median CPU) seconds per call of ``fn(q)``, timed over whole passes
    through ``queries`` (a clock read per call would add about a microsecond to each)."""
    def run():
        for q in queries:
            fn(q)
    wall, cpu = timed(run, repeat=passes, warmup=1)
    return wall / len(queries), cpu / len(queries)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def build_times(feats: np.ndarray, ranges: np.ndarray, repeat: int = 3) -> tuple[SearchIndex, object, float, float,
                                                                                   float]:
    """Both indexes on the same rows, built alternately ``repeat`` times: (kinema index,
    cKDTree, median kinema CPU seconds, median cKDTree CPU seconds, MB of RSS the first
    kinema build added)."""
    t_ours, t_kd = [], []
    m0 = _rss_mb()
    index = tree = None
    for r in range(repeat):
        del index, tree
        t0 = time.process_time()
        index = SearchIndex(feats, ranges)
        t_ours.append(time.process_time() - t0)
        if r == 0:
            grew = _rss_mb() - m0
        t0 = time.process_time()
        tree = cKDTree(feats)
        t_kd.append(time.process_time() - t0)
    return index, tree, statistics.median(t_ours), statistics.median(t_kd), grew


def fixed_cost(repeat: int) -> tuple[float, float]:
    """CPU time (s) of one ``search(q)`` on a 64-row index (the per-call cost: Python,
    dispatch, setup; the search itself is a few leaves) and of cKDTree's query there."""
    rng = np.random.default_rng(1)
    f = rng.normal(size=(64, 27)).astype(np.float32)
    index, tree = SearchIndex(f), cKDTree(f)
    q = f[7] + 0.01
    n = 2000

    def loop(fn):
        def run():
            for _ in range(n):
                fn()
        return timed(run, repeat=max(5, repeat // 30))[1] / n
    return loop(lambda: index.search(q, k=4)), loop(lambda: tree.query(q, k=4))


def optional_peers(feats: np.ndarray, single: np.ndarray, ref: np.ndarray, repeat: int) -> list:
    """faiss IndexFlatL2 (exact) and hnswlib (approximate, with its recall of the exact
    top-4) single-query rows, for whichever is importable; a note otherwise."""
    out = []
    for name in ("faiss", "hnswlib"):
        if importlib.util.find_spec(name) is None:
            print(f"{name} not installed: its rows are skipped", flush=True)
            continue
        mod = importlib.import_module(name)
        if name == "faiss":
            mod.omp_set_num_threads(1)
            idx = mod.IndexFlatL2(feats.shape[1])
            idx.add(feats)
            search = lambda q: idx.search(q[None], 4)[1][0]  # noqa: E731
            label = "faiss IndexFlatL2"
        else:
            idx = mod.Index(space="l2", dim=feats.shape[1])
            idx.init_index(max_elements=len(feats), ef_construction=100, M=16)
            idx.set_num_threads(1)
            idx.add_items(feats)
            idx.set_ef(64)
            search = lambda q: idx.knn_query(q[None], k=4)[0][0]  # noqa: E731
            label = "hnswlib (approximate, ef 64)"
        got = np.stack([search(q) for q in single])
        recall = np.mean([len(set(g.tolist()) & set(r.tolist())) / 4 for g, r in zip(got, ref)])
        t = per_query(search, single, max(3, repeat // 60))
        out.append((f"{label}, recall {recall:.3f}", t))
    return out


def bench(name: str, all_feats: np.ndarray, all_ranges: np.ndarray, info: dict, repeat: int, rows: list,
          threads: int, mc_rows: list, build_rows: list) -> None:
    feats, ranges, held = hold_out(all_feats, all_ranges)
    n = len(feats)
    rng = np.random.default_rng(0)
    queries = np.ascontiguousarray(held[rng.choice(len(held), 1300, replace=False)])
    single, batch = queries[:300], queries[300:]

    index, tree, t_index, t_tree, grew = build_times(feats, ranges)
    build_rows.append([name, n, t_index, t_tree, t_index / t_tree, grew, index.nbytes / 2**20])
    # the frame "playing now" for the exclusion runs: each query's nearest indexed row
    src = index.search(queries, k=1)[0][:, 0]
    bsrc = src[300:]

    # exactness in this run: costs equal to cKDTree's (squared) and to brute force's
    ours_i, ours_c = index.search(batch, k=4)
    kd_d, kd_i = tree.query(batch, k=4)
    assert np.allclose(ours_c, kd_d.astype(np.float64) ** 2, rtol=1e-4, atol=1e-6), "differs from cKDTree"
    for ex in (None, Exclusion(current=bsrc[:20], around=20, clip_end=20)):
        got, want = index.search(batch[:20], 4, ex), brute_force(feats, batch[:20], 4, ex, ranges)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), "differs from brute force"

    def cycle(qs):
        it = itertools.cycle(range(len(qs)))
        return lambda: qs[next(it)]

    passes = max(3, repeat // 60)
    t_ours = per_query(lambda q: index.search(q, k=4), single, passes)
    t_kd = per_query(lambda q: tree.query(q, k=4), single, passes)
    few = max(7, repeat // 20)
    nxt = cycle(single)
    t_brute = timed(lambda: numpy_brute(feats, nxt()), repeat=few)
    norms = (feats.astype(np.float32) ** 2).sum(1)
    nxt = cycle(single)
    t_gemv = timed(lambda: numpy_brute_gemv(feats, norms, nxt()), repeat=few)
    it = itertools.cycle(range(len(single)))

    def ours_ex():
        for i in range(len(single)):
            index.search(single[i], 4, Exclusion(current=int(src[i]), around=20, clip_end=20))

    def brute_ex():
        i = next(it)
        return brute_force(feats, single[i], 4, Exclusion(current=int(src[i]), around=20, clip_end=20), ranges)
    t_ours_ex = tuple(t / len(single) for t in timed(ours_ex, repeat=passes))
    t_brute_ex = timed(brute_ex, repeat=few)

    nb, nbb = len(batch), 256
    per = np.array([nb, nb])
    tb_ours = np.array(timed(lambda: index.search(batch, k=4), repeat=3)) / per
    tb_kd = np.array(timed(lambda: tree.query(batch, k=4, workers=1), repeat=3)) / per
    tb_blas = np.array(timed(lambda: numpy_brute_blas(feats, norms, batch[:nbb]), repeat=3)) / nbb
    exb = Exclusion(current=bsrc, around=20, clip_end=20)
    tb_ours_ex = np.array(timed(lambda: index.search(batch, 4, exb), repeat=3)) / per
    clip_of_row = np.repeat(np.arange(len(ranges)), ranges[:, 1] - ranges[:, 0])
    norms_ok = np.where(np.arange(n) >= ranges[clip_of_row, 1] - 20, np.inf, norms).astype(np.float32)
    ref = numpy_brute_blas_ex(feats, norms_ok, batch[:20], bsrc[:20], 20, ranges, clip_of_row)
    ours = index.search(batch[:20], 4, Exclusion(current=bsrc[:20], around=20, clip_end=20))[1]
    got = ((feats[ref] - batch[:20, None]) ** 2).sum(-1)
    assert np.allclose(np.sort(got, 1), ours, rtol=1e-3, atol=1e-5), "batched brute force with exclusions differs"
    tb_blas_ex = np.array(timed(lambda: numpy_brute_blas_ex(feats, norms_ok, batch[:nbb], bsrc[:nbb], 20, ranges,
                                                         clip_of_row), repeat=3)) / nbb

    # the same batches on `threads` threads for every method (wall time)
    with ThreadPoolExecutor(threads) as pool:
        assert np.array_equal(index.search(batch, k=4, threads=threads)[0], ours_i)
        tm_ours = timed(lambda: index.search(batch, k=4, threads=threads), repeat=3)[0] / nb
        tm_kd = timed(lambda: tree.query(batch, k=4, workers=threads), repeat=3)[0] / nb
        tm_blas = timed(lambda: split_blas(feats, norms, batch[:nbb], pool, threads), repeat=3)[0] / nbb
    mc_rows += [
        [name, n, f"kinema SearchIndex, {threads} threads", tm_ours * 1e6, tm_kd / tm_ours, tm_blas / tm_ours],
        [name, n, f"scipy cKDTree, workers={threads}", tm_kd * 1e6, 1.0, tm_blas / tm_kd],
        [name, n, f"NumPy brute force BLAS, {threads} threads", tm_blas * 1e6, tm_kd / tm_blas, 1.0],
    ]

    us = 1e6
    c = 1  # ratios from CPU time
    rows += [
        [name, n, "kinema SearchIndex", t_ours[0] * us, t_ours[1] * us, tb_ours[0] * us, tb_ours[1] * us,
         t_kd[c] / t_ours[c], t_brute[c] / t_ours[c], tb_kd[c] / tb_ours[c], tb_blas[c] / tb_ours[c]],
        [name, n, "scipy cKDTree", t_kd[0] * us, t_kd[1] * us, tb_kd[0] * us, tb_kd[1] * us,
         1.0, t_brute[c] / t_kd[c], 1.0, tb_blas[c] / tb_kd[c]],
        [name, n, "NumPy brute force", t_brute[0] * us, t_brute[1] * us, tb_blas[0] * us, tb_blas[1] * us,
         t_kd[c] / t_brute[c], 1.0, tb_kd[c] / tb_blas[c], 1.0],
        [name, n, "NumPy brute force, gemv", t_gemv[0] * us, t_gemv[1] * us, "-", "-",
         t_kd[c] / t_gemv[c], t_brute[c] / t_gemv[c], "-", "-"],
        [name, n, "kinema + MM exclusions", t_ours_ex[0] * us, t_ours_ex[1] * us, tb_ours_ex[0] * us,
         tb_ours_ex[1] * us, "-", t_brute_ex[c] / t_ours_ex[c], "-", tb_blas_ex[c] / tb_ours_ex[c]],
        [name, n, "brute force + MM exclusions", t_brute_ex[0] * us, t_brute_ex[1] * us, tb_blas_ex[0] * us,
         tb_blas_ex[1] * us, "-", 1.0, "-", 1.0],
    ]
    for label, t in optional_peers(feats, single, index.search(single, k=4)[0], repeat):
        rows.append([name, n, label, t[0] * us, t[1] * us, "-", "-", t_kd[c] / t[c], t_brute[c] / t[c], "-", "-"])
    print(f"{name}: {n} indexed rows, {len(held)} held out; database build {info['build_s']:.1f} s ({info}); "
          f"index build {t_index:.2f} s CPU (+{grew:.0f} MB RSS, {index.nbytes / 2**20:.0f} MB arrays), cKDTree "
          f"{t_tree:.2f} s; features {feats.nbytes / 2**20:.0f} MB; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MB", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-4m", action="store_true", help="skip the ~4,000,000-row database")
    parser.add_argument("--repeat", type=int, default=300, help="single queries timed per method")
    parser.add_argument("--threads", type=int, default=2, help="threads per method in the multi-core table")
    args = parser.parse_args(argv)
    if shared_root() is None:
        print("bench_matching: ../shared/data not found (set KINEMA_DATA); skipped")
        return 0
    rows: list = []
    mc_rows: list = []
    build_rows: list = []
    fixed = fixed_cost(args.repeat)
    feats, ranges, info = build_biped(60.0)
    bench("bipeds 60 Hz + mirror", feats, ranges, info, args.repeat, rows, args.threads, mc_rows, build_rows)
    if not args.no_4m:
        fps = round(60.0 * 4_000_000 / len(feats))
        del feats, ranges
        feats, ranges, info = build_biped(fps)
        bench(f"same at {fps:.0f} Hz", feats, ranges, info, args.repeat, rows, args.threads, mc_rows, build_rows)
    print_table("index build on the same rows (process CPU time, median of 3 alternating builds)",
                ["database", "rows", "kinema s", "cKDTree s", "kinema / cKDTree", "kinema +MB RSS",
                 "kinema MB arrays"], build_rows)
    print(f"\nfixed cost of one search(q) (64-row index, CPU): kinema {fixed[0] * 1e6:.2f} us, "
          f"cKDTree.query {fixed[1] * 1e6:.2f} us")
    print_table("exact top-4 search, held-out queries (single: per query, median of passes through 300 queries; "
                "batched: 1000 queries (brute force 256), per query; ratios: speed-ups of the row's method in "
                "process CPU time)",
                ["database", "rows", "method", "single us wall", "single us CPU", "batched us/q wall",
                 "batched us/q CPU", "x vs cKDTree single", "x vs brute single", "x vs cKDTree batched",
                 "x vs brute batched"], rows)
    print_table(f"batched exact top-4 on {args.threads} threads per method (1000 queries (brute force 256), wall "
                "time per query; ratios: speed-ups of the row's method in wall time)",
                ["database", "rows", "method", "batched us/q wall", "x vs cKDTree", "x vs brute force"], mc_rows)
    print("\nBatched brute force uses BLAS (|f|^2 - 2 Q F^T, chunks of 64), single brute force the plain "
          "difference of squares (the gemv row: |f|^2 - 2 F q); with exclusions, single: the module's "
          "brute_force, batched: BLAS with excluded rows set to inf. cKDTree batched runs with workers=1 "
          "(one core, like kinema). Brute force with exclusions is the peer for the exclusion rows.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
