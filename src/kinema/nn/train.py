"""Training loop: AdamW, cosine annealing with warm restarts, gradient clipping, AMP on GPU,
seeds, progress bars, loss plots, validation, early stopping, exact resume, and a
:meth:`Trainer.step` API for training N steps per frame inside the engine's update loop.

Data are in-memory tensors sharing their first dimension (samples), e.g. ``(x, y)``.
The loss is ``loss_fn(model, batch) -> (loss, parts)``; by default the model's own
``training_loss(*batch)``. Under ``torch.distributed`` (DDP) every rank takes its slice of
each global batch, so N ranks with batch B behave like one process with batch B.
"""
from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from kinema.errors import CheckpointError, KinemaError
from kinema.nn.checkpoint import load_checkpoint, save_checkpoint, unwrap

LossFn = Callable[[nn.Module, Sequence[torch.Tensor]], tuple[torch.Tensor, dict[str, torch.Tensor]]]


@dataclass
class TrainConfig:
    """Hyper-parameters of :class:`Trainer` (stored in checkpoints as ``config``).

    ``batch_size`` is the global batch (split across DDP ranks). ``restart_epochs``: length
    of the first cosine cycle in epochs (``restart_mult`` multiplies later cycles).
    ``patience``: epochs without a validation improvement before stopping (None: never).
    """

    epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 1e-4
    restart_epochs: int = 10
    restart_mult: int = 1
    min_lr: float = 0.0
    grad_clip: float | None = 1.0
    amp: bool = True
    seed: int = 0
    patience: int | None = None
    min_delta: float = 0.0
    drop_last: bool = True
    progress: bool = True
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (model init, dropout)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class TrainingLoss(nn.Module):
    """Wraps a model so that ``forward(*batch)`` is its ``training_loss(*batch)``.

    DDP synchronises gradients only for computations run through its ``forward``; wrap
    the model in this before ``DistributedDataParallel`` (see :mod:`kinema.nn.distributed`).
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.module = model

    def forward(self, *batch: torch.Tensor):
        return self.module.training_loss(*batch)


def default_loss(model: nn.Module, batch: Sequence[torch.Tensor]):
    """``model.training_loss(*batch)``, run through ``forward`` when ``model`` wraps it (DDP)."""
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return model(*batch)
    return unwrap(model).training_loss(*batch)


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: no decay for biases, norm weights (1-D) and ``_no_weight_decay`` tensors."""
    decay, no_decay = [], []
    for p in model.parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or getattr(p, "_no_weight_decay", False) else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


class Trainer:
    """Trains ``model`` on ``train`` tensors, validating on ``val`` once per epoch.

    Args:
        model: a module (or a DDP wrapper of one).
        train, val: tuples of tensors sharing the first dim; val may be None.
        config: :class:`TrainConfig`. loss_fn: see module docstring.
        out_dir: where :meth:`fit` writes ``loss.png``, ``history.json``, ``best.safetensors``
            and ``last.safetensors`` (nothing is written when None).
        checkpoint_meta: extra metadata for checkpoints (normalisation, loss_weights, fingerprint).
        tensorboard: also log to TensorBoard in ``out_dir`` (needs the tensorboard package).
    """

    def __init__(self, model: nn.Module, train: Sequence[torch.Tensor], val: Sequence[torch.Tensor] | None = None,
                 config: TrainConfig | None = None, loss_fn: LossFn | None = None,
                 out_dir: str | Path | None = None, checkpoint_meta: dict | None = None,
                 tensorboard: bool = False):
        self.model = model
        self.config = config or TrainConfig()
        self.loss_fn = loss_fn or default_loss
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.checkpoint_meta = dict(checkpoint_meta or {})
        self.train_data = tuple(train)
        self.val_data = None if val is None else tuple(val)
        n = self.train_data[0].shape[0]
        if any(t.shape[0] != n for t in self.train_data):
            raise ValueError("training tensors must share their first dimension")
        self.num_samples = n
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            self.rank, self.world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        else:
            self.rank, self.world = 0, 1
        cfg = self.config
        if cfg.batch_size % self.world:
            raise ValueError(f"batch_size {cfg.batch_size} is not divisible by the {self.world} ranks")
        self.steps_per_epoch = max(1, n // cfg.batch_size if cfg.drop_last else math.ceil(n / cfg.batch_size))
        self.device = next(unwrap(model).parameters()).device
        self.optimizer = torch.optim.AdamW(parameter_groups(unwrap(model), cfg.weight_decay), lr=cfg.lr)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
            self.optimizer, T_0=max(1, cfg.restart_epochs * self.steps_per_epoch), T_mult=cfg.restart_mult,
            eta_min=cfg.min_lr)
        self.use_amp = cfg.amp and self.device.type == "cuda"
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.epoch = 0
        self.global_step = 0
        self.position = 0  # batch index within the epoch
        self.permutation: torch.Tensor | None = None
        self.best_val = math.inf
        self.bad_epochs = 0
        self.stopped = False
        self.history: dict[str, list[float]] = {"step_loss": [], "train": [], "val": [], "lr": []}
        self._epoch_losses: list[float] = []
        self._epoch_parts: dict[str, list[float]] = {}
        self._writer = None
        if tensorboard and self.out_dir is not None and self.rank == 0:
            try:
                from torch.utils.tensorboard import SummaryWriter  # optional dependency
            except ImportError as e:
                raise KinemaError("tensorboard=True needs the tensorboard package "
                                  "(pip install tensorboard)") from e
            self._writer = SummaryWriter(str(self.out_dir / "tensorboard"))

    # ------------------------------------------------------------------ batches
    def _next_batch(self) -> tuple[torch.Tensor, ...]:
        cfg = self.config
        if self.permutation is None or self.position >= self.steps_per_epoch:
            self.permutation = torch.randperm(self.num_samples, generator=self.generator)
            self.position = 0
        idx = self.permutation[self.position * cfg.batch_size:(self.position + 1) * cfg.batch_size]
        idx = idx[self.rank::self.world]
        return tuple(t[idx].to(self.device, non_blocking=True) for t in self.train_data)

    # ------------------------------------------------------------------ steps
    def step(self) -> float:
        """One optimisation step on the next batch; returns its loss (mean over ranks).

        Ends the epoch (validation, early stopping) after the epoch's last batch, so calling
        ``step()`` N times per frame from an update loop is the same as :meth:`fit`.
        """
        cfg = self.config
        self.model.train()
        batch = self._next_batch()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_amp):
            loss, parts = self.loss_fn(self.model, batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        value = loss.detach().float()
        if self.world > 1:
            torch.distributed.all_reduce(value)
            value /= self.world
        value = float(value)
        if not math.isfinite(value):
            raise FloatingPointError(f"training loss became {value} at step {self.global_step}")
        self.history["step_loss"].append(value)
        self._epoch_losses.append(value)
        for name, part in (parts or {}).items():
            self._epoch_parts.setdefault(name, []).append(float(part))
        self.global_step += 1
        self.position += 1
        if self._writer is not None:
            self._writer.add_scalar("loss/step", value, self.global_step)
        if self.position >= self.steps_per_epoch:
            self._end_epoch()
        return value

    @torch.no_grad()
    def validate(self) -> float | None:
        """Mean validation loss over ``val`` in batches (eval mode), or None without val data."""
        if self.val_data is None:
            return None
        self.model.eval()
        model = unwrap(self.model)
        total, count = 0.0, 0
        n = self.val_data[0].shape[0]
        for i in range(0, n, self.config.batch_size):
            batch = tuple(t[i:i + self.config.batch_size].to(self.device) for t in self.val_data)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_amp):
                loss, _ = self.loss_fn(model, batch)
            total += float(loss) * batch[0].shape[0]
            count += batch[0].shape[0]
        self.model.train()
        return total / count

    def _end_epoch(self) -> None:
        cfg = self.config
        self.history["train"].append(float(np.mean(self._epoch_losses)))
        self.history["lr"].append(self.optimizer.param_groups[0]["lr"])
        self._epoch_losses = []
        for name, values in self._epoch_parts.items():  # e.g. codebook perplexity (rank 0's)
            self.history.setdefault(f"train_{name}", []).append(float(np.mean(values)))
        self._epoch_parts = {}
        val = self.validate()
        self.epoch += 1
        monitored = val if val is not None else self.history["train"][-1]
        if val is not None:
            self.history["val"].append(val)
            if self._writer is not None:
                self._writer.add_scalar("loss/val", val, self.epoch)
        if monitored < self.best_val - cfg.min_delta:
            self.best_val = monitored
            self.bad_epochs = 0
            if self.out_dir is not None and self.rank == 0:
                self.save(self.out_dir / "best.safetensors")
        else:
            self.bad_epochs += 1
            if cfg.patience is not None and self.bad_epochs >= cfg.patience:
                self.stopped = True

    # ------------------------------------------------------------------ loop
    def fit(self, epochs: int | None = None) -> dict[str, list[float]]:
        """Train until ``epochs`` (default ``config.epochs``) epochs are done in total or early
        stopping triggers; returns the history. Writes plots/checkpoints into ``out_dir``."""
        from tqdm.auto import tqdm

        target = self.config.epochs if epochs is None else epochs
        show = self.config.progress and self.rank == 0
        while self.epoch < target and not self.stopped:
            remaining = self.steps_per_epoch - self.position
            bar = tqdm(total=remaining, desc=f"epoch {self.epoch + 1}/{target}", disable=not show, leave=False)
            epoch = self.epoch
            while self.epoch == epoch:
                loss = self.step()
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4g}")
            bar.close()
            if self.out_dir is not None and self.rank == 0:
                self.write_outputs()
        return self.history

    def write_outputs(self) -> None:
        """Write ``loss.png``, ``history.json`` and ``last.safetensors`` into ``out_dir``."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        plot_losses(self.history, self.out_dir / "loss.png")
        (self.out_dir / "history.json").write_text(json.dumps(self.history))
        self.save(self.out_dir / "last.safetensors")

    # ------------------------------------------------------------------ resume
    def state(self) -> dict[str, Any]:
        """Everything besides the weights needed to continue exactly where training is."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "permutation": self.permutation,
            "counters": {"epoch": self.epoch, "global_step": self.global_step, "position": self.position,
                         "best_val": self.best_val, "bad_epochs": self.bad_epochs, "stopped": self.stopped},
            "history": self.history,
            "epoch_losses": self._epoch_losses,
            "epoch_parts": self._epoch_parts,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` (the model's weights are restored separately)."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.permutation = state["permutation"]
        c = state["counters"]
        self.epoch, self.global_step, self.position = c["epoch"], c["global_step"], c["position"]
        self.best_val, self.bad_epochs, self.stopped = c["best_val"], c["bad_epochs"], c["stopped"]
        self.history = {k: list(v) for k, v in state["history"].items()}
        self._epoch_losses = list(state["epoch_losses"])
        self._epoch_parts = {k: list(v) for k, v in state.get("epoch_parts", {}).items()}

    def save(self, path: str | Path) -> Path:
        """Checkpoint the model with the training state and config (atomic)."""
        return save_checkpoint(path, self.model, training_state=self.state(),
                               config=asdict(self.config), **self.checkpoint_meta)

    @classmethod
    def resume(cls, path: str | Path, train: Sequence[torch.Tensor], val: Sequence[torch.Tensor] | None = None,
               loss_fn: LossFn | None = None, out_dir: str | Path | None = None,
               device: str | torch.device = "cpu", **overrides: Any) -> Trainer:
        """A trainer continuing the run saved at ``path`` (model rebuilt from the checkpoint).

        ``overrides`` replace config fields (e.g. ``epochs`` to train longer)."""
        model, meta = load_checkpoint(path, map_location=device)
        if "training_state" not in meta:
            raise CheckpointError(f"{path}: checkpoint holds no training state to resume from")
        config = TrainConfig.from_dict({**(meta.get("config") or {}), **overrides})
        keep = {k: meta[k] for k in ("normalisation", "loss_weights", "fingerprint") if meta.get(k) is not None}
        trainer = cls(model.train(), train, val, config, loss_fn, out_dir, keep)
        trainer.load_state(meta["training_state"])
        return trainer


def plot_losses(history: dict[str, list[float]], path: str | Path, val_label: str = "validation") -> Path:
    """Write a PNG of the per-step training loss and per-epoch train/val losses (log scale).

    ``history`` holds ``step_loss`` (per step), ``train`` and ``val`` (per epoch) and
    optionally ``epoch_step``, the step each epoch ended at (default: evenly spread over
    the steps)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    steps = history.get("step_loss", [])
    if steps:
        ax.plot(np.arange(1, len(steps) + 1), steps, color="0.7", lw=0.8, label="train (step)")
    n_ep = len(history.get("train", []))
    if n_ep and (steps or history.get("epoch_step")):
        x = (np.asarray(history["epoch_step"], np.float64) if history.get("epoch_step")
             else len(steps) / n_ep * np.arange(1, n_ep + 1))
        ax.plot(x, history["train"], "o-", label="train (epoch)")
        if history.get("val"):
            ax.plot(x[:len(history["val"])], history["val"], "s-", label=val_label)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    values = list(steps) + list(history.get("train", [])) + list(history.get("val", []))
    if values and min(values) > 0:
        ax.set_yscale("log")
    ax.legend(loc="upper right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
