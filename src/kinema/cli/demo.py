"""``kinema demo NAME``: the one demo runner.

A demo is a module ``kinema/demos/<name>.py`` (a program, nothing another package imports)::

    DESCRIPTION = "one line"
    OUT = "out/demo_<name>"          # default --out
    FRAMES = 300                     # default fixed steps of a headless run
    FPS = 60.0                       # fixed update rate, Hz
    RENDER_EVERY = 1                 # headless: render (and record) every N steps
    def add_arguments(parser)        # the demo's own options, beside the runner's
    def programs(args)               # -> [(name, program), ...], one App run each (none: the
                                     #    demo did a task of its own, e.g. tracking --train)
    def summary(args, runs) -> dict  # optional: metrics.json of a several-run demo
    def report(metrics) -> str       # optional: the line printed at the end

A program has ``start(app)``, ``update(dt)``, ``draw(renderer)``, ``gui(ui)`` (each optional,
see :class:`kinema.engine.App`) and ``metrics() -> dict``. The runner gives every demo the same
options: ``--mode``/``--headless``, ``--frames N``, ``--out DIR``, ``--no-video``,
``--render-every N``, ``--png``, ``--width``/``--height``, ``--input``/``--record-input``,
``--profiler``, ``--no-gui`` (``--gui`` draws the panels into a headless recording too; by
default it shows the scene only). It makes the renderer (a window, or offscreen for a headless run) and hands it
to the App, so :mod:`kinema.engine` never imports :mod:`kinema.render`. Every run writes
``metrics.json`` to ``--out``; a headless run also records ``<demo>.mp4`` there (one
``<demo>_<run>.mp4`` per run when a demo has several), unless ``--no-video`` or no OpenGL
context can be made (then ``"video": null``).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import pkgutil
import time
from pathlib import Path
from types import ModuleType

import numpy as np

import kinema.demos
from kinema.engine import App, Scene
from kinema.engine.app import resolve_mode

HELP = "run a demo (kinema demo --list shows them)"


def demo_names() -> list[str]:
    """Names of every demo module in kinema.demos, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(kinema.demos.__path__) if not m.name.startswith("_"))


def renderer_available() -> bool:
    """True when raylib (the ``render`` extra) is installed; found, not imported."""
    return importlib.util.find_spec("raylib") is not None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list", action="store_true", help="list the demos and exit")
    parser.add_argument("name", nargs="?", help="demo to run")
    parser.add_argument("demo_args", nargs=argparse.REMAINDER, help="options passed to the demo")


def add_run_arguments(parser: argparse.ArgumentParser, mod: ModuleType) -> None:
    """The options every demo takes, with the demo's defaults."""
    frames = getattr(mod, "FRAMES", 300)
    parser.add_argument("--mode", choices=["auto", "standalone", "headless", "manual"], default="auto",
                        help="standalone: a window (auto: when a display and the renderer exist); headless: "
                             "fixed steps, an MP4 and metrics; manual: fixed steps driven by the runner, no video")
    parser.add_argument("--headless", action="store_true", help="same as --mode headless")
    parser.add_argument("--frames", type=int, default=None,
                        help=f"fixed steps to run (headless default {frames}; standalone: frames shown, until closed)")
    parser.add_argument("--out", type=Path, default=Path(getattr(mod, "OUT", "out/demo")),
                        help="folder for metrics.json and the MP4")
    parser.add_argument("--no-video", action="store_true", help="headless: do not render or write the MP4")
    parser.add_argument("--render-every", type=int, default=getattr(mod, "RENDER_EVERY", 1),
                        help="headless: render (and record) every N fixed steps")
    parser.add_argument("--png", action="store_true", help="headless: also write every rendered frame to OUT/frames")
    parser.add_argument("--width", type=int, default=getattr(mod, "WIDTH", 960))
    parser.add_argument("--height", type=int, default=getattr(mod, "HEIGHT", 540))
    parser.add_argument("--input", type=Path, default=None, help="scripted input track (.json/.npz) to replay")
    parser.add_argument("--record-input", type=Path, default=None, help="save the input to this .json/.npz")
    parser.add_argument("--profiler", action="store_true", help="show the per-component profiler in the GUI")
    parser.add_argument("--no-gui", action="store_true", help="do not draw the demo's GUI panels")
    parser.add_argument("--gui", action="store_true",
                        help="headless: draw the GUI panels into the recorded video too (default: the scene only)")


def demo_parser(name: str) -> tuple[ModuleType, argparse.ArgumentParser]:
    """The demo module and its full parser (the runner's options and its own)."""
    mod = importlib.import_module(f"kinema.demos.{name}")
    parser = argparse.ArgumentParser(prog=f"kinema demo {name}", description=mod.DESCRIPTION)
    add_run_arguments(parser, mod)
    mod.add_arguments(parser)
    return mod, parser


def parse_demo_args(name: str, argv: list[str]) -> tuple[ModuleType, argparse.Namespace]:
    """Parse ``argv`` for demo ``name``; ``args.mode`` is resolved (never "auto")."""
    mod, parser = demo_parser(name)
    args = parser.parse_args(argv)
    args.mode = "headless" if args.headless else resolve_mode(args.mode, renderer_available())
    args.headless = args.mode == "headless"
    if args.frames is None and args.mode != "standalone":
        args.frames = getattr(mod, "FRAMES", 300)
    return mod, args


def _offscreen(width: int, height: int, title: str, frame_dt: float):
    """An open offscreen :class:`kinema.render.Renderer` whose camera smoothing advances
    ``frame_dt`` seconds per rendered frame (the simulated time between two renders), or
    None when no GL context can be made."""
    if not renderer_available():
        return None
    from kinema.render import Renderer
    from kinema.render.gl import RenderError
    r = Renderer(show_fps=False, headless_dt=frame_dt)
    try:
        r.open(width, height, title, headless=True)
    except (RenderError, RuntimeError, OSError):
        return None
    return r


class _WithoutGui:
    """``program`` as the App sees it, minus its ``gui`` (``--no-gui``)."""

    def __init__(self, program) -> None:
        self._program = program

    def __getattr__(self, name: str):
        if name == "gui":
            raise AttributeError(name)
        return getattr(self._program, name)


def run_program(program, args: argparse.Namespace, fps: float, title: str, video: Path | None) -> dict:
    """One App run of ``program`` per ``args`` (mode resolved); returns the run's metrics:
    the runner's (mode, steps, times, video, frames written, profile) and ``program.metrics()``."""
    renderer, factory = None, None
    if args.mode == "headless" and not args.no_video:
        renderer = _offscreen(args.width, args.height, title, max(1, args.render_every) / fps)
        if renderer is None:
            print(f"{title}: no OpenGL context (try xvfb-run); metrics only")
    elif args.mode == "standalone":
        from kinema.render import Renderer
        factory = Renderer
    if renderer is None:
        video = None
    elif video is not None:
        renderer.start_recording(video, fps=fps / max(1, args.render_every))
    png = args.out / "frames" if args.png and renderer is not None else None
    # a recorded headless video shows the scene, not panels of text, unless --gui asks for them
    no_gui = args.no_gui or (args.mode == "headless" and not getattr(args, "gui", False))
    app = App(Scene(title), _WithoutGui(program) if no_gui else program, mode=args.mode, fps=fps,
              renderer=renderer, renderer_factory=factory,
              render=renderer is not None, render_every=args.render_every, capture_dir=png, input=args.input,
              record_input=args.record_input, width=args.width, height=args.height, title=title,
              show_profiler=args.profiler)
    t0 = time.perf_counter()
    captures: list[Path] = []
    try:
        if args.mode == "manual":
            app.step_frames(args.frames)
            app.close()
        else:
            captures = app.run(args.frames).captures
    finally:
        if renderer is not None:
            renderer.stop_recording()
            renderer.close()
    wall = time.perf_counter() - t0
    steps = app.time.frame
    out = {"mode": app.mode, "steps": steps, "sim_seconds": app.time.total, "wall_seconds": wall,
           "steps_per_second": steps / wall if wall > 0 else None,
           "video": None if video is None else str(video), "frames_written": [str(p) for p in captures],
           "profile_ms_per_frame": app.profiler.averages()}
    metrics = getattr(program, "metrics", None)
    return {**out, **(metrics() if metrics is not None else {})}


def plain(x):
    """``x`` with NumPy scalars and arrays turned into JSON types (dict keys into str)."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return plain(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    return x


def run_demo(name: str, argv: list[str]) -> dict:
    """Run demo ``name`` with ``argv``; writes and returns its metrics (``out/metrics.json``)."""
    mod, args = parse_demo_args(name, argv)
    args.out.mkdir(parents=True, exist_ok=True)
    title, fps = f"kinema: {name}", float(getattr(mod, "FPS", 60.0))
    programs = list(mod.programs(args))
    if not programs:                        # the demo did a task of its own (e.g. tracking --train)
        return {}
    runs = {}
    for run_name, program in programs:
        stem = name if len(programs) == 1 else f"{name}_{run_name}"
        video = args.out / f"{stem}.mp4" if args.mode == "headless" else None
        runs[run_name] = run_program(program, args, fps, title, video)
    if hasattr(mod, "summary"):
        metrics = {"demo": name, "mode": args.mode, **mod.summary(args, runs)}
    elif len(runs) == 1:
        metrics = {"demo": name, **next(iter(runs.values()))}
    else:
        metrics = {"demo": name, "mode": args.mode, "runs": runs}
    path = args.out / "metrics.json"
    path.write_text(json.dumps(plain(metrics), indent=2))
    line = mod.report(metrics) if hasattr(mod, "report") else ""
    if not line and "steps" in metrics:
        line = f"{metrics['steps']} steps in {metrics['wall_seconds']:.2f} s"
    print(f"{name} ({args.mode}): {line} -> {path}")
    return metrics


def run(args: argparse.Namespace) -> int:
    names = demo_names()
    if args.list or not args.name:
        for name in names:
            mod = importlib.import_module(f"kinema.demos.{name}")
            print(f"{name:14s} {getattr(mod, 'DESCRIPTION', '')}")
        return 0 if args.list else 2
    if args.name not in names:
        print(f"kinema demo: unknown demo {args.name!r}; available: {', '.join(names)}")
        return 2
    run_demo(args.name, args.demo_args)
    return 0
