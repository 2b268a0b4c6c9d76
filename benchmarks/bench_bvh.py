"""BVH parsing throughput (MB/s) of kinema against the PyPI readers ``bvhio`` (readAsBvh,
readAsHierarchy) and ``bvh``, on the same real files in one process (one core), plus the
time of ``kinema convert`` over the whole shared data folder.

    .venv/bin/python benchmarks/bench_bvh.py [--no-convert] [--jobs 2]

Peers (``pip install kinema[bench]``) are skipped with a note when not installed.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import cpu_time, print_table, timeit
from kinema.data import shared_root
from kinema.io import bvh
from kinema.io.bvh_parse import read

# A mix of skeleton families and sizes (about 4 MB in all).
FILES = [
    ("lafan1", "push1_subject2.bvh"),
    ("quadruped", "bvh", "D1_008_KAN01_001.bvh"),
    ("bandai_namco", "dataset-2", "dataset-2_walk_active_024.bvh"),
    ("cmu", "02_01.bvh"),
    ("cmu", "xia_styles", "neutral_01_000.bvh"),
    ("games105", "walk_and_turn_left.bvh"),
]


def _peers():
    peers = []
    try:
        import bvhio
        peers.append(("bvhio.readAsBvh", lambda p: bvhio.readAsBvh(str(p))))
        peers.append(("bvhio.readAsHierarchy", lambda p: bvhio.readAsHierarchy(str(p))))
    except ImportError:
        print("note: bvhio not installed (pip install 'kinema[bench]'); skipped")
    try:
        import bvh as bvh_pkg

        def bvh_parse(p):
            b = bvh_pkg.Bvh(Path(p).read_text())
            return b.nframes
        peers.append(("bvh.Bvh (values as strings)", bvh_parse))
    except ImportError:
        print("note: bvh not installed (pip install 'kinema[bench]'); skipped")
    return peers


def _throughput(fn, files, repeat: int) -> tuple[float, float]:
    """(median wall seconds, best CPU seconds) to read every file once."""
    run = lambda: [fn(f) for f in files]  # noqa: E731
    wall = timeit(run, repeat=repeat, warmup=1 if repeat > 1 else 0)
    return wall, cpu_time(run, repeat)


def parse_table(root: Path) -> None:
    files = [root.joinpath(*parts) for parts in FILES if root.joinpath(*parts).exists()]
    mb = sum(f.stat().st_size for f in files) / 1e6
    rows = []
    wall, cpu = _throughput(bvh.load, files, repeat=5)
    ours = mb / cpu
    rows.append(["kinema bvh.load -> Motion", mb, wall, mb / wall, ours, 1.0])
    wall, cpu = _throughput(read, files, repeat=5)
    rows.append(["kinema bvh_parse.read (arrays)", mb, wall, mb / wall, mb / cpu, ours / (mb / cpu)])
    for name, fn in _peers():
        wall, cpu = _throughput(fn, files, repeat=2)
        rows.append([name, mb, wall, mb / wall, mb / cpu, ours / (mb / cpu)])
    print_table(f"BVH parsing, {len(files)} real files, one core (ratio = kinema load speed / reader speed, "
                "by CPU time)", ["reader", "MB", "wall s", "MB/s wall", "MB/s CPU", "kinema x faster"], rows)

    every = sorted(root.rglob("*.bvh"))
    mb_all = sum(f.stat().st_size for f in every) / 1e6
    t0, c0 = time.perf_counter(), time.process_time()
    for f in every:
        bvh.load(f)
    t_all, c_all = time.perf_counter() - t0, time.process_time() - c0
    print_table("kinema bvh.load over every BVH in the shared data, one core (target >= 100 MB/s)",
                ["files", "MB", "wall s", "MB/s wall", "CPU s", "MB/s CPU"],
                [[len(every), mb_all, t_all, mb_all / t_all, c_all, mb_all / c_all]])


def convert_table(root: Path, jobs: int) -> None:
    rows = []
    times = {}
    for f in root.rglob("*"):           # warm the page cache so neither run pays for the disk
        if f.is_file():
            f.read_bytes()
    for n in (jobs, 1):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "kinema.cli", "convert", str(root), "-o", out,
                                   "--jobs", str(n), "-q"], capture_output=True, text=True)
            times[n] = time.perf_counter() - t0
            files = len(list(Path(out).rglob("*.npz")))
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        rows.append([f"kinema convert --jobs {n}", files, times[n], times[1] / times[n] if 1 in times else "",
                     status])
    rows[0][3] = times[1] / times[jobs]
    rows[1][3] = 1.0
    mb = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 1e6
    print_table(f"kinema convert of the whole shared data ({mb:.0f} MB), wall time incl. start-up "
                "(target < 60 s with 2 jobs)", ["command", "npz written", "seconds", "speed-up vs 1 job", "status"],
                rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-convert", action="store_true", help="skip the kinema convert timing")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes for the convert timing")
    args = parser.parse_args(argv)
    root = shared_root()
    if root is None:
        print("shared data folder not found (set KINEMA_DATA); nothing to measure")
        return 1
    parse_table(root)
    if not args.no_convert:
        convert_table(root, args.jobs)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
