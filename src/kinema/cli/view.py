"""``kinema view PATH``: the standalone viewer (timeline, play/pause, speed, mirror, camera)."""
from __future__ import annotations

import argparse

from kinema.cli.render import add_effect_arguments, parse_size

HELP = "open a window showing a motion (timeline, play/pause, speed, mirror, cameras, effects)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="motion file (BVH, npz, GLB/glTF, FBX)")
    parser.add_argument("--character", default=None,
                        help="character to skin (GLB, FBX or character.bin); default: a procedural body")
    parser.add_argument("--size", type=parse_size, default=(1280, 720), help="window WxH (default 1280x720)")
    parser.add_argument("--camera", choices=["orbit", "follow", "fixed", "free"], default="follow")
    parser.add_argument("--frames", type=int, default=None,
                        help="close after this many rendered frames (scripted runs)")
    parser.add_argument("--screenshot", default=None, help="save the last frame to this PNG on exit")
    parser.add_argument("--record", default=None,
                        help="record the session from the start to this MP4 (or PNG folder); R toggles recording")
    add_effect_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kinema.render import Effects, Renderer
    from kinema.render.playback import Clip
    from kinema.render.viewer import Viewer

    clip = Clip.load(args.path, args.character)
    renderer = Renderer(effects=Effects(shadows=args.shadows, ssao=args.ssao, bloom=args.bloom, fxaa=args.fxaa))
    width, height = args.size
    renderer.open(width, height, f"kinema view {clip.motion.name}", headless=False)
    viewer = Viewer(clip, camera=args.camera)
    if args.record:
        renderer.start_recording(args.record, fps=60.0)
    try:
        n = 0
        while renderer.is_open() and (args.frames is None or n < args.frames):
            viewer.step(renderer)
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
