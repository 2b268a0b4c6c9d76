"""Does the fed-back pose carry the world position? The joints above the hips, held as is and pinned.

A BVH whose top joint is not the hips (Bandai-Namco's ``joint_Root``) keeps that joint at the
world origin while the hips carry the motion. The database stores every joint in the
character's root space, so that joint's position in each pose vector is the world origin seen
from the character: in the data within a few metres (the normaliser's std is about 1.2 and 2.0
m), at runtime wherever the network's own integration takes it. Nothing drawn reads it (rigid
poses keep the hips where the pose puts them and place their children by forward kinematics),
but the network reads it back every frame.

This drives scripted sticks (:data:`~kinema.control.retrieval.scenarios.SCENARIOS`) through the
runtime controller as ``kinema eval --scenarios`` does and prints, per stick, the largest root-space
distance of those joints in the poses the network predicts (m) and what a user sees: root path,
largest distance from the start, root error, torso at its lowest, skating (cm/s after the foot
lock) and stride; with ``--crowd SEEDS``, the evaluation's crowd instead (fallen, airborne,
skating, stride). With ``--pin`` the fed-back positions and velocities of those joints are
overwritten with the normaliser's means after every frame: an input in the data's range that says
nothing. A skeleton whose top joint is the hips (LaFAN1, the sample) has no such joint and is
refused.

    .venv/bin/python benchmarks/diagnose_root_leak.py models/retrieval_bandai.safetensors [--pin] [--sticks long_idle turns walk_run]
    .venv/bin/python benchmarks/diagnose_root_leak.py models/retrieval_bandai.safetensors [--pin] --crowd 0,1
"""
from __future__ import annotations

import argparse

import numpy as np

from kinema.control.retrieval.controller import RetrievalController, trained_planted
from kinema.control.retrieval.evaluate import CROWD_FRAMES, evaluation_crowd, open_database
from kinema.control.retrieval.metrics import pose_slice
from kinema.control.retrieval.scenarios import LENGTH_FACTOR, SCENARIOS, run_crowd, run_scenario
from kinema.matching.database import Database, upright_mask
from kinema.motion.skeleton import Skeleton
from kinema.nn.checkpoint import load_checkpoint

SCENARIO_FRAMES = 3600   # kinema eval --scenarios: 60 s at 60 Hz (times LENGTH_FACTOR for the long ones)


def leak_slots(db: Database, joints: list[int]) -> np.ndarray:
    """Pose-vector columns (6 x len(joints),) of the positions of ``joints``, then their velocities."""
    return np.concatenate([pose_slice(db, seg).start + 3 * j + np.arange(3)
                           for seg in ("joint_positions", "joint_velocities") for j in joints])


def watch(crowd, db: Database, joints: list[int], pin: bool) -> list[float]:
    """Wrap ``crowd.step`` (a :class:`~kinema.control.retrieval.controller.RetrievalCrowd`) so
    that after every frame it appends the largest root-space distance of ``joints`` in the
    predicted poses to the returned list and, with ``pin``, overwrites their fed-back positions
    and velocities with the normaliser's means."""
    slots = leak_slots(db, joints)
    pos = slots[:3 * len(joints)]
    leak: list[float] = []
    step = crowd.step

    def watched(control: np.ndarray) -> np.ndarray:
        new = step(control)
        leak.append(float(np.linalg.norm(crowd.poses[:, pos].reshape(len(new), -1, 3), axis=-1).max()))
        if pin:
            crowd.poses[:, slots] = crowd.norm.mean[slots]
        return new

    crowd.step = watched
    return leak


def _open(checkpoint: str) -> tuple[dict, Database, list[int]]:
    _, meta = load_checkpoint(checkpoint)
    db = open_database(None, meta)
    joints = Skeleton(db.joint_names, db.parents, db.offsets).ancestors(db.roles["hips"])
    if not joints:
        raise SystemExit(f"{checkpoint}: the hips are the skeleton's top joint; nothing above them to leak")
    return meta, db, joints


def drive(checkpoint: str, sticks: list[str], pin: bool) -> list[dict]:
    """One row per stick: ``leak_m`` (largest root-space distance of the joints above the
    hips in the predicted poses) and the scenario's root path, reach, error, torso, skating, stride."""
    meta, db, joints = _open(checkpoint)
    ctl = RetrievalController(checkpoint, db, planted=trained_planted(meta), search_mask=upright_mask(db))
    leak = watch(ctl.crowd, db, joints, pin)
    rows = []
    for name in sticks:
        ctl.reset(0)
        leak.clear()
        traces: dict = {}
        r = run_scenario(ctl, SCENARIOS[name], SCENARIO_FRAMES * LENGTH_FACTOR.get(name, 1), traces=traces)
        roots = traces["roots"][:, [0, 2]]
        rows.append({"stick": name, "leak_m": max(leak), "travelled_m": r["travelled_m"],
                     "away_m": float(np.linalg.norm(roots - roots[0], axis=-1).max()),
                     "root_error_m": r["root_error_m"], "torso": r["torso_share_min"],
                     "skate": r["foot_skate_cm_s"], "stride": r["stride_ratio"]})
    return rows


def crowds(checkpoint: str, draws: list[int], pin: bool) -> list[dict]:
    """The evaluation's crowd (:func:`~kinema.control.retrieval.evaluate.evaluation_crowd`) for
    each of ``draws`` for :data:`~kinema.control.retrieval.evaluate.CROWD_FRAMES` frames: its
    :func:`~kinema.control.retrieval.scenarios.run_crowd` summary and ``leak_m``."""
    meta, db, joints = _open(checkpoint)
    mask = upright_mask(db)
    out = []
    for draw in draws:
        group, seeds = evaluation_crowd(checkpoint, db, seed=draw, planted=trained_planted(meta), search_mask=mask)
        leak = watch(group, db, joints, pin)
        out.append({**run_crowd(group, seeds, CROWD_FRAMES), "leak_m": max(leak)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--pin", action="store_true", help="feed the joints above the hips back at the data's mean")
    ap.add_argument("--sticks", nargs="+", default=["long_idle", "turns", "walk_run"], choices=sorted(SCENARIOS))
    ap.add_argument("--crowd", metavar="SEEDS", help="the evaluation's crowd for these comma-separated draws instead")
    a = ap.parse_args()
    if a.crowd:
        print(f"{a.checkpoint}, crowd, joints above the hips {'pinned' if a.pin else 'as predicted'}\n")
        print("| draw | characters | fallen | airborne | skating cm/s | stride | above-hips joint from the root, max m |")
        print("|---|---|---|---|---|---|---|")
        draws = [int(x) for x in a.crowd.split(",")]
        for seed, c in zip(draws, crowds(a.checkpoint, draws, a.pin)):
            print(f"| {seed} | {c['characters']} | {c['fallen']} | {c['airborne']} | {c['foot_skate_cm_s']:.1f} "
                  f"| {c['stride_ratio']:.2f} | {c['leak_m']:.1f} |", flush=True)
        return
    rows = drive(a.checkpoint, a.sticks, a.pin)
    print(f"{a.checkpoint}, joints above the hips {'pinned to the data mean' if a.pin else 'fed back as predicted'}\n")
    print("| stick | above-hips joint from the root, max m | root path m | farthest from start m | root error m "
          "| torso min | skating cm/s | stride |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        stride = "-" if r["stride"] is None else f"{r['stride']:.2f}"
        print(f"| {r['stick']} | {r['leak_m']:.1f} | {r['travelled_m']:.1f} | {r['away_m']:.2f} | {r['root_error_m']:.3f} "
              f"| {r['torso']:.2f} | {r['skate']:.1f} | {stride} |", flush=True)


if __name__ == "__main__":
    main()
