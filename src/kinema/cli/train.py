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
    board = TensorBoardLog.open(out.with_suffix(".tensorboard"))
    try:
        path, meta = train(cfg, out, resume=args.resume, on_validation=board)
    except KeyboardInterrupt:
        partial = partial_path(out)
        where = (f"the state of the last validation is in {partial}; run the same command with --resume to "
                 "continue" if partial.is_file() else "stopped before the first validation, nothing saved")
        print(f"kinema train: interrupted; {where}", file=sys.stderr)
        return 130
    finally:
        if board is not None:
            board.close()
    h = meta["history"]
    curve = plot_history(h["epochs"], path.with_suffix(".loss.png"))
    print(f"wrote {path} (database {meta['fingerprint']}, {meta['parameters']['total']:,} parameters, "
          f"{meta['train_seconds']:.0f} s) and its loss curve {curve}"
          + (f" and TensorBoard logs {board.logdir}" if board is not None else "")
          + f"; best epoch {h['best']['epoch']}: {json.dumps(h['best'])}")
    return 0


class TensorBoardLog:
    """Live TensorBoard scalars of a training run in ``logdir`` (``tensorboard --logdir
    DIR`` shows the curves while it trains): called with each validation's history record,
    it writes, against the training step, ``train/loss``, ``train/epoch`` and
    ``validation/<key>`` for every number the validation recorded (free-running errors,
    rates, ...), and flushes them to the event file at once. Events of an earlier run in
    ``logdir`` are removed when it opens (a resumed run replays its restored records)."""

    def __init__(self, logdir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        for old in self.logdir.glob("events.out.tfevents.*"):
            old.unlink()
        self.writer = SummaryWriter(str(self.logdir))

    @classmethod
    def open(cls, logdir: Path) -> TensorBoardLog | None:
        """The log, or None (and nothing written) when the ``tensorboard`` package is not installed."""
        import importlib.util
        return cls(logdir) if importlib.util.find_spec("tensorboard") is not None else None

    def __call__(self, rec: dict) -> None:
        step = int(rec["step"])
        for key, value in rec.items():
            if key in ("step", "seconds") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            tag = {"train_loss": "train/loss", "epoch": "train/epoch"}.get(key, f"validation/{key}")
            self.writer.add_scalar(tag, float(value), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def plot_history(epochs: list[dict], path: Path) -> Path:
    """The loss-curve PNG of a training history: training loss and the validation's
    free-running error per validation, against the step."""
    from kinema.nn.train import plot_losses
    val_key = "fr_with" if all("fr_with" in e for e in epochs) else "fr_without"
    return plot_losses({"train": [e["train_loss"] for e in epochs], "val": [e[val_key] for e in epochs],
                        "epoch_step": [e["step"] for e in epochs]}, path,
                       val_label=f"validation ({val_key}: free-running error)")
