"""Does the character walk on its feet, or float, or glide? A quick look before a full evaluation.

``sticks``: drives each checkpoint through the scripted sticks
(:data:`~kinema.control.retrieval.scenarios.SCENARIOS`) for their first ``--seconds``, as
``kinema eval --scenarios`` does (runtime controller, searches among the rows that stay on
their feet, foot lock), and prints per stick the support-toe height (the lower toe's median
height above the skating metric's floor, m: what the support target reads), the skating
(cm/s, after the foot lock), the stride ratio and the feet-down share. A floating character
reads a high support toe and little skating; a gliding one a support toe on the floor and
much skating; one that steps, both low. 20 s of six sticks take about a minute per checkpoint.

``gait``: one stick, one checkpoint, every half second: the root's speed, each toe's
character-space speed (m/s) and drawn height above the skating metric's floor (m). A glide on
one leg reads a toe held up for seconds while the other toe moves slower than the root (the
session-34 ``gsup`` ran 4 m/s with its left toe 0.6-0.7 m up and its right toe at 0.7-1.2 m/s).

``data``: what :func:`~kinema.control.retrieval.training.support_loss` charges the actor: the
lower toe's median height in every one-second window (a quarter-second apart) of a training
config's database in which the root moves faster than 0.3 m/s throughout, per clip, the share
of those windows within ``SUPPORT_DOWN_M`` of the floor and their mean cost.

    .venv/bin/python benchmarks/diagnose_support.py sticks models/retrieval_lafan1.safetensors [CKPT ...] [--seconds 20]
    .venv/bin/python benchmarks/diagnose_support.py data configs/retrieval_lafan1_rigid.toml
    .venv/bin/python benchmarks/diagnose_support.py gait models/retrieval_lafan1.safetensors [--stick walk_run] [--seconds 10]
"""
from __future__ import annotations

import argparse

import numpy as np

from kinema.control.retrieval.controller import RetrievalController, trained_planted
from kinema.control.retrieval.evaluate import open_database
from kinema.control.retrieval.metrics import floor_height
from kinema.control.retrieval.scenarios import (
    MOVING_M_S,
    SCENARIOS,
    TOE_DOWN_M,
    database_support_height,
    database_toe_heights,
    run_scenario,
)
from kinema.control.retrieval.training import SUPPORT_DOWN_M, SUPPORT_SECONDS, build_databases, load_config
from kinema.matching.database import Database, upright_mask
from kinema.nn.checkpoint import load_checkpoint


def _controller(checkpoint: str, db: Database | None = None) -> tuple[RetrievalController, Database]:
    """The runtime controller of ``checkpoint`` (as ``kinema eval --scenarios`` drives it) on
    ``db``, or on the database its metadata names."""
    _, meta = load_checkpoint(checkpoint)
    db = db if db is not None else open_database(None, meta)
    return RetrievalController(checkpoint, db, planted=trained_planted(meta), search_mask=upright_mask(db)), db


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def sticks(checkpoints: list[str], seconds: float) -> None:
    db = None
    for ck in checkpoints:
        ctl, db = _controller(ck, db)   # one database: the checkpoints must share a recipe's data
        print(f"{ck}  (the data's support toe: {database_support_height(db) * 100:.1f} cm)")
        print("  stick        support cm  skating cm/s  stride  feet down")
        for name, stick in SCENARIOS.items():
            if name == "long_idle":
                continue
            ctl.reset(0)
            r = run_scenario(ctl, stick, int(seconds * db.fps), fps=db.fps)
            print(f"  {name:12s} {r['support_height_m'] * 100:10.1f}  {r['foot_skate_cm_s']:12.1f}"
                  f"  {_fmt(r['stride_ratio']):>6s}  {_fmt(r['feet_down_share']):>9s}", flush=True)


def gait(checkpoint: str, stick: str, seconds: float) -> None:
    if stick not in SCENARIOS:
        raise SystemExit(f"unknown stick {stick!r}; choose from {sorted(SCENARIOS)}")
    ctl, db = _controller(checkpoint)
    ctl.reset(0)
    tr: dict = {}
    r = run_scenario(ctl, SCENARIOS[stick], int(seconds * db.fps), fps=db.fps, traces=tr)
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    height = tr["drawn"][:, toes, 1] - floor_height(db)                                         # (F, 2)
    toe_speed = np.linalg.norm(np.diff(tr["local_toes"][:, :, [0, 2]], axis=0), axis=-1) * db.fps  # (F-1, 2)
    root_speed = np.linalg.norm(np.diff(tr["roots"][:, [0, 2]], axis=0), axis=-1) * db.fps        # (F-1,)
    print(f"{checkpoint} on {stick}: support {r['support_height_m'] * 100:.1f} cm, skating "
          f"{r['foot_skate_cm_s']:.1f} cm/s, stride {_fmt(r['stride_ratio'])}")
    print("     s  root m/s  toe speed L / R m/s  toe height L / R m")
    n = max(1, round(db.fps / 2))
    for a in range(0, len(root_speed) - n + 1, n):
        s = slice(a, a + n)
        speed, up = toe_speed[s].mean(0), height[s].mean(0)
        print(f"  {a / db.fps:4.1f}  {root_speed[s].mean():8.2f}  {speed[0]:9.2f} / {speed[1]:5.2f}"
              f"  {up[0]:11.2f} / {up[1]:5.2f}")


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
    g = sub.add_parser("gait", help="one stick, every half second: root speed, toe speeds and toe heights")
    g.add_argument("checkpoint")
    g.add_argument("--stick", default="walk_run")
    g.add_argument("--seconds", type=float, default=10.0)
    d = sub.add_parser("data", help="what the support term charges the actor in a config's training takes")
    d.add_argument("config")
    a = ap.parse_args()
    if a.what == "sticks":
        sticks(a.checkpoints, a.seconds)
    elif a.what == "gait":
        gait(a.checkpoint, a.stick, a.seconds)
    else:
        data(a.config)


if __name__ == "__main__":
    main()
