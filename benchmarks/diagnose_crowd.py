"""Who falls in the crowd, and how: a leap or a collapse?

``kinema eval --scenarios`` drives 64 characters on wandering sticks for 10 s (one draw of
start rows and sticks, seed 0) and counts who lies down (hips below half the data's standing
height: ``fallen``) or sinks (below three quarters). One draw decides little, so this drives
the same crowd for several ``--seeds`` (seed 0 is the evaluation's draw) and, for every
character that fell or put its head below its hips, prints how: the lowest hips (share of
the standing height) and when, the highest hips in the 1.5 s before it and how far the lowest
body joint was above the floor then (m), and how many frames the head was below the hips. A
``leap`` is a fall whose body was off the floor before it (every joint at least
:data:`AIRBORNE_M` up: nothing in the crowd's sticks asks for a jump, and the search plays only
rows that stay on their feet); a ``collapse`` sank from the floor. A hop need not end on the
floor, so the table also prints the crowd's ``airborne`` count and longest flight as the
evaluation records them (:func:`~kinema.control.retrieval.scenarios.run_crowd`: every body
joint at least :data:`AIRBORNE_M` up for ``AIRBORNE_S`` or longer; a run's flight phase is
shorter and lower). It also prints the crowd's skating (the mean and the 90th percentile over
the characters of each one's drawn skating, cm/s, no foot lock): 128 characters on wandering
sticks average over far more steering than one scripted stick or the main demo: one recipe
and seed trained on two machines read 60.2 and 88.8 cm/s on the sticks, 68.2 and 90.7 in the
main demo (protocol, session 41), where the two crowd draws of one network differed by
1.6 cm/s at the median of 12 networks (at most 9.0). ``--matching`` drives motion matching
as the evaluation runs it (:func:`~kinema.control.retrieval.evaluate.matching_runtime`'s
controller: springs, searches, root pull, the same search mask) through the same draws, for
reference.

    .venv/bin/python benchmarks/diagnose_crowd.py models/retrieval_lafan1.safetensors [--seeds 0,1,2] [--quiet] [--no-adjust] [--matching]
"""
from __future__ import annotations

import argparse

import numpy as np

from kinema.control.matching import MotionMatchingController
from kinema.control.retrieval.evaluate import CROWD_COUNT, CROWD_FRAMES, evaluation_crowd, open_database
from kinema.control.retrieval.matching_driver import MatchingDriver
from kinema.control.retrieval.scenarios import (
    AIRBORNE_M,
    FALLEN,
    crowd_starts,
    database_stride_ratio,
    head_joint,
    run_crowd,
    standing_hips,
)
from kinema.matching.database import upright_mask
from kinema.nn.checkpoint import load_checkpoint

BEFORE_S = 1.5     # how far before the lowest hips to look for the take-off


def _fmt(x: float | None) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.2f}"


def crowd_traces(checkpoint: str | None, db, seed: int, adjust: bool = True) -> tuple[dict, dict[str, np.ndarray]]:
    """(:func:`~kinema.control.retrieval.scenarios.run_crowd`'s result, per-frame traces
    (F, N)) of the evaluation's crowd drawn with ``seed``: ``hips`` (share of the standing
    height), ``head_minus_hips`` (m) and ``lowest`` (the lowest body joint's height above
    the floor, m). ``adjust=False`` leaves the roots where the network puts them; a
    ``checkpoint`` of None drives motion matching instead, as the evaluation does."""
    mask = upright_mask(db)
    if checkpoint is None:
        seeds, rows = crowd_starts(db, CROWD_COUNT, seed)
        crowd = MatchingDriver(lambda **kw: MotionMatchingController(db, search_mask=mask, **kw), db, CROWD_COUNT, rows)
    else:
        crowd, seeds = evaluation_crowd(checkpoint, db, seed=seed, search_mask=mask)
    traces: dict = {}
    result = run_crowd(crowd, seeds, CROWD_FRAMES, fps=db.fps, traces=traces, adjust=adjust)
    p = traces["drawn"]                                               # (F, N, J, 3) world
    hips = p[..., db.roles["hips"], 1]
    return result, {"hips": hips / standing_hips(db), "head_minus_hips": p[..., head_joint(db), 1] - hips,
                    "lowest": traces["lowest"]}


def falls(traces: dict[str, np.ndarray], fps: float) -> list[dict]:
    """One row per character that fell (hips below :data:`FALLEN`) or put its head below
    its hips: ``character``, ``lowest_hips`` and ``at_s``, ``peak_hips`` and ``airborne_m``
    (the highest hips in the :data:`BEFORE_S` before, and the lowest body joint's height
    then), ``head_down_frames`` and ``kind`` (``leap``, ``collapse`` or ``head down``)."""
    rows = []
    hips, head, low = traces["hips"], traces["head_minus_hips"], traces["lowest"]
    for c in range(hips.shape[1]):
        fell, bowed = hips[:, c].min() < FALLEN, int((head[:, c] <= 0).sum())
        if not fell and not bowed:
            continue
        f = int(hips[:, c].argmin())
        w = np.arange(max(f - int(BEFORE_S * fps), 0), f + 1)
        peak = int(w[hips[w, c].argmax()])
        kind = ("leap" if low[peak, c] >= AIRBORNE_M else "collapse") if fell else "head down"
        rows.append({"character": c, "lowest_hips": float(hips[f, c]), "at_s": f / fps,
                     "peak_hips": float(hips[peak, c]), "airborne_m": float(low[peak, c]),
                     "head_down_frames": bowed, "kind": kind})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--seeds", default="0,1,2", help="crowd draws, comma-separated (0: the evaluation's)")
    ap.add_argument("--quiet", action="store_true", help="only the per-seed counts")
    ap.add_argument("--no-adjust", action="store_true",
                    help="leave each root where the network puts it (the runtime pulls it toward its springs)")
    ap.add_argument("--matching", action="store_true",
                    help="also drive motion matching through the same draws (the checkpoint's database)")
    a = ap.parse_args()
    _, meta = load_checkpoint(a.checkpoint)
    db = open_database(None, meta)
    seeds = [int(s) for s in a.seeds.split(",")]
    total = {"fallen": 0, "sunk": 0, "leaps": 0, "head_down": 0, "airborne": 0}
    roots = "the network's own roots" if a.no_adjust else "roots pulled toward the springs"
    print(f"{a.checkpoint}: {CROWD_COUNT} characters for {CROWD_FRAMES / db.fps:.0f} s per draw, {roots}\n")
    print("| seed | fallen | sunk | leaps | head below hips | airborne | longest flight s | lowest hips "
          "| skating cm/s | skating p90 cm/s | stride |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    details, skates, strides = [], [], []
    for seed in seeds:
        result, tr = crowd_traces(a.checkpoint, db, seed, adjust=not a.no_adjust)
        skates.append(result["foot_skate_cm_s"])
        if result["stride_ratio"] is not None:
            strides.append(result["stride_ratio"])
        rows = falls(tr, db.fps)
        n = {"fallen": result["fallen"], "sunk": result["sunk"], "airborne": result["airborne"],
             "leaps": sum(r["kind"] == "leap" for r in rows), "head_down": sum(r["head_down_frames"] > 0 for r in rows)}
        for k in total:
            total[k] += n[k]
        print(f"| {seed} | {n['fallen']} | {n['sunk']} | {n['leaps']} | {n['head_down']} | {n['airborne']} "
              f"| {result['longest_flight_s']:.2f} | {result['lowest_hips']:.2f} | {result['foot_skate_cm_s']:.1f} "
              f"| {result['foot_skate_p90_cm_s']:.1f} | {_fmt(result['stride_ratio'])} |", flush=True)
        details += [(seed, r) for r in rows]
    print(f"| all {len(seeds) * CROWD_COUNT} | {total['fallen']} | {total['sunk']} | {total['leaps']} | {total['head_down']} "
          f"| {total['airborne']} | | | {np.mean(skates):.1f} | | {_fmt(np.mean(strides) if strides else None)} |")
    if a.matching:
        mm = [crowd_traces(None, db, seed)[0] for seed in seeds]
        print(f"| motion matching, all {len(seeds) * CROWD_COUNT} | {sum(r['fallen'] for r in mm)} | "
              f"{sum(r['sunk'] for r in mm)} | | | {sum(r['airborne'] for r in mm)} | "
              f"{max(r['longest_flight_s'] for r in mm):.2f} | {min(r['lowest_hips'] for r in mm):.2f} | "
              f"{np.mean([r['foot_skate_cm_s'] for r in mm]):.1f} | | "
              f"{_fmt(np.mean([r['stride_ratio'] for r in mm if r['stride_ratio'] is not None]))} |")
    print(f"\nthe data's stride ratio: {database_stride_ratio(db):.2f}")
    if a.quiet or not details:
        return
    print("\n| seed | character | kind | lowest hips | at s | peak hips before | lowest joint then m | frames head below hips |")
    print("|---|---|---|---|---|---|---|---|")
    for seed, r in details:
        print(f"| {seed} | {r['character']} | {r['kind']} | {r['lowest_hips']:.2f} | {r['at_s']:.2f} | {r['peak_hips']:.2f} "
              f"| {r['airborne_m']:.2f} | {r['head_down_frames']} |")


if __name__ == "__main__":
    main()
