"""``kinema train CONFIG``: train the retrieval-augmented controller from a config file."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "train the retrieval-augmented Mamba controller from a TOML/JSON config"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="training config (.toml or .json), e.g. configs/retrieval_sample.toml")
    parser.add_argument("-o", "--out", help="checkpoint path (default: the config's 'out')")
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run from its .partial checkpoint (same config)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=JSON",
                        help="override a config value, e.g. --set train.free=0 --set model.use_retrieval=false")


def run(args: argparse.Namespace) -> int:
    from kinema.control.retrieval.training import apply_overrides, load_config, partial_path, train

    cfg = apply_overrides(load_config(args.config), args.set)
    out = Path(args.out or cfg.get("out", "model.safetensors"))
    try:
        path, meta = train(cfg, out, resume=args.resume)
    except KeyboardInterrupt:
        partial = partial_path(out)
        where = (f"the state of the last validation is in {partial}; run the same command with --resume to "
                 "continue" if partial.is_file() else "stopped before the first validation, nothing saved")
        print(f"kinema train: interrupted; {where}", file=sys.stderr)
        return 130
    h = meta["history"]
    curve = plot_history(h["epochs"], path.with_suffix(".loss.png"))
    logs = write_tensorboard(h["epochs"], path.with_suffix(".tensorboard"))
    print(f"wrote {path} (database {meta['fingerprint']}, {meta['parameters']['total']:,} parameters, "
          f"{meta['train_seconds']:.0f} s) and its loss curve {curve}"
          + (f" and TensorBoard logs {logs}" if logs is not None else "")
          + f"; best epoch {h['best']['epoch']}: {json.dumps(h['best'])}")
    return 0


def write_tensorboard(epochs: list[dict], logdir: Path) -> Path | None:
    """The training history as TensorBoard scalars in ``logdir`` (``tensorboard --logdir
    DIR``), against the training step: ``train/loss`` and ``validation/<key>`` for every
    number a validation recorded (free-running errors, rates, ...), plus ``train/epoch``.
    Events of an earlier run in ``logdir`` are replaced. Returns ``logdir``, or None (and
    writes nothing) when the ``tensorboard`` package is not installed."""
    import importlib.util
    if importlib.util.find_spec("tensorboard") is None:
        return None
    from torch.utils.tensorboard import SummaryWriter

    logdir.mkdir(parents=True, exist_ok=True)
    for old in logdir.glob("events.out.tfevents.*"):
        old.unlink()
    with SummaryWriter(str(logdir)) as writer:
        for rec in epochs:
            step = int(rec["step"])
            for key, value in rec.items():
                if key in ("step", "seconds") or isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                tag = {"train_loss": "train/loss", "epoch": "train/epoch"}.get(key, f"validation/{key}")
                writer.add_scalar(tag, float(value), step)
    return logdir


def plot_history(epochs: list[dict], path: Path) -> Path:
    """The loss-curve PNG of a training history: training loss and the validation's
    free-running error per validation, against the step."""
    from kinema.nn.train import plot_losses
    val_key = "fr_with" if all("fr_with" in e for e in epochs) else "fr_without"
    return plot_losses({"train": [e["train_loss"] for e in epochs], "val": [e[val_key] for e in epochs],
                        "epoch_step": [e["step"] for e in epochs]}, path,
                       val_label=f"validation ({val_key}: free-running error)")
