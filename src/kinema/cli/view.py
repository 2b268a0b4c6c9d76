"""``kinema view PATH_OR_DIR``: the motion editor (clip browser, timeline, mirror, feature
overlays, cameras, effects)."""
from __future__ import annotations

import argparse
import sys

from kinema.cli.render import add_effect_arguments, parse_size
from kinema.data import data_path
from kinema.errors import KinemaError

HELP = ("open the motion editor on a motion file or a folder of them: clip browser, timeline, "
        "mirror, feature overlays (root, trajectories, velocities, contacts, phases), cameras, effects")


# kinema.render.editor.overlays.OVERLAYS / DEFAULT_OVERLAYS, spelled out so that building the
# parser does not import raylib (a test keeps them equal)
OVERLAY_NAMES = ("root", "trajectory", "joints", "velocities", "contacts", "phases", "plots", "skeleton", "body")
DEFAULT_OVERLAY_NAMES = ("root", "trajectory", "joints", "velocities", "contacts", "phases", "plots", "body")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH_OR_DIR",
                        help="motion file (BVH, npz, GLB/glTF, FBX) or a folder searched recursively")
    parser.add_argument("--character", default=None,
                        help="character to skin (GLB, FBX or character.bin); default: a procedural body")
    parser.add_argument("--clip", default=None,
                        help="clip to open first in a folder: index or name (file name or stem)")
    parser.add_argument("--frame", type=int, default=None, help="start paused at this frame")
    parser.add_argument("--mirror", action="store_true", help="start mirrored")
    parser.add_argument("--overlays", default=",".join(DEFAULT_OVERLAY_NAMES),
                        help=f"comma-separated overlays shown at start, of: {', '.join(OVERLAY_NAMES)} "
                             "('' for none; F1-F9 toggle them)")
    parser.add_argument("--no-gui", action="store_true", help="hide the GUI panels (H toggles)")
    parser.add_argument("--size", type=parse_size, default=(1280, 720), help="window WxH (default 1280x720)")
    parser.add_argument("--camera", choices=["orbit", "follow", "fixed", "free"], default="orbit")
    parser.add_argument("--frames", type=int, default=None,
                        help="close after this many rendered frames (scripted runs)")
    parser.add_argument("--screenshot", default=None, help="save the last frame to this PNG on exit")
    parser.add_argument("--record", default=None,
                        help="record the session from the start to this MP4 (or PNG folder); R toggles recording")
    add_effect_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kinema.render import Effects, Renderer
    from kinema.render.editor import Editor

    overlays = tuple(o.strip() for o in args.overlays.split(",") if o.strip())
    args.path, args.character = data_path(args.path), data_path(args.character)
    editor = Editor(character=args.character, camera=args.camera, overlays=overlays)
    editor.open(args.path)
    if args.clip is not None:
        try:
            editor.select(int(args.clip) if args.clip.lstrip("-").isdigit() else editor.browser.index(args.clip))
        except KinemaError as exc:
            print(f"kinema view: {exc}", file=sys.stderr)
            return 1
    editor.mirror = args.mirror
    editor.show_gui = not args.no_gui
    if args.frame is not None:
        editor.seek(args.frame)
    renderer = Renderer(effects=Effects(shadows=args.shadows, ssao=args.ssao, bloom=args.bloom, fxaa=args.fxaa))
    width, height = args.size
    renderer.open(width, height, f"kinema view {args.path}", headless=False)
    renderer.camera.pitch = 0.45                     # look down on the floor overlays
    editor.renderer = renderer
    if args.record:
        renderer.start_recording(args.record, fps=60.0)
    try:
        n = 0
        while renderer.is_open() and (args.frames is None or n < args.frames):
            editor.step(renderer)
            n += 1
        if args.screenshot:
            import imageio.v2 as imageio
            imageio.imwrite(args.screenshot, renderer.capture())
    finally:
        recorded = renderer.stop_recording()
        renderer.close()
    if recorded is not None:
        print(f"recorded {recorded}")
    return 0
