"""Forward kinematics throughput (joint-frames per second, one core) of
``kinema.motion.kinematics.forward`` against a straightforward per-frame loop and a
per-joint loop over scipy Rotations, on real LaFAN1 motion (22 joints).

    .venv/bin/python benchmarks/bench_fk.py [--torch]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import kinema
from common import cpu_time, print_table, timeit
from kinema.data import shared_root
from kinema.maths import quat
from kinema.motion import kinematics


def per_frame_loop(rot: np.ndarray, pos: np.ndarray, parents: np.ndarray):
    """The textbook version: a Python loop over frames, then over joints."""
    f, j = rot.shape[:2]
    grot = np.empty_like(rot)
    gpos = np.empty_like(pos)
    for t in range(f):
        for k in range(j):
            p = parents[k]
            if p < 0:
                grot[t, k] = rot[t, k]
                gpos[t, k] = pos[t, k]
            else:
                grot[t, k] = quat.mul(grot[t, p], rot[t, k])
                gpos[t, k] = gpos[t, p] + quat.rotate(grot[t, p], pos[t, k])
    return grot, gpos


def scipy_joint_loop(rot: np.ndarray, pos: np.ndarray, parents: np.ndarray):
    """A loop over joints, vectorised over frames with scipy.spatial.transform.Rotation."""
    from scipy.spatial.transform import Rotation
    world_r, world_p = [], []
    for k, p in enumerate(parents):
        r = Rotation.from_quat(rot[:, k], scalar_first=True)
        if p < 0:
            world_r.append(r)
            world_p.append(pos[:, k])
        else:
            world_p.append(world_p[p] + world_r[p].apply(pos[:, k]))
            world_r.append(world_r[p] * r)
    return world_r, world_p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", action="store_true", help="also time the torch path (CPU, 1 thread)")
    args = parser.parse_args(argv)
    root = shared_root()
    if root is None:
        print("shared data folder not found (set KINEMA_DATA); nothing to measure")
        return 1
    clip = kinema.load(root / "lafan1" / "obstacles1_subject1.bvh")
    every = [kinema.load(f) for f in sorted((root / "lafan1").glob("*.bvh"))]
    parents = clip.parents
    big_rot = np.concatenate([m.rotations for m in every])
    big_pos = np.concatenate([m.positions for m in every])

    rows = []

    def add(name, fn, jf, repeat=5):
        t = timeit(fn, repeat=repeat, warmup=1 if repeat > 1 else 0)
        rows.append([name, jf, t, jf / t / 1e6, jf / cpu_time(fn, repeat) / 1e6])

    f, j = clip.rotations.shape[:2]
    r32, p32 = clip.rotations, clip.positions
    r64, p64 = r32.astype(np.float64), p32.astype(np.float64)
    add(f"kinema forward, float32, 1 clip ({f} frames)", lambda: kinematics.forward(r32, p32, parents), f * j)
    add(f"kinema forward, float64, 1 clip ({f} frames)", lambda: kinematics.forward(r64, p64, parents), f * j)
    fb = big_rot.shape[0]
    add(f"kinema forward, float32, all LaFAN1 ({fb} frames)",
        lambda: kinematics.forward(big_rot, big_pos, parents), fb * j, repeat=3)
    if args.torch:
        import torch
        torch.set_num_threads(1)
        tr, tp = torch.from_numpy(r32), torch.from_numpy(p32)
        add(f"kinema forward, torch float32 CPU 1 thread ({f} frames)",
            lambda: kinematics.forward(tr, tp, parents), f * j)
    add(f"scipy Rotation, loop over joints ({f} frames)", lambda: scipy_joint_loop(r64, p64, parents), f * j,
        repeat=3)
    n = 100
    add(f"per-frame loop ({n} frames)", lambda: per_frame_loop(r64[:n], p64[:n], parents), n * j, repeat=1)

    ours = rows[0][4]
    table = [r + [ours / r[4]] for r in rows]
    print_table("Forward kinematics, one core (M joint-frames/s, target >= 20 M/s; ratio by CPU time)",
                ["implementation", "joint-frames", "wall s", "M/s wall", "M/s CPU", "kinema f32 x faster"], table)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
