"""``kinema demo ik``: a FABRIK chain follows a moving target.

A chain of ``--joints`` joints hangs from a fixed root; its target moves on a Lissajous
curve that leaves the chain's reach part of the time (the chain then stretches toward it).
The knee-like inner joints bend toward a pole. Each frame starts from the previous
solution. Headless it writes ``metrics.json`` to ``--out`` (reach error on reachable
frames, bone-length drift, straightness when out of reach, iterations, solve time); with
``--render`` (and :mod:`kinema.render` plus a display, e.g. ``xvfb-run``) it also writes
PNG frames; without ``--headless`` it opens a window.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from kinema.demos._showcase import write_metrics
from kinema.ik import fabrik

DESCRIPTION = "FABRIK: a chain follows a moving target (pole, out-of-reach stretching)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--headless", action="store_true", help="no window; write metrics (and frames with --render)")
    parser.add_argument("--frames", type=int, default=600, help="frames to run")
    parser.add_argument("--out", type=Path, default=Path("out/demo_ik"), help="folder for metrics.json and frames")
    parser.add_argument("--fps", type=float, default=60.0)
    parser.add_argument("--joints", type=int, default=6, help="joints in the chain (>= 2)")
    parser.add_argument("--iterations", type=int, default=20, help="FABRIK iteration limit per frame")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="FABRIK tolerance, metres")
    parser.add_argument("--render", action="store_true", help="headless: also write PNG frames (needs a display)")
    parser.add_argument("--render-every", type=int, default=60)


def target_path(t: np.ndarray, reach: float) -> np.ndarray:
    """Target positions (T, 3) at times ``t`` (s): a Lissajous curve around the root whose
    distance swings between 0.3 and 1.2 times ``reach``."""
    r = reach * (0.75 + 0.45 * np.sin(0.4 * t))
    return np.stack([r * np.sin(0.9 * t), 1.0 + 0.6 * r * np.sin(1.3 * t + 0.5), r * np.cos(0.7 * t)], -1)


def run(args: argparse.Namespace) -> int:
    n = max(int(args.joints), 2)
    lengths = np.linspace(0.5, 0.2, n - 1)
    root = np.array([0.0, 1.0, 0.0])
    chain = root + np.concatenate([[0.0], np.cumsum(lengths)])[:, None] * np.array([0.0, 1.0, 0.0])
    reach = float(lengths.sum())
    pole = np.array([0.0, 3.0, 1.5])
    times = np.arange(args.frames) / args.fps
    targets = target_path(times, reach)
    renderer = _renderer(args)
    errors, reachable, iterations, drift, bend, solve_s, written = [], [], [], [], [], [], []
    frame = 0
    try:
        while frame < args.frames:
            if renderer is not None and not renderer.is_open():
                break
            target = targets[frame]
            t0 = time.perf_counter()
            res = fabrik(chain, target, pole=pole if n > 2 else None, max_iterations=args.iterations,
                         tolerance=args.tolerance)
            solve_s.append(time.perf_counter() - t0)
            chain = res.positions
            dist = float(np.linalg.norm(target - root))
            reachable.append(dist <= reach)
            errors.append(float(res.errors[0]))
            iterations.append(res.iterations)
            drift.append(float(np.abs(np.linalg.norm(np.diff(chain, axis=0), axis=-1) - lengths).max()))
            # out of reach: how far the joints lie from the straight line toward the target
            d = (target - root) / max(dist, 1e-12)
            off = chain - root
            bend.append(float(np.linalg.norm(off - (off @ d)[:, None] * d, axis=-1).max()))
            if renderer is not None:
                _draw(renderer, chain, target, pole)
                if args.headless and frame % max(args.render_every, 1) == 0:
                    written.append(_save(renderer, args.out, frame))
            frame += 1
    finally:
        if renderer is not None:
            renderer.close()
    reach_ok = np.array(reachable)
    err = np.array(errors)
    metrics = {
        "frames": frame,
        "joints": n,
        "reach_m": reach,
        "reachable_frames": int(reach_ok.sum()),
        "reached_within_1mm": float((err[reach_ok] < 1e-3).mean()) if reach_ok.any() else None,
        "max_error_reachable_m": float(err[reach_ok].max()) if reach_ok.any() else None,
        "max_bone_length_drift_m": float(max(drift)) if drift else None,
        "max_bend_when_out_of_reach_m": float(np.array(bend)[~reach_ok].max()) if (~reach_ok).any() else None,
        "nan": bool(not np.isfinite(chain).all()),
        "mean_iterations": float(np.mean(iterations)) if iterations else None,
        "mean_solve_ms": 1000 * float(np.mean(solve_s)) if solve_s else None,
        "frames_written": written,
    }
    write_metrics(args.out, metrics)
    print(f"ik demo: {frame} frames, reachable {metrics['reachable_frames']}, reached within 1 mm "
          f"{metrics['reached_within_1mm']}, bone drift {metrics['max_bone_length_drift_m']:.1e} m "
          f"-> {args.out / 'metrics.json'}")
    return 0


def _renderer(args):
    """kinema's renderer when it is wanted and can run, else None (rendering is optional)."""
    if args.headless and not args.render:
        return None
    try:
        from kinema.render import Renderer, display_available
    except ImportError:
        print("kinema demo ik: kinema.render is not available; running without rendering")
        return None
    if not display_available():
        print("kinema demo ik: no display (try xvfb-run); running without rendering")
        return None
    r = Renderer()
    r.open(960, 540, "kinema: ik demo", headless=bool(args.headless))
    r.camera.set_fixed([2.0, 1.8, 2.6], [0.0, 1.1, 0.0])
    r.camera.snap()
    return r


def _draw(renderer, chain: np.ndarray, target: np.ndarray, pole: np.ndarray) -> None:
    renderer.begin_frame()
    renderer.draw_skeleton(chain.astype(np.float32), np.arange(-1, len(chain) - 1), width=6.0, joint_size=12.0)
    renderer.draw_sphere(target.astype(np.float32), 0.05, (1.0, 0.3, 0.2, 1.0))
    renderer.draw_sphere(pole.astype(np.float32), 0.04, (0.3, 0.6, 1.0, 1.0))
    renderer.end_frame()


def _save(renderer, out: Path, frame: int) -> str:
    import imageio.v3 as iio
    path = out / "frames" / f"ik_{frame:05d}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, renderer.capture())
    return str(path)
