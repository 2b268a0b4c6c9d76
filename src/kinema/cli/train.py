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


def apply_overrides(cfg: dict, overrides: list[str]) -> dict:
    from kinema.errors import KinemaError

    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise KinemaError(f"--set expects SECTION.KEY=VALUE, got {item!r}")
        section, name = key.split(".", 1)
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        cfg.setdefault(section, {})[name] = parsed
    return cfg


def run(args: argparse.Namespace) -> int:
    from kinema.control.retrieval.training import load_config, train

    cfg = apply_overrides(load_config(args.config), args.set)
    path, meta = train(cfg, args.out, resume=args.resume)
    h = meta["history"]
    print(f"wrote {path} (database {meta['fingerprint']}, {meta['parameters']['total']:,} parameters, "
          f"{meta['train_seconds']:.0f} s); best epoch {h['best']['epoch']}: {json.dumps(h['best'])}")
    return 0
