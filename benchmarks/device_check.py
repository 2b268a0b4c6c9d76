"""CUDA parity of kinema's torch paths: run it where torch sees a GPU.

CI and the development machine have no GPU, so nothing else in the repository exercises the
``device="cuda"`` paths. This script runs each of them against the same computation on the
CPU and prints one row per check (largest difference, tolerance, pass/fail):

- maths: quaternion, 6D and Euler functions and forward kinematics of the bundled GAMES-105
  skeleton, float64 on the GPU against float64 on the CPU;
- Mamba: the parallel scan on the GPU against the per-frame step on the CPU (float32), and a
  ``torch.compile``d step on the GPU against the eager one;
- ``kinema.nn.train.Trainer`` with mixed precision (``amp``, active on CUDA only): the loss
  falls, and its checkpoint, reloaded on the CPU, gives the GPU model's outputs;
- the retrieval controller: ``kinema train configs/retrieval_sample.toml`` for a short
  schedule with ``train.device=cuda``; the checkpoint is loaded by the CPU runtime
  (``RetrievalController``) and driven by the ``walk_run`` stick for 4 s, which must stay
  finite with bone lengths kept.

    python benchmarks/device_check.py [--out results.json]

Exit status 1 when a check fails. Results of a run: ``benchmarks/results/device_check.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from kinema import io
from kinema.data import sample_path
from kinema.maths import quat, sixd
from kinema.motion import kinematics

ROOT = Path(__file__).resolve().parents[1]


def _diff(a, b) -> float:
    return float((torch.as_tensor(a).detach().double().cpu() - torch.as_tensor(b).detach().double().cpu()).abs().max())


def maths_rows(dev: str) -> list[dict]:
    """Each maths function on (4096, 4) float64 quaternions, GPU against CPU."""
    g = torch.Generator().manual_seed(0)
    q = quat.normalize(torch.randn(4096, 4, generator=g, dtype=torch.float64))
    r = quat.normalize(torch.randn(4096, 4, generator=g, dtype=torch.float64))
    v = torch.randn(4096, 3, generator=g, dtype=torch.float64)
    cases = {
        "quat.mul": lambda a, b, w: quat.mul(a, b),
        "quat.rotate": lambda a, b, w: quat.rotate(a, w),
        "quat.log/exp": lambda a, b, w: quat.exp(quat.log(a)),
        "quat.slerp": lambda a, b, w: quat.slerp(a, b, 0.3),
        "quat.to/from_matrix": lambda a, b, w: quat.from_matrix(quat.to_matrix(a)),
        "quat.to/from_euler": lambda a, b, w: quat.to_euler(a, "zyx"),
        "6d round trip": lambda a, b, w: sixd.to_matrix(quat.to_6d(a)),
    }
    rows = []
    for name, fn in cases.items():
        cpu = fn(q, r, v)
        gpu = fn(q.to(dev), r.to(dev), v.to(dev))
        rows.append(dict(check=name, diff=_diff(gpu, cpu), tol=1e-9, device=str(gpu.device)))
    motion = io.load(sample_path("games105", "walk60.bvh"))
    rot = torch.as_tensor(np.asarray(motion.rotations), dtype=torch.float64)
    pos = torch.as_tensor(np.asarray(motion.positions), dtype=torch.float64)
    cpu = kinematics.forward(rot, pos, motion.skeleton.parents)[1]
    gpu = kinematics.forward(rot.to(dev), pos.to(dev), motion.skeleton.parents)[1]
    rows.append(dict(check=f"FK, walk60 ({rot.shape[0]} frames, {rot.shape[1]} joints), m", diff=_diff(gpu, cpu),
                     tol=1e-9, device=str(gpu.device)))
    return rows


def mamba_rows(dev: str) -> list[dict]:
    """Parallel scan (GPU) against the per-frame step (CPU), and a compiled GPU step."""
    from kinema.nn.mamba import Mamba
    torch.manual_seed(0)
    model = Mamba(24, 12, d_model=96, n_layers=2).eval()
    x = torch.randn(8, 120, 24)
    with torch.no_grad():
        state, steps = model.initial_state(8), []
        for t in range(x.shape[1]):
            y, state = model.step(state, x[:, t])
            steps.append(y)
        cpu = torch.stack(steps, 1)
        gpu_model = model.to(dev)
        gpu = gpu_model(x.to(dev), scan="parallel")
        rows = [dict(check="Mamba parallel scan (GPU) vs step (CPU)", diff=_diff(gpu, cpu), tol=1e-4, device=str(gpu.device))]
        eager, state = [], gpu_model.initial_state(8)
        for t in range(16):
            y, state = gpu_model.step(state, x[:, t].to(dev))
            eager.append(y)
        t0 = time.perf_counter()
        gpu_model.compile_step(True)
        compiled, state = [], gpu_model.initial_state(8)
        for t in range(16):
            y, state = gpu_model.step(state, x[:, t].to(dev))
            compiled.append(y)
        seconds = time.perf_counter() - t0
    rows.append(dict(check=f"Mamba compiled step vs eager (GPU; compile + 16 steps {seconds:.0f} s)",
                     diff=_diff(torch.stack(compiled, 1), torch.stack(eager, 1)), tol=1e-4, device=str(y.device)))
    return rows


def trainer_rows(dev: str, tmp: Path) -> list[dict]:
    """Mixed-precision training on the GPU; the checkpoint reloads on the CPU."""
    from kinema.nn.checkpoint import load_checkpoint
    from kinema.nn.models import MLP
    from kinema.nn.train import TrainConfig, Trainer, seed_everything
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 5, generator=g)
    y = torch.stack([x[:, 0] * x[:, 1], torch.sin(x[:, 2]), x[:, 3] - x[:, 4]], -1)
    seed_everything(0)
    model = MLP(5, 3, hidden=(256, 256)).to(dev)
    trainer = Trainer(model, (x.to(dev), y.to(dev)), None,
                      TrainConfig(epochs=6, batch_size=256, lr=3e-3, amp=True, progress=False, seed=0))
    trainer.fit()
    train = trainer.history["train"]
    path = trainer.save(tmp / "mlp.safetensors")
    cpu_model, _ = load_checkpoint(path, map_location="cpu")
    with torch.no_grad():
        diff = _diff(model.eval()(x[:64].to(dev)), cpu_model(x[:64]))
    return [dict(check=f"Trainer amp={trainer.use_amp}: loss {train[0]:.3f} -> {train[-1]:.3f}",
                 diff=train[-1] / train[0], tol=0.5, device=str(trainer.device)),
            dict(check="Trainer checkpoint reloaded on the CPU vs the GPU model", diff=diff, tol=1e-4, device="cpu")]


def controller_rows(dev: str, tmp: Path) -> list[dict]:
    """The retrieval recipe trained on the GPU, run by the CPU runtime."""
    from kinema.control.retrieval.controller import RetrievalController
    from kinema.control.retrieval.evaluate import open_database
    from kinema.control.retrieval.scenarios import run_scenarios
    from kinema.nn.checkpoint import read_metadata
    out = tmp / "controller.safetensors"
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "kinema.cli", "train", str(ROOT / "configs/retrieval_sample.toml"),
           "--set", f"train.device={dev}", "--set", "train.warmup=20", "--set", "train.scheduled=20",
           "--set", "train.free=20", "--set", "train.eval_every=20", "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    seconds = time.perf_counter() - t0
    if done.returncode:
        return [dict(check="controller training on the GPU", diff=float("inf"), tol=0.0, device=dev,
                     error=done.stderr[-2000:])]
    db = open_database(None, read_metadata(out))
    got = run_scenarios(RetrievalController(out, db), ["walk_run"], 240)["walk_run"]
    ok = bool(got["finite"]) and got["bone_length_drift_mm"] <= 1.0
    return [dict(check=f"controller: 60 steps trained on {dev} in {seconds:.0f} s; 4 s of the CPU runtime on the "
                       f"walk_run stick: finite {got['finite']}, bone drift {got['bone_length_drift_mm']:.2g} mm",
                 diff=0.0 if ok else float("inf"), tol=0.0, device="cpu")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="also write the rows as JSON here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch sees no GPU: nothing to check here (see the docstring)")
        return 0
    dev = "cuda"
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}", flush=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as t:
        for part in (maths_rows, mamba_rows, lambda d: trainer_rows(d, Path(t)), lambda d: controller_rows(d, Path(t))):
            try:
                got = part(dev)
            except Exception as e:  # one broken path must not hide the others' rows
                got = [dict(check=getattr(part, "__name__", "check"), diff=float("inf"), tol=0.0, device=dev,
                            error=f"{type(e).__name__}: {e}")]
            for row in got:
                row["ok"] = bool(row["diff"] <= row["tol"])
                print(f"{'ok  ' if row['ok'] else 'FAIL'} {row['check']}: {row['diff']:.3g} (tolerance {row['tol']:g})"
                      + (f"\n     {row['error']}" if "error" in row else ""), flush=True)
            rows += got
    if args.out:
        Path(args.out).write_text(json.dumps(dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(0),
                                                  rows=rows), indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
