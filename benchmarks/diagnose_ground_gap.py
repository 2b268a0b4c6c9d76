"""Does training see the pose the runtime draws? The same wandering sticks through both sides.

The runtime (:class:`~kinema.control.retrieval.controller.RetrievalController`, as the
scenarios and the demos drive it) always lifts a predicted pose whose lowest body joint lies
under the data's ground (:func:`kinema.control.retrieval.pose.rigid_pose` with
``retriever.ground``). Training does so only with ``train.ground``. A model trained without
it may learn to sink its legs into the floor: the training losses see toes on the floor,
the runtime lifts the body and draws a toe in the air.

For each of ``--seeds`` stick scripts (:func:`~kinema.control.retrieval.scenarios.crowd_sticks`,
the training rollouts' own wandering sticks, walking and running in turn) this drives
``--seconds`` of

- the runtime controller from database row 0 (character-space toes of the pose it feeds
  back, after the lift), and
- the training rollout (:func:`~kinema.control.retrieval.rollout.rollout` with a
  :class:`~kinema.control.retrieval.steering.StickSteer`, continued by its carry in 3-s
  pieces, deterministic, with the ground as the checkpoint was trained),

and prints per 5 s: the hips' height as a share of the data's standing height, the worst
one-second window of each toe (its lowest height in the second, cm above the skating
metric's floor: a toe that never comes down reads high, one sunk into the floor negative)
and, for the training side, how far the runtime would lift its pose (cm, mean).

    .venv/bin/python benchmarks/diagnose_ground_gap.py models/retrieval_lafan1.safetensors [--seeds 4] [--seconds 30]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from kinema.control.retrieval.controller import RetrievalController, trained_planted
from kinema.control.retrieval.evaluate import open_database
from kinema.control.retrieval.metrics import floor_height, joint_positions
from kinema.control.retrieval.pose import rigid_pose
from kinema.control.retrieval.rollout import rollout
from kinema.control.retrieval.scenarios import crowd_sticks, run_scenario, standing_hips
from kinema.control.retrieval.sequences import Retriever
from kinema.control.retrieval.steering import StickSteer
from kinema.control.retrieval.training import rollout_starts, settings
from kinema.features.normalisation import Normaliser
from kinema.matching.database import upright_mask
from kinema.nn.checkpoint import load_checkpoint

PIECE = 180   # frames per continued training rollout (3 s at 60 Hz)


def _rows(hips: np.ndarray, toes: np.ndarray, fps: float, lift: np.ndarray | None = None) -> list[str]:
    """Per 5 s of hips shares (F,) and toe heights (F, 2) (m): one cell each."""
    sec, cells = int(fps), []
    for a in range(0, len(hips) - 5 * sec + 1, 5 * sec):
        worst = toes[a:a + 5 * sec].reshape(5, sec, 2).min(1).max(0) * 100.0
        cell = f"{hips[a:a + 5 * sec].mean():.2f} / {worst[0]:+.0f} {worst[1]:+.0f}"
        if lift is not None:
            cell += f" / {lift[a:a + 5 * sec].mean() * 100.0:.0f}"
        cells.append(cell)
    return cells


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=30.0)
    a = ap.parse_args()
    model, meta = load_checkpoint(a.checkpoint)
    model.eval()
    db = open_database(None, meta)
    s = settings(meta["config"])
    fps, frames = db.fps, int(a.seconds * db.fps) // PIECE * PIECE
    floor, standing = floor_height(db), standing_hips(db)
    seeds = np.random.default_rng(1).random((a.seeds, 4))
    walk = np.arange(a.seeds) % 2 == 0

    ctl = RetrievalController(a.checkpoint, db, rigid=True, planted=trained_planted(meta), search_mask=upright_mask(db))
    runtime = []
    for i in range(a.seeds):
        ctl.reset(0)
        traces: dict = {}
        run_scenario(ctl, lambda t, i=i: (crowd_sticks(t, seeds[i:i + 1])[0], bool(walk[i])), frames, traces=traces)
        hips = traces["drawn"][:, db.roles["hips"], 1] / standing
        runtime.append(_rows(hips, traces["local_toes"][..., 1] - floor, fps))

    retriever = Retriever.for_checkpoint(db, Normaliser.from_json(meta["normalisation"]["pose"]), meta)
    starts = rollout_starts(db, np.arange(len(db.ranges)), s.context + PIECE + 1, a.seeds, np.random.default_rng(0),
                            upright=True)
    steer, carry, pieces = StickSteer(seeds, walk, fps), None, []
    norm = retriever.norm
    with torch.no_grad():
        for _ in range(frames // PIECE):
            r = rollout(model, retriever, db, None if carry else starts, s.context, PIECE, rigid=s.rigid,
                        ground=s.ground, carry=carry, steer=steer)
            carry = r.carry
            pieces.append(r.pose.numpy() * norm.std + norm.mean)
    raw = np.concatenate(pieces, 1)                                        # (seeds, frames, P)
    pos = joint_positions(db, raw)
    hips = db.roles["hips"]
    lift = joint_positions(db, rigid_pose(db, raw, retriever.ground))[..., hips, 1] - pos[..., hips, 1]   # the runtime's
    toes = pos[..., [db.roles["left_toe"], db.roles["right_toe"]], 1] - floor
    trained = [_rows(pos[i, :, hips, 1] / standing, toes[i], fps, lift[i]) for i in range(a.seeds)]

    print(f"{a.checkpoint} (train.ground = {str(s.ground).lower()}): per 5 s, hips / standing height, "
          "worst 1-s lowest height of the left and right toe (cm above the floor), and (training side) the "
          "runtime's lift (cm)\n")
    print("| seed | side | " + " | ".join(f"{5 * k}-{5 * k + 5} s" for k in range(len(runtime[0]))) + " |")
    print("|---|---|" + "---|" * len(runtime[0]))
    for i in range(a.seeds):
        gait = "walk" if walk[i] else "run"
        print(f"| {i} ({gait}) | runtime | " + " | ".join(runtime[i]) + " |")
        print("| | training rollout | " + " | ".join(trained[i]) + " |")


if __name__ == "__main__":
    main()
