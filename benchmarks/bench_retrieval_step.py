"""Cost of one training step of the retrieval controller, per stage, on the CPU and on CUDA.

The three stages of :mod:`kinema.control.retrieval.training` cost very different amounts:
``warmup`` is one teacher-forced window (a parallel scan), ``scheduled`` a rollout at the
middle of the horizon ramp and ``free`` a ``free_horizon``-frame rollout, both stepped frame
by frame in Python with retrieval re-run from the predictions (plus the ``tf_mix`` window).
Each is timed after one warm-up step, for every batch size and device asked for, with and
without the retrieval pathway (the difference is what retrieval costs: search, payloads,
attention). ``validate`` is one validation (teacher forced and 300-frame rollouts, with and
without candidates).

The peer is the CPU at the config's own batch, measured in the same run: the ``x`` columns
are rollout frames per second relative to it (batch x frames / time), so a device that
takes twice as long per step on four times the batch shows 2.0x.

    .venv/bin/python benchmarks/bench_retrieval_step.py [--config C] [--batch 16,64]
        [--devices cpu,cuda] [--set model.d_model=256 ...] [--repeat N]

Default config: ``configs/retrieval_lafan1.toml`` when ../shared/data holds LaFAN1, else the
bundled-sample config. CUDA rows appear only where torch sees a GPU.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import print_table  # noqa: E402
from kinema.control.retrieval import training as T  # noqa: E402
from kinema.control.retrieval.metrics import floor_height  # noqa: E402
from kinema.control.retrieval.sequences import WindowSampler  # noqa: E402
from kinema.control.retrieval.training import apply_overrides  # noqa: E402
from kinema.data import shared_root  # noqa: E402
from kinema.features.normalisation import Normaliser  # noqa: E402

ROOT = HERE.parent


def default_config() -> Path:
    root = shared_root()
    if root is not None and any((Path(root) / "lafan1").glob("*.bvh")):
        return ROOT / "configs/retrieval_lafan1.toml"
    return ROOT / "configs/retrieval_sample.toml"


def apply_sets(cfg: dict, sets: list[str]) -> dict:
    """A copy of ``cfg`` with ``kinema train --set`` overrides applied."""
    return apply_overrides(copy.deepcopy(cfg), sets)


def stage_times(cfg: dict, db, val, device: str, batch: int, retrieval: bool, repeat: int) -> dict[str, float]:
    """Seconds per training step of each stage (and one validation) for one setting."""
    cfg = apply_sets(cfg, [f"train.batch={batch}", f"train.device={device}",
                           f"model.use_retrieval={json.dumps(retrieval)}"])
    s = T.settings(cfg)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    ret = T.make_retriever(cfg, db, Normaliser.fit(db.pose, floor=1e-2))
    floor = floor_height(db)
    model = T.make_model(cfg, db, ret).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr)
    clips = np.arange(len(db.ranges))
    sampler = WindowSampler(ret, clips, s.window, seed=0)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def tf():
        return T.teacher_forced_loss(model, sampler, s, rng)

    mid = (s.horizon[0] + s.horizon[1]) // 2
    stages = {
        "warmup": tf,
        "scheduled": lambda: T.rollout_loss(model, ret, clips, s, mid, 0.5, rng, None, floor)[0] + s.tf_mix * tf(),
        "free": lambda: T.rollout_loss(model, ret, clips, s, s.free_horizon, 1.0, rng, s.detach_every, floor)[0]
        + s.tf_mix * tf(),
    }
    out = {}
    for name, loss_fn in stages.items():
        times = []
        for i in range(repeat + 1):
            t0 = time.perf_counter()
            loss = loss_fn()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sync()
            if i:   # the first step warms caches, CUDA kernels and numba
                times.append(time.perf_counter() - t0)
        out[name] = float(np.median(times))
    model.eval()
    t0 = time.perf_counter()
    T.validate(model, ret, val, s, floor)
    sync()
    out["validate"] = time.perf_counter() - t0
    out["frames"] = {"warmup": s.window, "scheduled": s.context + mid, "free": s.context + s.free_horizon}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--batch", default="")
    ap.add_argument("--devices", default="cpu,cuda")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=JSON")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    cfg = apply_sets(T.load_config(args.config or default_config()), args.set)
    base_batch = T.settings(cfg).batch
    batches = [int(b) for b in args.batch.split(",") if b] or [base_batch]
    devices = [d for d in args.devices.split(",") if d == "cpu" or (d.startswith("cuda") and torch.cuda.is_available())]
    torch.set_num_threads(T.settings(cfg).threads)
    db, val = T.build_databases(cfg)
    print(f"config {args.config or default_config()} ({len(db.ranges)} clips, {db.rows} rows), "
          f"model {cfg['model']}, torch {torch.__version__} on {torch.get_num_threads()} thread(s)")
    peer = stage_times(cfg, db, val, "cpu", base_batch, True, args.repeat)
    rows = []
    for device in devices:
        for batch in batches:
            for retrieval in (True, False):
                r = peer if (device, batch, retrieval) == ("cpu", base_batch, True) else \
                    stage_times(cfg, db, val, device, batch, retrieval, args.repeat)
                rate = {k: batch * r["frames"][k] / r[k] for k in ("warmup", "scheduled", "free")}
                ref = {k: base_batch * peer["frames"][k] / peer[k] for k in rate}
                rows.append([device, batch, "yes" if retrieval else "no",
                             *(f"{r[k] * 1e3:.0f} ms ({rate[k] / ref[k]:.2f}x)" for k in rate),
                             f"{r['validate']:.2f} s"])
    print_table("Seconds per training step (rollout frames per second vs the CPU at the config's batch)",
                ["device", "batch", "retrieval", "warmup step", "scheduled step", "free step", "validation"], rows)


if __name__ == "__main__":
    main()
