"""``kinema retarget SRC --to TARGET -o OUT``: put a motion on another skeleton or character."""
from __future__ import annotations

import argparse
from pathlib import Path

import kinema
from kinema.data import data_path
from kinema.errors import KinemaError

HELP = "retarget a motion onto another skeleton or character (joints matched by body role)"

CHARACTER_SUFFIXES = {".glb", ".gltf", ".fbx", ".bin"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SRC", help="motion to retarget (BVH, npz, GLB/glTF, FBX)")
    parser.add_argument("--to", required=True, metavar="TARGET",
                        help="character (GLB, glTF, FBX, character.bin: its bind pose) or a motion of the "
                             "target skeleton (BVH, npz: its frames give the skeleton's poses)")
    parser.add_argument("-o", "--out", required=True, metavar="OUT",
                        help="output motion file (.npz, .bvh or .glb, by suffix)")
    parser.add_argument("--scale", type=float, default=None, metavar="S",
                        help="metres per unit of a BVH source (default: detected from its height)")
    parser.add_argument("--no-feet", dest="feet", action="store_false",
                        help="do not keep planted feet on the floor (no hips correction, no leg IK)")


def load_target(path: str | Path):
    """A Character (files with a skin) or a Motion (motion files) to retarget onto."""
    path = Path(path)
    if path.suffix.lower() in CHARACTER_SUFFIXES:
        character = kinema.load_character(path)
        if character.has_mesh or path.suffix.lower() == ".bin":
            return character
    return kinema.load(path)


def run(args: argparse.Namespace) -> int:
    from kinema.retargeting import retarget

    if args.scale is not None and not args.scale > 0:
        raise KinemaError("--scale must be positive")
    args.source, args.to = data_path(args.source), data_path(args.to)
    options = {"scale": args.scale} if args.scale is not None and Path(args.source).suffix.lower() == ".bvh" else {}
    motion = kinema.load(args.source, **options)
    target = load_target(args.to)
    out = retarget(motion, target, feet=args.feet)
    path = kinema.save(out, args.out)
    meta = out.metadata["retarget"]
    print(f"retargeted {motion.name} ({motion.num_joints} joints) onto {Path(args.to).name} "
          f"({out.num_joints} joints): {len(meta['matched'])} body parts matched, root scaled by "
          f"{meta['scale']:.3f} (leg {meta['source_leg']:.3f} -> {meta['target_leg']:.3f} m); wrote {path}")
    return 0
