"""A crowd of neural characters: the batched retrieval runtime against one character a step.

Every step advances B characters one frame (1/60 s): each one's scripted stick through the
batched springs (:class:`kinema.control.trajectory.TrajectoryController` with ``batch``),
the batched retrieval controller (:class:`kinema.control.retrieval.controller.RetrievalCrowd`:
one network step, one search over the characters due, searches staggered over the refresh
period) and the root adjustment. The peer, measured in the same run, is the same B
characters stepped one by one with the single-character controller (B = 1 is the cost of
one character). ``per char`` is the step time divided by B; ``vs B=1`` is the per-character
cost of B=1 over that of B. Wall time is disturbed by other programs on a shared machine,
process CPU time (``cpu``) far less; the load average is printed with the table.

    .venv/bin/python benchmarks/bench_crowd.py [--checkpoint models/retrieval_lafan1.safetensors]
        [--db DB.npz | --cache DIR] [--batch 1,16,64,256] [--steps 120] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import print_table  # noqa: E402
from kinema.control.retrieval.controller import RetrievalController, RetrievalCrowd  # noqa: E402
from kinema.control.retrieval.evaluate import cached_database, open_database  # noqa: E402
from kinema.nn.checkpoint import read_metadata  # noqa: E402

ROOT = HERE.parent


def sticks(frame: int, angles: np.ndarray) -> np.ndarray:
    """Scripted sticks (B, 2) at ``frame``: each character turns slowly from its own angle
    with a varying push (realistic requests: queries near the data, not noise)."""
    a = angles + 0.01 * frame
    push = 0.5 + 0.5 * np.sin(0.02 * frame + angles)
    return np.stack([np.cos(a), np.sin(a)], -1) * push[:, None]


def crowd_steps(ckpt: Path, db, b: int, steps: int) -> tuple[float, float]:
    """(wall, cpu) seconds per crowd step of ``b`` characters (after a 60-frame warm-up)."""
    rng = np.random.default_rng(0)
    crowd = RetrievalCrowd(ckpt, db, b, start_row=rng.integers(0, db.rows - 200, b), phase=np.arange(b) % 6)
    angles = rng.uniform(-np.pi, np.pi, b)
    walk = np.zeros(b, bool)

    def frame(f: int) -> None:
        crowd.drive(sticks(f, angles), 1 / 60, walk=walk)
    return _time(frame, steps)


def single_steps(ckpt: Path, db, b: int, steps: int) -> tuple[float, float]:
    """(wall, cpu) seconds per step of ``b`` single controllers stepped one by one."""
    rng = np.random.default_rng(0)
    rows = rng.integers(0, db.rows - 200, b)
    ctls = [RetrievalController(ckpt, db, start_row=int(r), phase=i % 6) for i, r in enumerate(rows)]
    angles = rng.uniform(-np.pi, np.pi, b)

    def frame(f: int) -> None:
        s = sticks(f, angles)
        for i, ctl in enumerate(ctls):
            ctl.drive(s[i], 1 / 60)
    return _time(frame, steps)


def _time(frame, steps: int) -> tuple[float, float]:
    for f in range(60):
        frame(f)
    w, c = time.perf_counter(), time.process_time()
    for f in range(steps):
        frame(60 + f)
    return (time.perf_counter() - w) / steps, (time.process_time() - c) / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "models/retrieval_lafan1.safetensors")
    parser.add_argument("--db", type=Path, default=None, help="its database (.npz); default: the cached rebuild")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kinema",
                        help="where the checkpoint's rebuilt database is cached")
    parser.add_argument("--batch", default="1,16,64,256")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: a second thread only adds synchronisation on a busy machine)")
    parser.add_argument("--singles-up-to", type=int, default=16, help="largest B also stepped one by one")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    meta = read_metadata(args.checkpoint)
    db = open_database(args.db, meta) if args.db else cached_database(args.checkpoint, args.cache)
    db.search(db.features[:1], k=4)   # build the index and compile the search before timing
    rows, base = [], None
    for b in (int(x) for x in args.batch.split(",")):
        wall, cpu = crowd_steps(args.checkpoint, db, b, args.steps)
        if base is None:
            base = (wall / b, cpu / b)
        one = single_steps(args.checkpoint, db, b, max(args.steps // b, 12)) if 1 < b <= args.singles_up_to else None
        rows.append([b, wall * 1e3, cpu * 1e3, 1.0 / wall, wall / b * 1e6, cpu / b * 1e6, base[0] / (wall / b),
                     base[1] / (cpu / b), "-" if one is None else one[0] * 1e3, "-" if one is None else one[0] / wall])
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} on "
          f"{os.cpu_count()} cores; torch threads {torch.get_num_threads()}; {args.checkpoint.name}, "
          f"database {db.fingerprint} ({db.rows} rows)")
    print_table("crowd step: B characters one frame (springs + retrieval controller + root adjustment)",
                ["B", "ms/step", "cpu ms/step", "steps/s", "µs/char", "cpu µs/char", "vs B=1", "cpu vs B=1",
                 "one by one ms", "batch speed-up"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
