"""Does the character stay on the floor when a user lets go for minutes, not one?

The evaluation's scripted sticks last 60 s (``kinema eval --scenarios``). A user who leaves
the demo running with the stick released drives the same controller for much longer. This
drives one scripted stick (:data:`~kinema.control.retrieval.scenarios.SCENARIOS`, default
``idle``: released from the start) through the runtime controller as the scenarios do (the
search among the rows that stay on their feet, the planted-foot rule as the checkpoint was
trained) for ``--seconds`` and prints per ``--every`` seconds: the share of frames the stick
has asked to stand for a second, the hips' height as a share of the data's standing height,
the highest joint (m), and each toe's mean and highest height above the skating metric's
floor (m), how far the 6D rotations it feeds back have drifted from unit, orthogonal
columns (the largest deviation of their 2x2 Gram matrix from the identity; every row of the
data reads 0), and how far the joint velocities it feeds back are from its joints' own motion
(the largest gap, m/s, to :func:`~kinema.control.retrieval.pose.joint_steps` times the frame
rate; 99 in 100 rows of the LaFAN1 and Bandai-Namco databases read under 1 m/s, their
central differences against this backward one; a network trained with
``train.rebuilt_velocities`` reads 0). A character that
stands reads hips near 1 and toes near 0 to the end.

    .venv/bin/python benchmarks/diagnose_long_idle.py models/retrieval_lafan1.safetensors [--scenario idle] [--seconds 300] [--every 10]
"""
from __future__ import annotations

import argparse

import numpy as np

from kinema.control.retrieval.controller import RetrievalController, trained_planted
from kinema.control.retrieval.evaluate import open_database
from kinema.control.retrieval.metrics import floor_height, pose_slice
from kinema.control.retrieval.pose import joint_steps
from kinema.control.retrieval.scenarios import SCENARIOS, run_scenario, settled_frames, standing_hips
from kinema.errors import NonFiniteError
from kinema.matching.database import upright_mask
from kinema.nn.checkpoint import load_checkpoint


def long_run(checkpoint: str, scenario: str, seconds: float, every: float) -> list[dict]:
    """Rows ``{"t", "settled", "hips", "top_m", "toes_m", "toes_max_m", "off_unit", "off_motion"}`` per
    ``every`` seconds of ``seconds`` of ``scenario`` driven through the runtime controller."""
    _, meta = load_checkpoint(checkpoint)
    db = open_database(None, meta)
    ctl = RetrievalController(checkpoint, db, rigid=True, planted=trained_planted(meta), search_mask=upright_mask(db))
    ctl.reset(0)
    traces: dict = {}
    frames = int(round(seconds * db.fps))
    run_scenario(ctl, SCENARIOS[scenario], frames, fps=db.fps, traces=traces)
    drawn = traces["drawn"]                                                       # (F, J, 3) world
    hips = drawn[:, db.roles["hips"], 1] / standing_hips(db)
    toes = drawn[:, [db.roles["left_toe"], db.roles["right_toe"]], 1] - floor_height(db)   # (F, 2)
    top = drawn[:, :, 1].max(-1)
    settled = settled_frames(traces["path"], db.fps)
    six = traces["poses"][:, pose_slice(db, "joint_rotations_6d")].reshape(frames, db.num_joints, 2, 3)
    gram = np.einsum("fjik,fjlk->fjil", six, six)
    off_unit = np.abs(gram - np.eye(2)).max((1, 2, 3))                                 # (F,)
    poses = traces["poses"].astype(np.float64)
    motion = (joint_steps(db, poses[:-1], poses[1:]) * db.fps).reshape(frames - 1, -1)
    off_motion = np.abs(poses[1:, pose_slice(db, "joint_velocities")] - motion).max(-1)
    off_motion = np.concatenate([[0.0], off_motion])                                  # (F,), frame 0 has no before
    step = int(round(every * db.fps))
    return [{"t": s / db.fps, "settled": float(settled[s:s + step].mean()), "hips": float(hips[s:s + step].mean()),
             "top_m": float(top[s:s + step].mean()), "toes_m": toes[s:s + step].mean(0).round(2).tolist(),
             "toes_max_m": toes[s:s + step].max(0).round(2).tolist(), "off_unit": float(off_unit[s:s + step].max()),
             "off_motion": float(off_motion[s:s + step].max())}
            for s in range(0, frames, step)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--scenario", default="idle", choices=sorted(SCENARIOS))
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--every", type=float, default=10.0)
    args = ap.parse_args()
    print(f"{args.checkpoint}, {args.scenario} for {args.seconds:g} s: settled share, hips / standing height, "
          "highest joint (m), toes mean and max above the floor (m, left / right), fed-back 6D off unit, "
          "fed-back velocities off the joints' motion (m/s)\n")
    print("| from s | settled | hips | highest joint m | toes mean m | toes max m | 6D off unit | velocities off motion m/s |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        rows = long_run(args.checkpoint, args.scenario, args.seconds, args.every)
    except NonFiniteError as e:   # a diverging network: say when, not a traceback
        raise SystemExit(f"diverged: {e}; ask for fewer --seconds to see its rows up to then") from None
    for r in rows:
        print(f"| {r['t']:.0f} | {r['settled']:.2f} | {r['hips']:.2f} | {r['top_m']:.2f} | "
              f"{r['toes_m'][0]:+.2f} / {r['toes_m'][1]:+.2f} | {r['toes_max_m'][0]:+.2f} / {r['toes_max_m'][1]:+.2f} | "
              f"{r['off_unit']:.3g} | {r['off_motion']:.3g} |")


if __name__ == "__main__":
    main()
