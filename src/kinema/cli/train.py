"""``kinema train CONFIG``: train the retrieval-augmented controller from a config file."""
from __future__ import annotations

import argparse
import json

HELP = "train the retrieval-augmented Mamba controller from a TOML/JSON config"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="training config (.toml or .json), e.g. configs/retrieval_sample.toml")
    parser.add_argument("-o", "--out", help="checkpoint path (default: the config's 'out')")
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run from its .partial checkpoint (same config)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=JSON",
                        help="override a config value, e.g. --set train.free=0 --set model.use_retrieval=false")


def run(args: argparse.Namespace) -> int:
    from kinema.control.retrieval.training import apply_overrides, load_config, train

    cfg = apply_overrides(load_config(args.config), args.set)
    path, meta = train(cfg, args.out, resume=args.resume)
    h = meta["history"]
    print(f"wrote {path} (database {meta['fingerprint']}, {meta['parameters']['total']:,} parameters, "
          f"{meta['train_seconds']:.0f} s); best epoch {h['best']['epoch']}: {json.dumps(h['best'])}")
    return 0
