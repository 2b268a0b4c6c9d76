"""``kinema demo ecs``: a solar system built from entities and components.

Shows parenting (moons orbit planets that orbit the sun: each orbit is a spinning pivot
entity), components with lifecycle hooks (spin, bob, comets spawned and destroyed while the
scene updates), input (arrow keys / stick x change the time scale, space pauses, "." steps
one frame while paused), and the three run modes. Headless it writes ``metrics.json`` to
``--out`` (steps per second, per-component profile, and a hierarchy check: every moon's
distance to its planet must stay its orbit radius).
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from kinema.engine import App, Component, Scene, stick
from kinema.maths import quat

DESCRIPTION = "entities, components and the update loop: a solar system (all three run modes)"
OUT, FRAMES, WIDTH, HEIGHT = "out/demo_ecs", 600, 1280, 720

_Y = np.array([0.0, 1.0, 0.0], np.float32)


class Spin(Component):
    """Rotates its entity about its local +Y axis at ``speed`` rad/s."""

    def __init__(self, speed: float) -> None:
        self.speed = float(speed)

    def update(self, dt: float) -> None:
        half = 0.5 * self.speed * dt
        self.entity.rotate((math.cos(half), 0.0, math.sin(half), 0.0))


class Bob(Component):
    """Moves its entity up and down: ``height * sin(2 pi frequency t)`` above its base."""

    def __init__(self, height: float, frequency: float) -> None:
        self.height, self.frequency = float(height), float(frequency)

    def on_start(self) -> None:
        self.base = self.entity.position
        self.t = 0.0

    def update(self, dt: float) -> None:
        self.t += dt
        self.entity.position = self.base + _Y * np.float32(self.height * np.sin(2 * np.pi * self.frequency * self.t))


class Body(Component):
    """A sphere of ``radius`` metres drawn in ``color`` (RGBA)."""

    def __init__(self, radius: float, color: tuple[float, float, float, float]) -> None:
        self.radius, self.color = float(radius), color

    def draw(self, renderer) -> None:
        debug = getattr(renderer, "debug", None)
        sphere = getattr(debug, "sphere", None) or getattr(renderer, "draw_sphere", None)
        if sphere is not None:
            sphere(self.entity.world_position, self.radius, self.color)


class Comet(Component):
    """Flies in a straight line at ``velocity`` (m/s) and destroys its entity after ``life`` s."""

    def __init__(self, velocity: np.ndarray, life: float) -> None:
        self.velocity, self.life = np.asarray(velocity, np.float32), float(life)

    def update(self, dt: float) -> None:
        self.entity.translate(self.velocity * np.float32(dt))
        self.life -= dt
        if self.life <= 0:
            self.entity.destroy()


class CometSpawner(Component):
    """Launches a comet every ``every`` seconds from a seeded random direction."""

    def __init__(self, every: float = 0.5, seed: int = 0) -> None:
        self.every, self.rng = float(every), np.random.default_rng(seed)
        self.clock, self.launched = 0.0, 0

    def update(self, dt: float) -> None:
        self.clock += dt
        while self.clock >= self.every - 1e-9:  # tolerate the rounding of summed steps
            self.clock -= self.every
            direction = self.rng.normal(size=3).astype(np.float32)
            direction /= np.linalg.norm(direction)
            comet = self.scene.create_entity("comet", position=-direction * 12, tags=("comet",))
            comet.add(Comet(direction * 6.0, life=4.0))
            comet.add(Body(0.08, (0.7, 0.9, 1.0, 1.0)))
            self.launched += 1


PLANET_COLORS = [(0.8, 0.5, 0.3, 1.0), (0.3, 0.6, 0.9, 1.0), (0.9, 0.3, 0.2, 1.0), (0.9, 0.8, 0.5, 1.0),
                 (0.5, 0.8, 0.6, 1.0), (0.6, 0.5, 0.9, 1.0)]


def build(scene: Scene, planets: int = 6, moons: int = 3) -> None:
    """Sun, ``planets`` planets on spinning pivots, ``moons`` moons per planet."""
    system = scene.create_entity("system", position=(0.0, 1.5, 0.0))  # above the renderer's floor
    sun = system.create_child("sun", tags=("star",))
    sun.add(Spin(0.3))
    sun.add(Body(1.0, (1.0, 0.8, 0.2, 1.0)))
    system.add(CometSpawner())
    for i in range(planets):
        pivot = system.create_child(f"orbit{i}", rotation=quat.from_axis_angle(_Y, np.float32(i * 2.1)))
        pivot.add(Spin(1.2 / (1 + i)))
        planet = pivot.create_child(f"planet{i}", position=(2.5 + 1.6 * i, 0, 0), tags=("planet",))
        planet.add(Spin(2.0))
        planet.add(Body(0.25 + 0.05 * (i % 3), PLANET_COLORS[i % len(PLANET_COLORS)]))
        if i % 2:
            planet.add(Bob(0.3, 0.2))
        for k in range(moons):
            moon_pivot = planet.create_child(f"planet{i}.orbit{k}",
                                             rotation=quat.from_axis_angle(_Y, np.float32(k * 1.3)))
            moon_pivot.add(Spin(3.0 + k))
            moon = moon_pivot.create_child(f"planet{i}.moon{k}", position=(0.5 + 0.2 * k, 0, 0), tags=("moon",))
            moon.add(Body(0.06, (0.85, 0.85, 0.85, 1.0)))


class SolarSystem:
    """The program: builds the scene, maps input to time control, measures the hierarchy."""

    def __init__(self, planets: int, moons: int) -> None:
        self.planets, self.moons = planets, moons
        self.max_moon_error = 0.0
        self.last_frame_pixels: dict[str, list[float]] = {}

    def start(self, app: App) -> None:
        self.app = app
        build(app.scene, self.planets, self.moons)
        if getattr(app.renderer, "camera", None) is not None:   # a fixed camera above the system, from its size
            from kinema.render.camera import frame_subject  # a renderer exists: raylib is there
            r = 2.5 + 1.6 * max(self.planets - 1, 0) + 0.5 + 0.2 * max(self.moons - 1, 0)   # outermost moon
            frame_subject(app.renderer, None, np.array([[-r, 1.5, -r], [r, 1.5, r]]), mode="fixed", yaw=0.0,
                          pitch=0.63, scale=0.75)

    def update(self, dt: float) -> None:
        t, inp = self.app.time, self.app.input
        if "space" in inp.keys_pressed:
            t.toggle_pause()
        if "period" in inp.keys_pressed:
            t.step_once()
        x = float(stick(inp, keys={"left": ("left",), "right": ("right",)})[0])
        if x:
            t.time_scale = float(np.clip(t.time_scale * (1.0 + x * t.fixed_dt), 0.05, 10.0))

    def late_update(self, dt: float) -> None:
        scene = self.app.scene
        for i in range(self.planets):
            p = scene.find(f"planet{i}").world_position
            for k in range(self.moons):
                m = scene.find(f"planet{i}.moon{k}").world_position
                err = abs(float(np.linalg.norm(m - p)) - (0.5 + 0.2 * k))
                self.max_moon_error = max(self.max_moon_error, err)

    def metrics(self) -> dict:
        scene = self.app.scene
        out = {"entities": len(scene), "components": {cls: len(comps) for cls, comps in _count(scene).items()},
               "comets_launched": scene.find("system").get(CometSpawner).launched,
               "comets_alive": len(scene.with_tag("comet")), "max_moon_radius_error_m": self.max_moon_error}
        if self.last_frame_pixels:
            out["last_frame_pixels"] = self.last_frame_pixels
        return out

    def after_frame(self, renderer) -> None:
        """Where the frame just shown drew the sun and the planets (pixels, x right, y down)."""
        if hasattr(renderer, "project"):
            bodies = [self.app.scene.find("sun"), *self.app.scene.with_tag("planet")]
            pixels = renderer.project(np.array([b.world_position for b in bodies]))[0]
            self.last_frame_pixels = {b.name: [float(v) for v in p] for b, p in zip(bodies, pixels)}

    def gui(self, ui) -> None:
        t = self.app.time
        lines = [f"frame {t.frame}  t={t.total:.2f}s  scale={t.time_scale:.2f}{'  paused' if t.paused else ''}",
                 f"entities {len(self.app.scene)}", "space: pause  arrows: time scale  '.': step"]
        panel, label = getattr(ui, "panel", None), getattr(ui, "label", None)
        if panel is not None and label is not None:
            with panel("solar system", x=self.app.width - 330, y=40, width=320):
                for line in lines:
                    label(line)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--planets", type=int, default=6)
    parser.add_argument("--moons", type=int, default=3)


def programs(args: argparse.Namespace) -> list[tuple[str, SolarSystem]]:
    return [("ecs", SolarSystem(args.planets, args.moons))]


def report(m: dict) -> str:
    return (f"{m['steps']} steps in {m['wall_seconds']:.2f} s ({m['steps_per_second'] or 0:.0f}/s), "
            f"{m['entities']} entities, moon radius error {m['max_moon_radius_error_m']:.2e} m")


def _count(scene: Scene) -> dict[str, list]:
    out: dict[str, list] = {}
    for c in scene.components():
        out.setdefault(type(c).__name__, []).append(c)
    return out
