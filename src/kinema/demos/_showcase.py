"""Shared plumbing of the showcase demos (tracking, quadruped, styles): the common options
and running a program standalone (window) or headless (fixed steps, optional MP4 through an
offscreen renderer). Not a demo itself (leading underscore)."""
from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np

from kinema.engine import App, Scene
from kinema.engine.app import resolve_mode


def renderer_available() -> bool:
    """True when :mod:`kinema.render` and raylib are installed (found, not imported)."""
    return importlib.util.find_spec("raylib") is not None


def add_common_arguments(parser: argparse.ArgumentParser, out: str, frames: int = 300) -> None:
    """``--mode/--headless --frames --out --no-video --width --height`` (every demo's contract)."""
    parser.add_argument("--mode", choices=["auto", "standalone", "headless"], default="auto",
                        help="standalone window when a display and the renderer exist, else headless")
    parser.add_argument("--headless", action="store_true", help="same as --mode headless")
    parser.add_argument("--frames", type=int, default=None,
                        help=f"fixed steps to run (headless default {frames}; standalone: until closed)")
    parser.add_argument("--out", type=Path, default=Path(out), help="folder for metrics.json and the MP4")
    parser.add_argument("--no-video", action="store_true", help="headless: skip the offscreen MP4")
    parser.add_argument("--width", type=int, default=960)
    parser.add_argument("--height", type=int, default=540)
    parser.set_defaults(_default_frames=frames)


def offscreen_renderer(width: int, height: int, title: str):
    """An open offscreen :class:`kinema.render.Renderer`, or None when no GL context can be made."""
    if not renderer_available():
        return None
    from kinema.render import Renderer
    from kinema.render.gl import RenderError
    r = Renderer(show_fps=False)
    try:
        r.open(width, height, title, headless=True)
    except (RenderError, RuntimeError, OSError):
        return None
    return r


def run_program(program, args: argparse.Namespace, title: str, fps: float, video_name: str) -> dict:
    """Run ``program`` (an App program) per ``args``; returns ``{"mode", "steps", "video"}``.

    Headless: ``args.frames`` fixed steps; unless ``--no-video``, every step is rendered
    offscreen into ``args.out / video_name`` (skipped, with ``video: null``, where no OpenGL
    context exists). Standalone: a window until closed (or ``--frames`` frames)."""
    mode = "headless" if args.headless else resolve_mode(args.mode, renderer_available())
    args.out.mkdir(parents=True, exist_ok=True)
    video = None
    if mode == "headless":
        renderer = None if args.no_video else offscreen_renderer(args.width, args.height, title)
        if renderer is not None:
            video = args.out / video_name
            renderer.start_recording(video, fps=fps)
        app = App(Scene(title), program, mode="headless", fps=fps, renderer=renderer, render=renderer is not None,
                  render_every=1, width=args.width, height=args.height, title=title)
        frames = args.frames if args.frames is not None else args._default_frames
        stats = app.run(frames)
        if renderer is not None:
            renderer.stop_recording()
            renderer.close()
    else:
        from kinema.render import Renderer
        app = App(Scene(title), program, mode="standalone", fps=fps, renderer=Renderer(), width=args.width,
                  height=args.height, title=title)
        stats = app.run(args.frames)
    return {"mode": mode, "steps": stats.steps, "video": None if video is None else str(video)}


def write_metrics(out: Path, metrics: dict) -> Path:
    """``out/metrics.json`` (NumPy scalars and arrays converted)."""
    def plain(x):
        if isinstance(x, dict):
            return {str(k): plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, np.ndarray):
            return plain(x.tolist())
        if isinstance(x, np.generic):
            return x.item()
        return x
    out.mkdir(parents=True, exist_ok=True)
    path = out / "metrics.json"
    path.write_text(json.dumps(plain(metrics), indent=2))
    return path


def panel(ui, title: str, lines: list[str], x: int = 10, y: int = 40, width: int = 360) -> None:
    """Draw ``lines`` in a GUI panel when the renderer's UI offers one."""
    p, label = getattr(ui, "panel", None), getattr(ui, "label", None)
    if p is None or label is None:
        return
    with p(title, x=x, y=y, width=width):
        for line in lines:
            label(line)
