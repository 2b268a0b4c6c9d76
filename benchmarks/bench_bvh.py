"""BVH parsing throughput (MB/s) of kinema against the PyPI readers ``bvhio`` (readAsBvh,
readAsHierarchy) and ``bvh``, on the same real files in one process (one core), plus the
time of ``kinema convert`` over the whole shared data folder.

A second table times ``bvh.load`` + forward kinematics on each LaFAN1 take and on a small
file against ``np.loadtxt`` of the same MOTION bytes (what reading the numbers costs with
NumPy) and kinema's own reading of them (the fixed cost is the rest of load + FK), and,
when the environment variable ``AI4ANIMATIONPY`` names a checkout of AI4AnimationPy (its
root, holding ``ai4animation/``), against its BVH importer (``BVH(path).LoadMotion()``,
world matrices). Its package ``__init__`` imports torch, sklearn and raylib, so only its
``ai4animation`` folder is put on the import path as a bare package; nothing of it is
copied here.

    .venv/bin/python benchmarks/bench_bvh.py [--no-convert] [--jobs 2] [--only-floor]

Peers (``pip install kinema[bench]``) are skipped with a note when not installed.
"""
from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

from common import cpu_time, print_table, timeit
from kinema.data import shared_root
from kinema.io import bvh
from kinema.io.bvh_parse import _read_plain, read
from kinema.motion import kinematics

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


def _motion_bytes(path: Path) -> bytes:
    """The MOTION values of a BVH file: the bytes after its "Frame Time" line."""
    raw = path.read_bytes()
    at = raw.index(b"Frame Time", raw.index(b"MOTION"))
    return raw[raw.index(b"\n", at) + 1:]


def _loadtxt(block: bytes):
    return np.loadtxt(io.BytesIO(block), dtype=np.float64, comments=None, ndmin=2, encoding="latin-1")


def _values(block: bytes, shape: tuple[int, int]):
    """kinema's reading of the MOTION values alone: the compiled reader, else np.loadtxt."""
    values = _read_plain(block, 0, *shape)
    return _loadtxt(block) if values is None else values


def _load_fk(path: Path):
    m = bvh.load(path)
    return kinematics.forward(m.rotations, m.positions, m.parents)


def _ai4animation():
    """AI4AnimationPy's BVH import + FK, from the checkout $AI4ANIMATIONPY, or None (noted)."""
    checkout = os.environ.get("AI4ANIMATIONPY")
    if not checkout or not (Path(checkout) / "ai4animation" / "Import" / "BVHImporter.py").exists():
        print("note: AI4ANIMATIONPY does not name an AI4AnimationPy checkout; its importer is skipped")
        return None
    if "ai4animation" not in sys.modules:       # a bare package: its __init__ needs torch, sklearn, raylib
        pkg = types.ModuleType("ai4animation")
        pkg.__path__ = [str(Path(checkout) / "ai4animation")]
        sys.modules["ai4animation"] = pkg
    try:
        from ai4animation.Import.BVHImporter import BVH
    except ImportError as exc:
        print(f"note: AI4AnimationPy's BVH importer does not import here ({exc}); skipped")
        return None
    return lambda p: BVH(str(p), scale=0.01).LoadMotion()


def floor_table(root: Path, repeat: int = 7) -> None:
    """load + FK against np.loadtxt on the same bytes (and AI4AnimationPy), CPU time."""
    files = sorted((root / "lafan1").glob("*.bvh")) + [root / "games105" / "run_forward.bvh"]
    files = [f for f in files if f.exists()]
    peer = _ai4animation()
    rows = []
    for f in files:
        block = _motion_bytes(f)
        shape = read(f).values.shape
        t_txt, t_val, t_ours = [], [], []
        for _ in range(repeat):                 # alternated, best of each: the one-core cost
            t_txt.append(cpu_time(lambda: _loadtxt(block), 1))
            t_val.append(cpu_time(lambda: _values(block, shape), 1))
            t_ours.append(cpu_time(lambda: _load_fk(f), 1))
        txt, val, ours = min(t_txt[1:]), min(t_val[1:]), min(t_ours[1:])
        row = [f.name, f.stat().st_size / 1e6, txt * 1e3, val * 1e3, ours * 1e3, ours / txt, (ours - val) * 1e3]
        if peer is not None:
            t_peer = cpu_time(lambda: peer(f), 2 if f.stat().st_size > 1e6 else 5)
            row += [t_peer * 1e3, t_peer / ours]
        else:
            row += ["-", "-"]
        rows.append(row)
    print_table("BVH load + forward kinematics against np.loadtxt of the same MOTION bytes, one core, CPU time "
                "(best of alternated runs; targets: kinema / loadtxt <= 1.3 on LaFAN1, a small file's fixed "
                "cost (kinema load+FK - kinema's reading of the values) < 0.3 ms)",
                ["file", "MB", "np.loadtxt ms", "kinema values ms", "kinema load+FK ms", "kinema / loadtxt",
                 "fixed cost ms", "AI4AnimationPy ms", "AI4AnimationPy / kinema"], rows)


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
    parser.add_argument("--only-floor", action="store_true", help="only the load + FK vs np.loadtxt table")
    args = parser.parse_args(argv)
    root = shared_root()
    if root is None:
        print("shared data folder not found (set KINEMA_DATA); nothing to measure")
        return 1
    floor_table(root)
    if args.only_floor:
        return 0
    parse_table(root)
    if not args.no_convert:
        convert_table(root, args.jobs)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
