"""Data-parallel training with ``torch.distributed`` (DDP), e.g. on CPU with gloo.

Launch with torchrun; every rank runs the same script, and :class:`kinema.nn.train.Trainer`
gives each rank its slice of every global batch, so N ranks reproduce one process::

    python -m torch.distributed.run --nproc_per_node 2 -m kinema.nn.distributed \\
        --data windows.npz --steps 100 --batch 64 --out history.json

``windows.npz`` holds float arrays ``x`` (S, in) and ``y`` (S, out); the example trains an
:class:`~kinema.nn.models.MLP` and rank 0 writes the per-step loss history as JSON.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from kinema.nn.train import TrainingLoss


def init_from_env(backend: str | None = None) -> tuple[int, int]:
    """Join the process group described by torchrun's environment (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT); gloo on CPU, nccl on GPU by default. Returns (rank, world)."""
    if not torch.distributed.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        torch.distributed.init_process_group(backend)
    return torch.distributed.get_rank(), torch.distributed.get_world_size()


def wrap(model: nn.Module) -> nn.parallel.DistributedDataParallel:
    """DDP around ``TrainingLoss(model)``, so ``trainer`` calls go through DDP's forward."""
    device_ids = [model_device.index] if (model_device := next(model.parameters()).device).type == "cuda" else None
    return nn.parallel.DistributedDataParallel(TrainingLoss(model), device_ids=device_ids)


def train_mlp(x: torch.Tensor, y: torch.Tensor, steps: int, batch: int, seed: int = 0,
              hidden: tuple[int, ...] = (64, 64), lr: float = 1e-3) -> list[float]:
    """Train an MLP for ``steps`` steps (DDP when a process group is up); per-step losses."""
    from kinema.nn.models import MLP
    from kinema.nn.train import TrainConfig, Trainer, seed_everything

    seed_everything(seed)
    model = MLP(x.shape[1], y.shape[1], hidden=hidden)
    model.input_norm.fit(x)
    model.output_norm.fit(y)
    if torch.distributed.is_initialized():
        model = wrap(model)
    trainer = Trainer(model, (x, y), None, TrainConfig(batch_size=batch, lr=lr, seed=seed, progress=False,
                                                        restart_epochs=1000))
    for _ in range(steps):
        trainer.step()
    return trainer.history["step_loss"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="npz with float arrays x and y")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32, help="global batch (split across ranks)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    parser.add_argument("--out", required=True, help="JSON file for the loss history (rank 0)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    distributed = "WORLD_SIZE" in os.environ
    rank, world = init_from_env() if distributed else (0, 1)
    with np.load(args.data, allow_pickle=False) as data:
        x = torch.tensor(data["x"], dtype=torch.float32)
        y = torch.tensor(data["y"], dtype=torch.float32)
    history = train_mlp(x, y, args.steps, args.batch, args.seed, lr=args.lr)
    if rank == 0:
        Path(args.out).write_text(json.dumps({"world_size": world, "step_loss": history}))
    if distributed:
        # every rank done, and the DDP reducer (reference cycles) freed while the process
        # group is still alive: tearing gloo down under a live reducer aborted a rank
        # ("terminate called without an active exception") now and then
        torch.distributed.barrier()
        gc.collect()
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
