"""Does the character walk on its feet, or float, or glide? A quick look before a full evaluation.

``sticks``: drives each checkpoint through the scripted sticks
(:data:`~kinema.control.retrieval.scenarios.SCENARIOS`) for their first ``--seconds``, as
``kinema eval --scenarios`` does (runtime controller, searches among the rows that stay on
their feet, foot lock), and prints per stick the support-toe height (the lower toe's median
height above the skating metric's floor, m: what the support target reads), the skating
(cm/s, after the foot lock), the stride ratio and the feet-down share. A floating character
reads a high support toe and little skating; a gliding one a support toe on the floor and
much skating; one that steps, both low. 20 s of six sticks take about a minute per checkpoint.

``data``: what :func:`~kinema.control.retrieval.training.support_loss` charges the actor: the
lower toe's median height in every one-second window (a quarter-second apart) of a training
config's database in which the root moves faster than 0.3 m/s throughout, per clip, the share
of those windows within ``SUPPORT_DOWN_M`` of the floor and their mean cost.

    .venv/bin/python benchmarks/diagnose_support.py sticks models/retrieval_lafan1.safetensors [CKPT ...] [--seconds 20]
    .venv/bin/python benchmarks/diagnose_support.py data configs/retrieval_lafan1_rigid.toml
"""
from __future__ import annotations

import argparse

import numpy as np

from kinema.control.retrieval.controller import RetrievalController, trained_planted
from kinema.control.retrieval.evaluate import open_database
from kinema.control.retrieval.scenarios import (
    MOVING_M_S,
    SCENARIOS,
    TOE_DOWN_M,
    database_support_height,
    database_toe_heights,
    run_scenario,
)
from kinema.control.retrieval.training import SUPPORT_DOWN_M, SUPPORT_SECONDS, build_databases, load_config
from kinema.matching.database import upright_mask
from kinema.nn.checkpoint import load_checkpoint


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def sticks(checkpoints: list[str], seconds: float) -> None:
    db = None
    for ck in checkpoints:
        _, meta = load_checkpoint(ck)
        if db is None:   # one database: the checkpoints must share a recipe's data
            db = open_database(None, meta)
        ctl = RetrievalController(ck, db, planted=trained_planted(meta), search_mask=upright_mask(db))
        print(f"{ck}  (the data's support toe: {database_support_height(db) * 100:.1f} cm)")
        print("  stick        support cm  skating cm/s  stride  feet down")
        for name, stick in SCENARIOS.items():
            if name == "long_idle":
                continue
            ctl.reset(0)
            r = run_scenario(ctl, stick, int(seconds * db.fps), fps=db.fps)
            print(f"  {name:12s} {r['support_height_m'] * 100:10.1f}  {r['foot_skate_cm_s']:12.1f}"
                  f"  {_fmt(r['stride_ratio']):>6s}  {_fmt(r['feet_down_share']):>9s}", flush=True)


def data(config: str) -> None:
    db, _ = build_databases(load_config(config))
    low = database_toe_heights(db).min(1)
    w = round(SUPPORT_SECONDS * db.fps)
    print(f"clip                                windows  within {SUPPORT_DOWN_M * 100:.1f} cm  mean cost")
    every = []
    for c, (a, b) in enumerate(db.ranges):
        root = db.root_positions[a:b, [0, 2]]
        speed = np.linalg.norm(np.diff(root, axis=0), axis=1) * db.fps
        speed = np.concatenate([speed[:1], speed])
        medians = np.array([np.median(low[a + s:a + s + w]) for s in range(0, b - a - w + 1, max(1, w // 4))
                            if speed[s:s + w].min() > MOVING_M_S])
        if not len(medians):
            continue
        cost = (np.maximum(medians - SUPPORT_DOWN_M, 0.0) / TOE_DOWN_M) ** 2
        every.append((medians, cost))
        print(f"{db.clip_names[c][:34]:34s} {len(medians):8d}  {np.mean(medians <= SUPPORT_DOWN_M):12.2f}  {cost.mean():9.3f}")
    medians, cost = (np.concatenate(x) for x in zip(*every))
    print(f"{'all':34s} {len(medians):8d}  {np.mean(medians <= SUPPORT_DOWN_M):12.2f}  {cost.mean():9.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sticks", help="support toe, skating, stride and stance on the scripted sticks")
    s.add_argument("checkpoints", nargs="+")
    s.add_argument("--seconds", type=float, default=20.0)
    d = sub.add_parser("data", help="what the support term charges the actor in a config's training takes")
    d.add_argument("config")
    a = ap.parse_args()
    if a.what == "sticks":
        sticks(a.checkpoints, a.seconds)
    else:
        data(a.config)


if __name__ == "__main__":
    main()
