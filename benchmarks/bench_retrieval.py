"""Ablations of the retrieval-augmented controller, trained and evaluated in one run.

Variants (NOTES.md 3.3), all from one config with the step counts scaled by ``--scale``,
each trained with every seed of ``--seeds`` (mean and standard deviation over seeds):

- ``A0 no retrieval``: the same backbone without the retrieval pathway;
- ``A1 concat, teacher forcing only``: the k raw candidate payloads concatenated to the
  backbone input (no attention, no gates), warm-up stage only;
- ``A4 attention, teacher forcing only``: the retrieval pathway, warm-up stage only
  (noise/dropout, no rollouts);
- ``A7 candidate dropout``: the full recipe with candidate dropout (the training defaults
  0.15 / 0.1 / 0.1; the bundled sample's config has trained without it since session 41);
- ``A5 full recipe``: warm-up, scheduled sampling, free-running fine-tune, as the config says;
- ``C1 random rows (trained)``: the full recipe trained and evaluated on uniformly random
  database rows instead of the nearest (the control: capacity without information);
- ``A5 fed random rows``: the A5 model evaluated with random rows (from its evaluation).

Each is evaluated on the config's validation clips (and their mirrors). The peer of the
ratio columns is A0 (free-running joint error) and motion-matching playback, measured in
the same run. Usage: ``python benchmarks/bench_retrieval.py [--config C] [--scale S]
[--seeds 0,1,2] [--out DIR]`` (default: the bundled-sample config with its own schedule,
about a minute per variant and seed on one idle core).
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
from kinema.control.retrieval.evaluate import evaluate  # noqa: E402
from kinema.control.retrieval.rollout import CandidateStream, control_at  # noqa: E402
from kinema.control.retrieval.sequences import Retriever  # noqa: E402
from kinema.control.retrieval.training import build_databases, load_config, train, validation_clips  # noqa: E402
from kinema.features.normalisation import Normaliser  # noqa: E402
from kinema.nn.checkpoint import load_checkpoint  # noqa: E402

VARIANTS = {
    "A0 no retrieval": {"model.use_retrieval": False},
    "A1 concat, teacher forcing only": {"model.fusion": "concat", "train.scheduled": 0, "train.free": 0},
    "A4 attention, teacher forcing only": {"train.scheduled": 0, "train.free": 0},
    "A7 candidate dropout": {"train.drop_all": 0.15, "train.drop_each": 0.1, "train.drop_sequence": 0.1},
    "A5 full recipe": {},
    "C1 random rows (trained)": {"retrieval.random": True},
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
    norm = Normaliser.from_json(meta["normalisation"]["pose"])
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


def _mean_std(values: list[float]) -> str:
    v = np.asarray(values, np.float64)
    return f"{v.mean():.3f}" if len(v) == 1 else f"{v.mean():.3f} ± {v.std(ddof=1):.3f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(HERE.parent / "configs" / "retrieval_sample.toml"))
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the config's training steps")
    p.add_argument("--seeds", default="0", help="comma-separated training seeds (e.g. 0,1,2)")
    p.add_argument("--variants", help="comma-separated variant ids to run (default: all), e.g. A0,A5")
    p.add_argument("--out", help="keep checkpoints and evaluation JSON here")
    p.add_argument("--frames", type=int, default=90)
    p.add_argument("--context", type=int, default=16)
    p.add_argument("--stride", type=int, default=15)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load_config(args.config)
    seeds = [int(x) for x in args.seeds.split(",")]
    wanted = None if not args.variants else set(args.variants.split(","))
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_retrieval_"))
    out.mkdir(parents=True, exist_ok=True)
    db = build_databases(cfg)[0]
    results: dict[str, list[dict]] = {}
    paths = {}
    for name, changes in VARIANTS.items():
        vid = name.split()[0]
        if wanted is not None and vid not in wanted and vid != "A5":
            continue
        for seed in seeds:
            c = variant_config(cfg, {**changes, "train.seed": seed}, args.scale)
            path = out / f"{vid}_seed{seed}.safetensors"
            t0 = time.time()
            train(c, path, log=lambda *_: None)
            meta = load_checkpoint(path)[1]
            res = evaluate(path, db, validation_clips(meta), frames=args.frames, context=args.context,
                           stride=args.stride, mirror=True, random_rows=bool(changes.get("retrieval.random")))
            res["train_seconds"] = round(time.time() - t0, 1)
            (out / f"{vid}_seed{seed}.eval.json").write_text(json.dumps(res, indent=1))
            results.setdefault(name, []).append(res)
            paths.setdefault(name, path)
            print(f"{name} seed {seed}: FR gain {res['free_running']['gain']:+.3f}, FR joint error "
                  f"{res['free_running']['with']['joint_error_cm']:.2f} cm ({res['train_seconds']:.0f} s)", flush=True)
    full = results["A5 full recipe"]
    base = "A0 no retrieval" if "A0 no retrieval" in results else None
    a0 = np.mean([r["free_running"]["with"]["joint_error_cm"] for r in results[base]]) if base else float("nan")
    mm = np.mean([r["free_running"]["baselines"]["motion_matching"]["joint_error_cm"] for r in full])
    rows = []

    def row(label, tf_list, fr_list, tf_gain=None, fr_gain=None, fr_rel=None, ci=None):
        err = [m["joint_error_cm"] for m in fr_list]
        rows.append([label, _mean_std([m["loss"] for m in tf_list]), "" if tf_gain is None else _mean_std(tf_gain),
                     _mean_std([m["loss"] for m in fr_list]), "" if fr_gain is None else _mean_std(fr_gain),
                     "" if fr_rel is None else _mean_std(fr_rel), ci or "", _mean_std(err),
                     float(np.mean(err) / a0), float(np.mean(err) / mm),
                     _mean_std([m["foot_skate_cm_s"] for m in fr_list]), _mean_std([m["root_error_m"] for m in fr_list])])

    for name, res in results.items():
        tf = [r["teacher_forced"] for r in res]
        fr = [r["free_running"] for r in res]
        cis = [r["gain_ci95"] for r in fr]
        ci = ", ".join(f"[{lo:+.2f}, {hi:+.2f}]" for lo, hi in cis)
        has_gain = name != "A0 no retrieval"
        row(name, [t["with"] for t in tf], [f["with"] for f in fr],
            [t["gain"] for t in tf] if has_gain else None, [f["gain"] for f in fr] if has_gain else None,
            [100 * f["gain_relative"] for f in fr] if has_gain else None, ci if has_gain else "")
    row("A5 fed random rows", [r["teacher_forced"]["baselines"]["random_candidates"] for r in full],
        [r["free_running"]["baselines"]["random_candidates"] for r in full])
    for b in ("motion_matching", "nearest_candidate", "copy_previous"):
        row(f"{b.replace('_', ' ')} (baseline)", [r["teacher_forced"]["baselines"][b] for r in full],
            [r["free_running"]["baselines"][b] for r in full])
    print_table(f"retrieval ablations ({full[0]['windows']} windows x {full[0]['frames']} frames, seeds {seeds}, "
                f"scale {args.scale}, database {full[0]['database']}); loss = normalised pose MSE; gain = null - "
                "retrieved; mean ± std over seeds",
                ["variant", "TF loss", "TF gain", "FR loss", "FR gain", "FR gain %", "FR gain 95% CI per seed",
                 "FR joint err cm", "x A0", "x MM", "skate cm/s", "root err m"], rows)
    ctrl_s, mm_s = step_timing(paths["A5 full recipe"], db)
    print_table("per-frame cost, one character (CPU, 1 thread)", ["controller", "ms/frame", "x motion matching"],
                [["retrieval Mamba (step + search every 6 frames)", 1e3 * ctrl_s, ctrl_s / mm_s],
                 ["motion matching (search every 6 frames)", 1e3 * mm_s, 1.0]])
    print(f"\ncheckpoints and evaluation JSON: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
