"""``kinema render PATH -o OUT.mp4``: render a motion offscreen to a video or PNG folder."""
from __future__ import annotations

import argparse
from pathlib import Path

from kinema.data import data_path
from kinema.errors import KinemaError

HELP = "render a motion headless (offscreen) to an MP4 or a folder of PNGs"


def parse_size(text: str) -> tuple[int, int]:
    """``"1280x720"`` -> (1280, 720)."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 1280x720, got {text!r}") from None
    if w < 16 or h < 16 or w > 8192 or h > 8192:
        raise argparse.ArgumentTypeError(f"size {w}x{h} out of range (16..8192)")
    return w, h


def add_effect_arguments(parser: argparse.ArgumentParser) -> None:
    for name in ("shadows", "ssao", "bloom", "fxaa"):
        parser.add_argument(f"--no-{name}", dest=name, action="store_false", help=f"turn {name} off")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="motion file (BVH, npz, GLB/glTF, FBX)")
    parser.add_argument("-o", "--out", required=True, help="output .mp4 (or a folder for PNG frames)")
    parser.add_argument("--character", default=None,
                        help="character to skin (GLB, FBX or character.bin); default: a procedural body")
    parser.add_argument("--frames", type=int, default=None, help="frames to render (default: the whole clip)")
    parser.add_argument("--start", type=int, default=0, help="first frame of the clip")
    parser.add_argument("--size", type=parse_size, default=(1280, 720), help="WxH pixels (default 1280x720)")
    parser.add_argument("--camera", choices=["orbit", "follow", "fixed"], default="follow")
    parser.add_argument("--fps", type=float, default=None, help="video frame rate (default: the clip's)")
    parser.add_argument("--mirror", action="store_true", help="render the mirrored motion")
    parser.add_argument("--skeleton", action="store_true", help="draw the skeleton sticks too")
    add_effect_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from kinema.render import Effects, Renderer
    from kinema.render.playback import Clip

    args.path, args.character = data_path(args.path), data_path(args.character)
    clip = Clip.load(args.path, args.character)
    start = max(0, int(args.start))
    if start >= clip.num_frames:
        raise KinemaError(f"{args.path}: --start {start} is past the last frame ({clip.num_frames - 1})")
    frames = clip.num_frames - start if args.frames is None else int(args.frames)
    if frames < 1:
        raise KinemaError("--frames must be at least 1")
    fps = float(args.fps or clip.motion.fps)
    width, height = args.size
    effects = Effects(shadows=args.shadows, ssao=args.ssao, bloom=args.bloom, fxaa=args.fxaa)
    renderer = Renderer(effects=effects, show_fps=False, headless_dt=1.0 / fps)
    renderer.open(width, height, "kinema render", headless=True)
    try:
        clip.fit_view(renderer)
        clip.frame_camera(renderer.camera, args.camera, start)
        renderer.camera.snap()
        renderer.start_recording(args.out, fps=fps)
        for i in tqdm(range(frames), desc=f"render {Path(args.path).name}", unit="frame"):
            f = min(start + i, clip.num_frames - 1)
            clip.frame_camera(renderer.camera, args.camera, f, time=i / fps)
            renderer.begin_frame()
            clip.draw(renderer, f, mirror=args.mirror, skeleton=args.skeleton)
            renderer.end_frame()
        out = renderer.stop_recording()
    finally:
        renderer.close()
    print(f"wrote {frames} frames ({width}x{height}, {fps:g} fps) to {out}")
    return 0
