"""``kinema card CHECKPOINT``: the model card (markdown) from metadata and an evaluation."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from kinema.data import portable_path

HELP = "write the markdown model card of a retrieval controller checkpoint"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="controller checkpoint (.safetensors)")
    parser.add_argument("--eval", dest="eval_json", help="JSON written by `kinema eval --out` (default: "
                                                         "CHECKPOINT with suffix .eval.json when present)")
    parser.add_argument("-o", "--out", help="write the card here (default: print it)")


def run(args: argparse.Namespace) -> int:
    from kinema.control.retrieval.card import model_card
    from kinema.nn.checkpoint import read_metadata

    meta = read_metadata(args.checkpoint, require=("config",))
    path = Path(args.eval_json) if args.eval_json else Path(args.checkpoint).with_suffix(".eval.json")
    result = json.loads(path.read_text()) if path.is_file() else None
    if args.eval_json and result is None:
        raise FileNotFoundError(f"{path}: evaluation JSON not found")
    card = model_card(meta, result, Path(args.checkpoint).name, out=portable_path(args.checkpoint))
    if args.out:
        Path(args.out).write_text(card)
        print(f"wrote {args.out}")
    else:
        print(card)
    return 0
