"""``kinema demo ik``: a FABRIK chain follows a moving target.

A chain of ``--joints`` joints hangs from a fixed root; its target moves on a Lissajous
curve that leaves the chain's reach part of the time (the chain then stretches toward it).
The knee-like inner joints bend toward a pole. Each frame starts from the previous
solution. In a window the target is a handle: press the left mouse button on it and drag
(it moves in the plane facing the camera), R sends it back along its path; a GUI panel
shows the reach error and iterations. The metrics: reach error on reachable frames,
bone-length drift, straightness when out of reach, iterations, solve time, frames dragged.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from kinema.ik import fabrik

DESCRIPTION = "FABRIK: a chain follows a moving target (pole, out-of-reach stretching)"
OUT, FRAMES = "out/demo_ik", 600
HANDLE_RADIUS = 0.06   # m, the target sphere the mouse picks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--joints", type=int, default=6, help="joints in the chain (>= 2)")
    parser.add_argument("--iterations", type=int, default=20, help="FABRIK iteration limit per frame")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="FABRIK tolerance, metres")


def target_path(t: np.ndarray, reach: float) -> np.ndarray:
    """Target positions (T, 3) at times ``t`` (s): a Lissajous curve around the root whose
    distance swings between 0.3 and 1.2 times ``reach``."""
    r = reach * (0.75 + 0.45 * np.sin(0.4 * t))
    return np.stack([r * np.sin(0.9 * t), 1.0 + 0.6 * r * np.sin(1.3 * t + 0.5), r * np.cos(0.7 * t)], -1)


class ChainProgram:
    """Solves the chain toward the target once per fixed step and measures the solution."""

    def __init__(self, joints: int, iterations: int, tolerance: float) -> None:
        self.n = max(int(joints), 2)
        self.lengths = np.linspace(0.5, 0.2, self.n - 1)
        self.root = np.array([0.0, 1.0, 0.0])
        self.chain = self.root + np.concatenate([[0.0], np.cumsum(self.lengths)])[:, None] * np.array([0.0, 1.0, 0.0])
        self.reach = float(self.lengths.sum())
        self.pole = np.array([0.0, 3.0, 1.5])
        self.iterations, self.tolerance = iterations, tolerance
        self.t = 0.0
        self.target = target_path(np.zeros(1), self.reach)[0]
        self.errors, self.reachable, self.used, self.drift, self.bend, self.solve_s = [], [], [], [], [], []
        self.app = None
        self.manual = self.dragging = False     # the user moved the target / is moving it now
        self._plane = (np.zeros(3), np.array([0.0, 0.0, 1.0]))
        self.dragged_frames = 0

    def start(self, app) -> None:
        self.app = app
        cam = getattr(app.renderer, "camera", None)
        if cam is not None:   # the root never moves: one fixed view of the chain's reach (no orbit: the mouse drags)
            cam.set_fixed([2.0, 1.8, 2.6], [0.0, 1.1, 0.0])
            cam.snap()

    def _drag(self) -> None:
        """Mouse ray against the target handle: pick it on a left press, then move it in the
        plane through it facing the camera while the button is held."""
        app = self.app
        r = None if app is None else app.renderer
        inp = None if app is None else app.input
        if r is None or inp is None or not hasattr(r, "view_projection"):
            return
        from kinema.render.camera import pixel_ray, ray_plane, ray_sphere  # a renderer exists: raylib is there
        if "r" in inp.keys_pressed:
            self.manual = self.dragging = False
        if "left" not in inp.mouse_buttons:
            self.dragging = False
            return
        origin, direction = pixel_ray(inp.mouse_position, r.view_projection, r.width, r.height)
        if not self.dragging:
            if ray_sphere(origin, direction, self.target, HANDLE_RADIUS) is None:
                return
            self.dragging = self.manual = True
            # the drag plane: through the picked target, facing the camera, fixed for the drag
            self._plane = (self.target.copy(), self.target - r.camera.camera.position)
        hit = ray_plane(origin, direction, *self._plane)
        if hit is not None:
            self.target = hit
            self.dragged_frames += 1

    def update(self, dt: float) -> None:
        self._drag()
        if not self.manual:
            self.target = target_path(np.array([self.t]), self.reach)[0]
        target = self.target
        t0 = time.perf_counter()
        res = fabrik(self.chain, target, pole=self.pole if self.n > 2 else None, max_iterations=self.iterations,
                     tolerance=self.tolerance)
        self.solve_s.append(time.perf_counter() - t0)
        self.chain = chain = res.positions
        dist = float(np.linalg.norm(target - self.root))
        self.reachable.append(dist <= self.reach)
        self.errors.append(float(res.errors[0]))
        self.used.append(res.iterations)
        self.drift.append(float(np.abs(np.linalg.norm(np.diff(chain, axis=0), axis=-1) - self.lengths).max()))
        # out of reach: how far the joints lie from the straight line toward the target
        d = (target - self.root) / max(dist, 1e-12)
        off = chain - self.root
        self.bend.append(float(np.linalg.norm(off - (off @ d)[:, None] * d, axis=-1).max()))
        self.t += dt

    def draw(self, renderer) -> None:
        renderer.draw_skeleton(self.chain.astype(np.float32), np.arange(-1, self.n - 1), width=6.0, joint_size=12.0)
        color = (1.0, 0.85, 0.2, 1.0) if self.dragging else (1.0, 0.3, 0.2, 1.0)
        renderer.draw_sphere(self.target.astype(np.float32), HANDLE_RADIUS, color)
        renderer.draw_sphere(self.pole.astype(np.float32), 0.04, (0.3, 0.6, 1.0, 1.0))

    def gui(self, ui) -> None:
        err = self.errors[-1] if self.errors else 0.0
        ui.lines("ik", [f"FABRIK, {self.n} joints, reach {self.reach:.2f} m",
                        f"target error {1000 * err:.1f} mm, {self.used[-1] if self.used else 0} iterations",
                        "drag the red target with the mouse" if not self.manual else
                        "dragged target (R: back to its path)"])

    def metrics(self) -> dict:
        reach_ok, err = np.array(self.reachable, bool), np.array(self.errors)
        return {
            "frames": len(self.errors),
            "joints": self.n,
            "reach_m": self.reach,
            "reachable_frames": int(reach_ok.sum()),
            "reached_within_1mm": float((err[reach_ok] < 1e-3).mean()) if reach_ok.any() else None,
            "max_error_reachable_m": float(err[reach_ok].max()) if reach_ok.any() else None,
            "max_bone_length_drift_m": float(max(self.drift)) if self.drift else None,
            "max_bend_when_out_of_reach_m": float(np.array(self.bend)[~reach_ok].max()) if (~reach_ok).any() else None,
            "nan": bool(not np.isfinite(self.chain).all()),
            "mean_iterations": float(np.mean(self.used)) if self.used else None,
            "mean_solve_ms": 1000 * float(np.mean(self.solve_s)) if self.solve_s else None,
            "dragged_frames": self.dragged_frames,
            "final_target_m": [float(v) for v in self.target],
            "final_error_m": float(self.errors[-1]) if self.errors else None,
        }


def programs(args: argparse.Namespace) -> list[tuple[str, ChainProgram]]:
    return [("ik", ChainProgram(args.joints, args.iterations, args.tolerance))]


def report(m: dict) -> str:
    return (f"{m['frames']} frames, reachable {m['reachable_frames']}, reached within 1 mm "
            f"{m['reached_within_1mm']}, bone drift {m['max_bone_length_drift_m']:.1e} m")
