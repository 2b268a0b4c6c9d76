"""The motion-matching controller's step with its rigid rebuild against the same step
without it (the peer, measured in the same run): what drawing every bone at its rest length
costs (:meth:`kinema.control.matching.MotionMatchingController._rigid`, session 32).

B characters on the LaFAN1 recipe's database, each on a stick that reverses every second
(so searches transition often and the rebuild runs), 300 steps after 30 of warm-up; wall and
process CPU time per step. The peer replaces the rebuild by the identity on the same
controller class, so everything else is the same code.

    .venv/bin/python benchmarks/bench_matching_step.py [--batch 1,16,256] [--steps 300]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import print_table  # noqa: E402
from kinema.control import matching  # noqa: E402
from kinema.control.retrieval.training import build_databases, load_config  # noqa: E402

CONFIG = HERE.parent / "configs" / "retrieval_lafan1_rigid.toml"


def time_steps(db, batch: int, steps: int, rigid) -> tuple[float, float]:
    """(wall ms, CPU ms) per step of ``batch`` characters with the rebuild ``rigid``."""
    keep = matching.MotionMatchingController._rigid
    matching.MotionMatchingController._rigid = rigid
    try:
        c = matching.MotionMatchingController(db, batch=batch, start_frame=np.zeros(batch, np.int64))
        push = np.tile([0.0, 1.0], (batch, 1))
        for _ in range(30):
            c.step(push, 1 / 60)
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(steps):
            c.step(push if i % 120 < 60 else -push, 1 / 60)
        return (time.perf_counter() - wall) / steps * 1e3, (time.process_time() - cpu) / steps * 1e3
    finally:
        matching.MotionMatchingController._rigid = keep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", default="1,16,256")
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args(argv)
    db = build_databases(load_config(CONFIG))[0]
    rows = []
    for b in (int(v) for v in args.batch.split(",")):
        w0, c0 = time_steps(db, b, args.steps, lambda self, pose: pose)
        w1, c1 = time_steps(db, b, args.steps, matching.MotionMatchingController._rigid)
        rows.append([b, w0, w1, c0, c1, c1 / c0])
    print_table("Motion-matching step, without and with the rigid rebuild",
                ["B", "ms/step without", "ms/step with", "cpu ms without", "cpu ms with", "cpu ratio"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
