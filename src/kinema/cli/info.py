"""``kinema info PATH [--json]``: what a motion file holds."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from kinema.data import data_path
from kinema.errors import MissingFileError
from kinema.io import format_module

HELP = "show a motion file's format, skeleton, frames, fps and duration"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="motion file (BVH, npz, GLB/glTF, FBX)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (keys format, joints, parents, frames, fps, duration, ...)")
    parser.add_argument("--animation", default=None,
                        help="animation to describe, for files with several (default: the first)")


def describe(path: str | Path, animation: str | None = None) -> dict:
    """Facts about a motion file: ``format``, ``joints`` (names), ``parents``, ``frames``,
    ``fps``, ``duration`` (seconds), ``name``, plus what the format module's optional
    ``info(path)`` adds (e.g. ``animations``, ``has_mesh``)."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError("no such file", path)
    module = format_module(path)
    out: dict = {"file": str(path), "format": path.suffix.lower().lstrip(".")}
    if hasattr(module, "info"):
        out.update(module.info(path))
    motion = module.load(path, animation=animation) if animation is not None else module.load(path)
    out.update({
        "name": motion.name,
        "joints": list(motion.joint_names),
        "parents": [int(p) for p in motion.parents],
        "frames": motion.num_frames,
        "fps": motion.fps,
        "duration": motion.duration,
    })
    return out


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _tree(joints: list[str], parents: list[int]) -> list[str]:
    depth = []
    for p in parents:
        depth.append(0 if p < 0 else depth[p] + 1)
    return [f"  {'  ' * d}{name}" for name, d in zip(joints, depth)]


def run(args: argparse.Namespace) -> int:
    facts = describe(data_path(args.path), args.animation)
    if args.json:
        print(json.dumps(facts, default=_json_default))
        return 0
    main_keys = ["file", "format", "name", "frames", "fps", "duration"]
    for k in main_keys:
        v = facts[k]
        if k == "duration":
            v = f"{v:.3f} s"
        elif k == "fps":
            v = f"{v:g}"
        print(f"{k:10s} {v}")
    for k, v in facts.items():
        if k not in main_keys and k not in ("joints", "parents"):
            print(f"{k:10s} {json.dumps(v, default=_json_default) if isinstance(v, (list, dict)) else v}")
    print(f"{'joints':10s} {len(facts['joints'])}")
    print("\n".join(_tree(facts["joints"], facts["parents"])))
    return 0
