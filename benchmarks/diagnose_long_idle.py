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
stands reads hips near 1 and toes near 0 to the end. Each row also gives where the root is:
the length of its path in that stretch (m, summed at the frame rate: what the evaluation's
root travel reads) and its largest distance from where the stick let go (m). A root that
sways in place sums path but stays near; one that walks off does not.

``--data CONFIG`` prints instead what the actor does standing: per training take of the
config, the seconds in which no frame's root is faster than 0.3 m/s and the root ends under
5 cm from where it began, and its path (cm/s) in them (a Bandai-Namco config has none).

    .venv/bin/python benchmarks/diagnose_long_idle.py models/retrieval_lafan1.safetensors [--scenario idle] [--seconds 300] [--every 10]
    .venv/bin/python benchmarks/diagnose_long_idle.py --data configs/retrieval_lafan1_rigid.toml
"""
from __future__ import annotations

import argparse

import numpy as np

from kinema.control.retrieval.controller import RetrievalController, trained_planted
from kinema.control.retrieval.evaluate import open_database
from kinema.control.retrieval.metrics import floor_height, pose_slice
from kinema.control.retrieval.pose import joint_steps
from kinema.control.retrieval.scenarios import SCENARIOS, path_length, run_scenario, settled_frames, standing_hips
from kinema.control.retrieval.training import build_databases, load_config
from kinema.errors import NonFiniteError
from kinema.matching.database import upright_mask
from kinema.nn.checkpoint import load_checkpoint


def long_run(checkpoint: str, scenario: str, seconds: float, every: float) -> list[dict]:
    """Rows ``{"t", "settled", "hips", "top_m", "toes_m", "toes_max_m", "off_unit", "off_motion",
    "path_m", "away_m"}`` per ``every`` seconds of ``seconds`` of ``scenario`` driven through the
    runtime controller."""
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
    roots = traces["roots"][:, [0, 2]]
    away = np.linalg.norm(roots - roots[0], axis=-1)                                  # (F,) m from the start
    step = int(round(every * db.fps))
    return [{"t": s / db.fps, "settled": float(settled[s:s + step].mean()), "hips": float(hips[s:s + step].mean()),
             "top_m": float(top[s:s + step].mean()), "toes_m": toes[s:s + step].mean(0).round(2).tolist(),
             "toes_max_m": toes[s:s + step].max(0).round(2).tolist(), "off_unit": float(off_unit[s:s + step].max()),
             "off_motion": float(off_motion[s:s + step].max()),
             "path_m": path_length(traces["roots"][max(s - 1, 0):s + step]), "away_m": float(away[s:s + step].max())}
            for s in range(0, frames, step)]


STANDING_M_S = 0.3    # no frame of a standing second moves its root faster than this
STANDING_NET_M = 0.05  # ... and the root ends the second within this of where it began


def standing_sway(config: str) -> list[tuple[str, float, float]]:
    """``(clip, standing seconds, root path cm/s)`` per unmirrored training take of ``config``
    that has a standing second (see the module docstring), the path summed at the data's
    frame rate over those seconds."""
    db, _ = build_databases(load_config(config))
    w = int(round(db.fps))
    out = []
    for c, (a, b) in enumerate(db.ranges):
        root = db.root_positions[a:b, [0, 2]]
        if db.clip_mirrored[c] or len(root) <= w:
            continue
        step = np.lib.stride_tricks.sliding_window_view(np.linalg.norm(np.diff(root, axis=0), axis=-1), w)
        net = np.linalg.norm(root[w:] - root[:-w], axis=-1)
        still = (step.max(-1) * db.fps < STANDING_M_S) & (net < STANDING_NET_M)
        if still.any():
            out.append((db.clip_names[c], float(still.sum() / db.fps), float(step[still].sum(-1).mean() * 100.0)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", nargs="?")
    ap.add_argument("--data", metavar="CONFIG", help="the actor's standing sway in a training config's takes instead")
    ap.add_argument("--scenario", default="idle", choices=sorted(SCENARIOS))
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--every", type=float, default=10.0)
    args = ap.parse_args()
    if args.data:
        rows = standing_sway(args.data)
        print("| take | standing s | root path cm/s |\n|---|---|---|")
        for name, sec, rate in rows:
            print(f"| {name} | {sec:.1f} | {rate:.2f} |")
        print(f"\n{len(rows)} takes stand" + (f"; median path {np.median([r[2] for r in rows]):.2f} cm/s" if rows else ""))
        return
    if not args.checkpoint:
        ap.error("a checkpoint, or --data CONFIG")
    print(f"{args.checkpoint}, {args.scenario} for {args.seconds:g} s: settled share, hips / standing height, "
          "highest joint (m), toes mean and max above the floor (m, left / right), fed-back 6D off unit, "
          "fed-back velocities off the joints' motion (m/s), the root's path and its largest distance from the start (m)\n")
    print("| from s | settled | hips | highest joint m | toes mean m | toes max m | 6D off unit | velocities off motion m/s "
          "| root path m | root from start m |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    try:
        rows = long_run(args.checkpoint, args.scenario, args.seconds, args.every)
    except NonFiniteError as e:   # a diverging network: say when, not a traceback
        raise SystemExit(f"diverged: {e}; ask for fewer --seconds to see its rows up to then") from None
    for r in rows:
        print(f"| {r['t']:.0f} | {r['settled']:.2f} | {r['hips']:.2f} | {r['top_m']:.2f} | "
              f"{r['toes_m'][0]:+.2f} / {r['toes_m'][1]:+.2f} | {r['toes_max_m'][0]:+.2f} / {r['toes_max_m'][1]:+.2f} | "
              f"{r['off_unit']:.3g} | {r['off_motion']:.3g} | {r['path_m']:.2f} | {r['away_m']:.2f} |")
    print(f"\nroot path {sum(r['path_m'] for r in rows):.2f} m in all, at most {max(r['away_m'] for r in rows):.2f} m from the start")


if __name__ == "__main__":
    main()
