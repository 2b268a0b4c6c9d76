"""kinema.nn benchmarks (CPU, eager PyTorch, at most 2 threads).

1. Mamba ``step`` latency for the published configuration (4 layers, d_model 256,
   d_state 16, 163 -> 153) at batch 1 and 256, eager and ``compile_step`` (inductor), with a
   new state per frame or ``inplace=True``, against re-running the scan over a 16-frame
   window for every new frame (what a model without an O(1) recurrence would have to do).
   Wall and process CPU time are both printed: on a shared machine the wall time includes
   time the process waited for a core.
2. Training throughput in frames per second (forward + backward + AdamW) with the
   sequential scan and the parallel scan, against training through the per-step recurrence.
3. Dynamic int8 quantisation against float32: latency and relative output error on real
   LaFAN1 poses (bundled sample when the shared data is absent).

Run: ``.venv/bin/python benchmarks/run.py nn`` or ``python benchmarks/bench_nn.py [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

import kinema
from common import print_table, timeit
from kinema.data import sample_path, shared_path
from kinema.nn.mamba import Mamba
from kinema.nn.models import MLP
from kinema.nn.quantize import quantize_dynamic

WINDOW = 16  # frames re-scanned per new frame by the peer
CONFIG = dict(d_model=256, n_layers=4, d_state=16, d_conv=4, d_inner=512, dt_rank=16)


def _poses(n: int) -> torch.Tensor:
    """(n, 163) real inputs: LaFAN1 local quaternions, hips height, padded by repetition."""
    path = shared_path("lafan1", "walk4_subject1.bvh") or sample_path("cmu", "02_01.bvh")
    m = kinema.load(path)
    pose = np.concatenate([m.rotations.reshape(m.num_frames, -1), m.positions[:, 0]], -1)
    reps = int(np.ceil(163 / pose.shape[1]))
    pose = np.tile(pose, (1, reps))[:, :163]
    return torch.tensor(pose[:n], dtype=torch.float32)


def _step_fn(model: torch.nn.Module, batch: int, x: torch.Tensor, inplace: bool = False):
    state = {"s": model.initial_state(batch)}

    def run():
        _, state["s"] = model.step(state["s"], x, inplace=inplace)
    return run


def cpu_time(fn, calls: int, repeat: int = 3) -> float:
    """Process CPU seconds per call of ``fn``, best of ``repeat`` (with one thread: the wall
    time the call would take on an idle core, since time spent descheduled by other
    processes is not counted; with two threads it sums both threads)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - t0) / calls)
    return best


def _compiled_copy(model: Mamba) -> Mamba | None:
    """A copy of ``model`` with :meth:`Mamba.compile_step` on, or None when inductor cannot
    compile here (the step then warns and runs eagerly; a row would be mislabelled)."""
    import warnings
    twin = Mamba(**model.hparams).eval()
    twin.load_state_dict(model.state_dict())
    twin.compile_step()
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            for batch in (1, 256):
                for inplace in (False, True):
                    twin.step(twin.initial_state(batch), torch.zeros(batch, 163), inplace=inplace)
        except RuntimeWarning as exc:
            print(f"torch.compile unavailable, compiled rows skipped: {exc}")
            return None
    return twin


def bench_step(repeat: int, compile_step: bool) -> None:
    torch.manual_seed(0)
    model = Mamba(163, 153, **CONFIG).eval()
    t0 = time.perf_counter()
    compiled = _compiled_copy(model) if compile_step else None
    if compiled is not None:
        print(f"compile_step: {time.perf_counter() - t0:.1f} s to compile 4 graphs (batch 1 and 256, "
              f"out of place and in place)")
    variants = [("eager", model, False), ("eager, inplace state", model, True)]
    if compiled is not None:
        variants += [("compiled", compiled, False), ("compiled, inplace state", compiled, True)]
    rows = []
    with torch.inference_mode():
        for batch, target_ms in ((1, 1.0), (256, 10.0)):
            x = torch.randn(batch, 163)
            window = torch.randn(batch, WINDOW, 163)
            t_win = timeit(lambda: model(window), repeat=max(3, repeat // 2), warmup=1)
            for name, m, inplace in variants:
                t_step = timeit(_step_fn(m, batch, x, inplace), repeat=repeat, warmup=3, min_time=0.2)
                c_step = cpu_time(_step_fn(m, batch, x, inplace), 200 if batch == 1 else 20)
                rows.append([batch, name, t_step * 1e3, c_step * 1e3, target_ms,
                             "yes" if t_step * 1e3 <= target_ms else "NO",
                             "yes" if c_step * 1e3 <= target_ms else "NO", t_win * 1e3, t_win / t_step])
    print_table("Mamba step latency per frame (ms), published config, fp32, inference_mode",
                ["batch", "step", "wall ms", "process CPU ms", "target ms", "met (wall)",
                 "met (CPU)", f"rescan {WINDOW} frames ms", "speed-up x"], rows)


def bench_training(repeat: int, batch: int, length: int) -> None:
    torch.manual_seed(0)
    model = Mamba(163, 153, **CONFIG)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, length, 163)
    y = torch.randn(batch, length, 153)

    def train(run):
        def fn():
            loss = torch.nn.functional.mse_loss(run(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return fn

    runs = {"sequential scan": lambda v: model(v, scan="sequential"),
            "parallel scan": lambda v: model(v, scan="parallel"),
            "per-step recurrence": model.rollout_steps}
    times = {name: timeit(train(fn), repeat=repeat, warmup=1) for name, fn in runs.items()}
    frames = batch * length
    base = times["per-step recurrence"]
    rows = [[name, t * 1e3, frames / t, base / t] for name, t in times.items()]
    print_table(f"Mamba training throughput, published config, batch {batch} x {length} frames",
                ["method", "ms / step", "frames / s", "x vs per-step"], rows)


def bench_quantized(repeat: int) -> None:
    torch.manual_seed(0)
    poses = _poses(256)
    rows = []
    mlp = MLP(163, 153, hidden=(512, 512)).eval()
    mlp.input_norm.fit(poses)
    mamba = Mamba(163, 153, **CONFIG).eval()
    mamba.input_norm.fit(poses)
    with torch.inference_mode():
        for name, model in (("MLP 163-512-512-153", mlp), ("Mamba step", mamba)):
            q = quantize_dynamic(model)
            for batch in (1, 256):
                x = poses[:batch]
                if name == "Mamba step":
                    ff, fq = _step_fn(model, batch, x), _step_fn(q, batch, x)
                    yf = model.step(model.initial_state(batch), x)[0]
                    yq = q.step(q.initial_state(batch), x)[0]
                else:
                    ff, fq = (lambda m=model, v=x: m(v)), (lambda m=q, v=x: m(v))
                    yf, yq = model(x), q(x)
                tf = timeit(ff, repeat=repeat, warmup=3, min_time=0.2)
                tq = timeit(fq, repeat=repeat, warmup=3, min_time=0.2)
                err = float((yq - yf).norm() / yf.norm())
                rows.append([name, batch, tf * 1e3, tq * 1e3, tf / tq, f"{err:.2e}"])
    print_table("Dynamic int8 quantisation vs float32 (ms per call)",
                ["model", "batch", "float32 ms", "int8 ms", "x speed-up", "rel. error"], rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="kinema.nn benchmarks")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller training batch")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (at most 2)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile step rows")
    parser.add_argument("--step-only", action="store_true", help="only the Mamba step latency table")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, args.threads))
    repeat = 3 if args.quick else 7
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
          f"load average {load:.1f} (intra-op threads spin badly when the CPUs are shared: "
          f"compare --threads 1)")
    bench_step(repeat, not args.no_compile)
    if args.step_only:
        return
    bench_training(max(2, repeat // 2), batch=4 if args.quick else 8, length=64)
    bench_quantized(repeat)


if __name__ == "__main__":
    main()
