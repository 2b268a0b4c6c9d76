"""``kinema serve [PATH | DEMO]``: show motions or a demo in a web browser (viser on localhost).

PATH is a motion file (BVH, npz, GLB/glTF, FBX) or a folder of them (the GUI's clip chooser
lists every file); DEMO names a demo in ``kinema demo --list`` that can be served (it defines
``served_clips(args) -> list[ServedClip]``; options after the name go to the demo).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from kinema.cli.demo import demo_names, demo_parser
from kinema.data import data_path
from kinema.errors import KinemaError
from kinema.serve import MotionViewer, ServedClip

HELP = "serve motions or a demo to a web browser (skinned meshes, trajectories, GUI controls)"

MOTION_SUFFIXES = {".bvh", ".npz", ".glb", ".gltf", ".fbx"}


def _serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--character", default=None, help="character to skin (GLB, FBX or character.bin)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 for a LAN)")
    parser.add_argument("--port", type=int, default=8080, help="port (0: any free one)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long (scripted runs)")
    parser.add_argument("--paused", action="store_true", help="start paused on frame 0")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="motion file, folder of motion files, or a demo name")
    _serve_options(parser)
    parser.add_argument("demo_args", nargs=argparse.REMAINDER,
                        help="options after the target: kinema serve's own, the rest go to a served demo")


def clips_for(target: str, character: str | None = None, demo_args: list[str] | None = None) -> list:
    """The :class:`~kinema.serve.ServedClip` list for a file, a folder or a demo name."""
    path = Path(target)
    if demo_args and (path.exists() or target not in demo_names()):
        raise KinemaError(f"kinema serve {target}: unknown options {' '.join(demo_args)}")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in MOTION_SUFFIXES)
        if not files:
            raise KinemaError(f"{path}: no motion files ({', '.join(sorted(MOTION_SUFFIXES))})")
        return [ServedClip.load(p, character) for p in files]
    if path.exists():
        return [ServedClip.load(path, character)]
    if target in demo_names():
        mod, parser = demo_parser(target)
        if not hasattr(mod, "served_clips"):
            raise KinemaError(f"demo {target!r} cannot be served (it defines no served_clips)")
        parser.prog = f"kinema serve {target}"
        return list(mod.served_clips(parser.parse_args(demo_args or [])))
    raise FileNotFoundError(f"no such file, folder or demo: {target}")


def run(args: argparse.Namespace) -> int:
    own = argparse.ArgumentParser(add_help=False)
    _serve_options(own)
    late, rest = own.parse_known_args(args.demo_args or [])
    for name, value in vars(late).items():          # serve options given after the target
        if value != own.get_default(name):
            setattr(args, name, value)
    args.demo_args = rest
    clips = clips_for(data_path(args.target), data_path(args.character), args.demo_args)
    viewer = MotionViewer(clips, host=args.host, port=args.port, playing=not args.paused)
    print(f"kinema serve: {len(clips)} clip(s) at http://{args.host}:{viewer.port} (Ctrl-C to stop)", flush=True)
    try:
        viewer.serve_forever(args.seconds)
    finally:
        viewer.stop()
    return 0
