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
shorter and lower).

    .venv/bin/python benchmarks/diagnose_crowd.py models/retrieval_lafan1.safetensors [--seeds 0,1,2] [--quiet] [--no-adjust]
"""
from __future__ import annotations

import argparse

import numpy as np

from kinema.control.retrieval.evaluate import CROWD_COUNT, CROWD_FRAMES, evaluation_crowd, open_database
from kinema.control.retrieval.scenarios import AIRBORNE_M, FALLEN, head_joint, run_crowd, standing_hips
from kinema.matching.database import upright_mask
from kinema.nn.checkpoint import load_checkpoint

BEFORE_S = 1.5     # how far before the lowest hips to look for the take-off


def crowd_traces(checkpoint: str, db, seed: int, adjust: bool = True) -> tuple[dict, dict[str, np.ndarray]]:
    """(:func:`~kinema.control.retrieval.scenarios.run_crowd`'s result, per-frame traces
    (F, N)) of the evaluation's crowd drawn with ``seed``: ``hips`` (share of the standing
    height), ``head_minus_hips`` (m) and ``lowest`` (the lowest body joint's height above
    the floor, m). ``adjust=False`` leaves the roots where the network puts them."""
    crowd, seeds = evaluation_crowd(checkpoint, db, seed=seed, search_mask=upright_mask(db))
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
    a = ap.parse_args()
    _, meta = load_checkpoint(a.checkpoint)
    db = open_database(None, meta)
    seeds = [int(s) for s in a.seeds.split(",")]
    total = {"fallen": 0, "sunk": 0, "leaps": 0, "head_down": 0, "airborne": 0}
    roots = "the network's own roots" if a.no_adjust else "roots pulled toward the springs"
    print(f"{a.checkpoint}: {CROWD_COUNT} characters for {CROWD_FRAMES / db.fps:.0f} s per draw, {roots}\n")
    print("| seed | fallen | sunk | leaps | head below hips | airborne | longest flight s | lowest hips |")
    print("|---|---|---|---|---|---|---|---|")
    details = []
    for seed in seeds:
        result, tr = crowd_traces(a.checkpoint, db, seed, adjust=not a.no_adjust)
        rows = falls(tr, db.fps)
        n = {"fallen": result["fallen"], "sunk": result["sunk"], "airborne": result["airborne"],
             "leaps": sum(r["kind"] == "leap" for r in rows), "head_down": sum(r["head_down_frames"] > 0 for r in rows)}
        for k in total:
            total[k] += n[k]
        print(f"| {seed} | {n['fallen']} | {n['sunk']} | {n['leaps']} | {n['head_down']} | {n['airborne']} "
              f"| {result['longest_flight_s']:.2f} | {result['lowest_hips']:.2f} |", flush=True)
        details += [(seed, r) for r in rows]
    print(f"| all {len(seeds) * CROWD_COUNT} | {total['fallen']} | {total['sunk']} | {total['leaps']} | {total['head_down']} "
          f"| {total['airborne']} | | |")
    if a.quiet or not details:
        return
    print("\n| seed | character | kind | lowest hips | at s | peak hips before | lowest joint then m | frames head below hips |")
    print("|---|---|---|---|---|---|---|---|")
    for seed, r in details:
        print(f"| {seed} | {r['character']} | {r['kind']} | {r['lowest_hips']:.2f} | {r['at_s']:.2f} | {r['peak_hips']:.2f} "
              f"| {r['airborne_m']:.2f} | {r['head_down_frames']} |")


if __name__ == "__main__":
    main()
