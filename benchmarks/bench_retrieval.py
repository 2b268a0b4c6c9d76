"""Ablations of the retrieval-augmented controller, trained and evaluated in one run.

Variants (NOTES.md 3.3), all from one config with the step counts scaled by ``--scale``:

- ``A0 no retrieval``: the same backbone without the retrieval pathway;
- ``A1 teacher forcing only``: retrieval, warm-up stage only (noise/dropout, no rollouts);
- ``A7 no candidate dropout``: the full recipe without candidate dropout;
- ``A5 full recipe``: warm-up, scheduled sampling, free-running fine-tune;
- ``random candidates``: A5 fed random database rows (the control, from the evaluation).

Each is evaluated on the config's validation clips (and their mirrors). The peer of the
ratio columns is A0 (free-running joint error) and motion-matching playback, measured in
the same run. Usage: ``python benchmarks/bench_retrieval.py [--config C] [--scale S]
[--out DIR]`` (default: the bundled-sample config with its own 90/90/90-step schedule,
about a minute per variant on one idle core).
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import print_table, timeit  # noqa: E402

from kinema.cli.eval import validation_clips  # noqa: E402
from kinema.control.retrieval.evaluate import evaluate  # noqa: E402
from kinema.control.retrieval.rollout import CandidateStream, control_at  # noqa: E402
from kinema.control.retrieval.sequences import PoseNormaliser, Retriever  # noqa: E402
from kinema.control.retrieval.training import build_databases, load_config, train  # noqa: E402
from kinema.nn.checkpoint import load_checkpoint  # noqa: E402

VARIANTS = {
    "A0 no retrieval": {"model.use_retrieval": False},
    "A1 teacher forcing only": {"train.scheduled": 0, "train.free": 0},
    "A7 no candidate dropout": {"train.drop_all": 0.0, "train.drop_each": 0.0},
    "A5 full recipe": {},
}


def variant_config(cfg: dict, changes: dict, scale: float) -> dict:
    c = copy.deepcopy(cfg)
    for key in ("warmup", "scheduled", "free"):
        c["train"][key] = int(round(c["train"][key] * scale))
    c["train"]["eval_every"] = max(1, int(round(c["train"]["eval_every"] * scale)))
    for key, value in changes.items():
        section, name = key.split(".")
        c[section][name] = value
    return c


def step_timing(path: Path, db) -> tuple[float, float]:
    """Seconds per frame of the controller (model step + retrieval every refresh frames)
    and of motion-matching playback (one search every refresh frames) for one character."""
    model, meta = load_checkpoint(path)
    norm = PoseNormaliser.from_json(meta["normalisation"]["pose"])
    r = Retriever(db, norm, tau=0.0)
    state = model.initial_state(1)
    rows = np.array([db.ranges[0, 0] + 10])
    pose = torch.as_tensor(r.poses_n[rows])
    ctrl = control_at(db, rows, db.root_positions[rows], db.root_directions[rows])
    stream = CandidateStream(r, None, None)
    frame = [0]

    @torch.no_grad()
    def controller():
        raw = norm.denormalise(pose.numpy())
        _, cand = stream(frame[0], raw, ctrl)
        model.step(state, torch.as_tensor(ctrl), pose, torch.as_tensor(cand))
        frame[0] += 1

    def mm():
        if frame[0] % r.refresh == 0:
            db.search(db.features[rows], 1)
        frame[0] += 1

    return timeit(controller, repeat=5, min_time=0.2), timeit(mm, repeat=5, min_time=0.2)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(HERE.parent / "configs" / "retrieval_sample.toml"))
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the config's training steps")
    p.add_argument("--out", help="keep checkpoints and evaluation JSON here")
    p.add_argument("--frames", type=int, default=90)
    p.add_argument("--context", type=int, default=16)
    p.add_argument("--stride", type=int, default=15)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load_config(args.config)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_retrieval_"))
    out.mkdir(parents=True, exist_ok=True)
    db = build_databases(cfg)[0]
    results, paths = {}, {}
    for name, changes in VARIANTS.items():
        c = variant_config(cfg, changes, args.scale)
        path = out / (name.split()[0] + ".safetensors")
        t0 = time.time()
        train(c, path, log=lambda *_: None)
        meta = load_checkpoint(path)[1]
        clips = validation_clips(meta)
        res = evaluate(path, db, clips, frames=args.frames, context=args.context, stride=args.stride, mirror=True)
        res["train_seconds"] = round(time.time() - t0, 1)
        (out / (name.split()[0] + ".eval.json")).write_text(json.dumps(res, indent=1))
        results[name], paths[name] = res, path
    a0 = results["A0 no retrieval"]["free_running"]["with"]["joint_error_cm"]
    mm = results["A5 full recipe"]["free_running"]["baselines"]["motion_matching"]["joint_error_cm"]
    rows = []
    for name, res in results.items():
        tf, fr = res["teacher_forced"], res["free_running"]
        err = fr["with"]["joint_error_cm"]
        rows.append([name, tf["with"]["loss"], tf["gain"], fr["with"]["loss"], fr["gain"],
                     f"[{fr['gain_ci95'][0]:+.3f}, {fr['gain_ci95'][1]:+.3f}]", 100 * fr["gain_relative"],
                     err, err / a0, err / mm, fr["with"]["foot_skate_cm_s"], fr["with"]["root_error_m"]])
    full = results["A5 full recipe"]
    for base in ("random_candidates", "motion_matching", "nearest_candidate", "copy_previous"):
        b = full["free_running"]["baselines"][base]
        t = full["teacher_forced"]["baselines"][base]
        rows.append([f"{base.replace('_', ' ')} (baseline)", t["loss"], "", b["loss"], "", "", "",
                     b["joint_error_cm"], b["joint_error_cm"] / a0, b["joint_error_cm"] / mm,
                     b["foot_skate_cm_s"], b["root_error_m"]])
    print_table(f"retrieval ablations ({full['windows']} windows x {full['frames']} frames, scale {args.scale}, "
                f"database {full['database']}); loss = normalised pose MSE; gain = null - retrieved",
                ["variant", "TF loss", "TF gain", "FR loss", "FR gain", "FR gain 95% CI", "FR gain %",
                 "FR joint err cm", "x A0", "x MM", "skate cm/s", "root err m"], rows)
    ctrl_s, mm_s = step_timing(paths["A5 full recipe"], db)
    print_table("per-frame cost, one character (CPU, 1 thread)", ["controller", "ms/frame", "x motion matching"],
                [["retrieval Mamba (step + search every 6 frames)", 1e3 * ctrl_s, ctrl_s / mm_s],
                 ["motion matching (search every 6 frames)", 1e3 * mm_s, 1.0]])
    print(f"\ncheckpoints and evaluation JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
