"""Motion matching with a transition cost (``MatchingConfig.transition_cost``) on a shipped
model's data: does leaving the playing row only for a clearly better match skate less
without losing the path or the actor's energy? (issue 17; session 32 measured a cost of 1
on LaFAN1 only: 5.3 cm/s less skating after the lock, +0.5 cm joint error at 5 s.)

For each cost it runs the runtime controller as ``kinema eval`` scores ``motion_matching``:
the free-running windows of the checkpoint's held-out takes (``--takes test``, or the takes
that select its checkpoint, ``--takes validation``: choose a cost there), scored after the
runtime foot lock, and the scripted sticks of ``kinema eval --scenarios`` with the demos'
search mask. Intervals of ``cost - 0`` resample takes, then windows within them.

    .venv/bin/python benchmarks/matching_transition_cost.py models/retrieval_bandai.safetensors \\
        --frames 150 --context 32 --stride 60 --mirror --costs 0,0.5,1,2 [--takes validation]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from kinema.control.matching import MatchingConfig, MotionMatchingController
from kinema.control.retrieval.controller import trained_planted
from kinema.control.retrieval.evaluate import matching_rollout, matching_runtime, open_database, take_groups, window_starts
from kinema.control.retrieval.metrics import floor_height, grouped_bootstrap_ci, summary, window_metrics
from kinema.control.retrieval.training import build_clips, validation_clips
from kinema.features.normalisation import Normaliser
from kinema.matching.database import upright_mask
from kinema.nn.checkpoint import read_metadata

MOVING = ("stop_start", "turns", "circle", "walk_run", "run_release")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", help="a retrieval checkpoint: its database and held-out takes are used")
    ap.add_argument("--costs", default="0,0.5,1,2")
    ap.add_argument("--takes", choices=("test", "validation"), default="test")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--stride", type=int, default=120)
    ap.add_argument("--mirror", action="store_true")
    ap.add_argument("--scenario-frames", type=int, default=3600)
    args = ap.parse_args()
    costs = [float(c) for c in args.costs.split(",")]
    meta = read_metadata(args.checkpoint, require=("config",))
    db = open_database(None, meta)
    clips = validation_clips(meta, selection=args.takes == "validation")
    source = build_clips([Path(c) for c in clips], db.config, args.mirror, like=db)
    starts = window_starts(source, args.context + args.frames + 1, args.stride)
    groups = take_groups(source, starts)
    own = db.clip_ids(source.clip_names)
    exclude = np.broadcast_to(own, (len(starts), len(own))) if len(own) else None
    floor = floor_height(db)
    norm = Normaliser.from_json(meta["normalisation"]["pose"])   # the model's: for the pose-space loss only
    plant = floor if trained_planted(meta) else None
    rows = (starts + args.context)[:, None] + np.arange(args.frames)[None]
    truth, troots = source.pose[rows], (source.root_positions[rows], source.root_directions[rows])
    truth_m = window_metrics(truth, truth, norm, db, floor, troots + troots, True, source.contacts[rows] > 0.5)
    mask = upright_mask(db)
    print(f"{args.takes} takes {[Path(c).stem for c in clips]}: {len(starts)} windows of {args.frames} frames; "
          f"truth skating after the lock {summary(truth_m)['foot_skate_locked_cm_s']:.2f} cm/s", flush=True)
    per = {}
    for c in costs:
        t0 = time.perf_counter()
        cfg = MatchingConfig(transition_cost=c)
        pose, pos, dirs, contacts = matching_rollout(db, source, starts, args.context, args.frames, exclude, cfg, plant)
        m = window_metrics(pose, truth, norm, db, floor, (pos, dirs) + troots, True, contacts)
        per[c] = m
        s = summary(m, truth_m)

        def make(**kw) -> MotionMatchingController:
            return MotionMatchingController(db, config=cfg, search_mask=mask, **kw)

        sc = matching_runtime(db, make, MOVING + ("idle",), args.scenario_frames)
        line = (f"cost {c:g}: joint error {s['joint_error_cm']:.2f} cm, root {s['root_error_m']:.3f} m, heading "
                f"{s['heading_error_deg']:.2f} deg, speed {s['joint_speed_ratio']:.2f}, accel {s['accel_ratio']:.2f}, "
                f"skate {s['foot_skate_cm_s']:.2f} / locked {s['foot_skate_locked_cm_s']:.2f} cm/s, "
                f"Frechet {s['frechet']:.1f}")
        if c != costs[0]:
            d = m["joint_error_cm"] - per[costs[0]]["joint_error_cm"]
            k = m["foot_skate_locked_cm_s"] - per[costs[0]]["foot_skate_locked_cm_s"]
            line += (f"; vs cost {costs[0]:g}: joint error {grouped_bootstrap_ci(d, groups)}, "
                     f"locked skating {grouped_bootstrap_ci(k, groups)}")
        print(line, flush=True)
        print("    sticks, skating cm/s: " + ", ".join(f"{n} {v['foot_skate_cm_s']:.1f}" for n, v in sc["scenarios"].items())
              + f"; root error {np.mean([v['root_error_m'] for v in sc['scenarios'].values()]):.3f} m; "
              f"idle feet down {sc['scenarios']['idle']['feet_down_share']}; crowd fallen {sc['crowd']['fallen']}; "
              f"{time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
