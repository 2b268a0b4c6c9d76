"""App: headless runs, manual stepping, determinism across modes, time control, profiling,
rendering through an injected RendererBackend."""
from __future__ import annotations

import time

import numpy as np
import pytest

from kinema.engine import App, Component, InputFrame, Scene, ScriptedInput, stick
from kinema.engine.app import resolve_mode
from kinema.errors import KinemaError
from kinema.maths import quat


class Orbit(Component):
    """Spins its entity about +Y at ``speed`` rad/s (float32 integration, like a real game)."""

    def __init__(self, speed: float) -> None:
        self.speed = speed

    def update(self, dt: float) -> None:
        self.entity.rotate(quat.from_axis_angle(np.array([0.0, 1.0, 0.0], np.float32), np.float32(self.speed * dt)))


class Walker(Component):
    """Moves its entity with the left stick at 2 m/s (x right, forward = +Z)."""

    def update(self, dt: float) -> None:
        v = stick(self.app.input)
        self.entity.translate(np.array([v[0], 0.0, v[1]], np.float32) * np.float32(2.0 * dt))


class Churn(Component):
    """Spawns a short-lived entity every 7 steps and destroys the oldest every 11 (seeded)."""

    def on_start(self) -> None:
        self.rng = np.random.default_rng(3)
        self.n = 0

    def update(self, dt: float) -> None:
        self.n += 1
        if self.n % 7 == 0:
            e = self.scene.create_entity("spark", parent=self.entity, position=self.rng.normal(size=3))
            e.add(Orbit(float(self.rng.uniform(-3, 3))))
        if self.n % 11 == 0:
            sparks = self.scene.find_all("spark")
            if sparks:
                sparks[0].destroy()


class Game:
    """A program: builds the scene in start(), stops after ``limit`` steps when given."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.steps = 0

    def start(self, app: App) -> None:
        self.app = app
        sun = app.scene.create_entity("sun")
        sun.add(Orbit(0.5))
        for i in range(5):
            p = sun.create_child(f"planet{i}", position=(2.0 + i, 0, 0))
            p.add(Orbit(1.0 + i))
            p.create_child(f"moon{i}", position=(0.4, 0.1, 0)).add(Orbit(-2.0))
        sun.add(Churn())
        app.scene.create_entity("walker").add(Walker())

    def update(self, dt: float) -> None:
        self.steps += 1
        if self.limit is not None and self.steps >= self.limit:
            self.app.stop()


TRACK = ScriptedInput.from_keyframes([  # stick up for 1 s, then right for 1 s, then let go
    {"time": 0.0, "axes": {"left_y": -1.0}},
    {"time": 0.999, "axes": {"left_y": -1.0}},
    {"time": 1.0, "axes": {"left_x": 1.0}, "keys": ["space"]},
    {"time": 1.999, "axes": {"left_x": 1.0}},
    {"time": 2.0},
], fps=60)


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), f"{k} differs"


def test_headless_returns_after_n_frames():
    app = App(Scene(), Game(), mode="headless", fps=50)
    stats = app.run(frames=123)
    assert stats.steps == 123 and app.time.frame == 123 and stats.rendered == 0
    assert app.time.total == pytest.approx(123 / 50)
    assert stats.steps_per_second > 0
    stats = app.run(frames=7)  # a second run continues the same clock
    assert stats.steps == 7 and app.time.frame == 130


def test_headless_returns_when_program_stops():
    game = Game(limit=42)
    stats = App(Scene(), game, mode="headless").run()  # no frame limit
    assert stats.steps == 42 and game.steps == 42


def test_headless_and_manual_are_bit_identical():
    head = App(Scene(), Game(), mode="headless", input=TRACK)
    head.run(frames=240)
    manual = App(Scene(), Game(), mode="manual", input=TRACK)
    manual.step_frames(240)
    realtime = App(Scene(), Game(), mode="manual", input=TRACK)
    for _ in range(120):  # 30 Hz "real time" calls: two fixed steps each
        realtime.step(1 / 30)
    assert realtime.time.frame == 240
    snaps = [a.scene.snapshot() for a in (head, manual, realtime)]
    assert len(snaps[0]["names"]) > 12  # sparks were spawned and destroyed along the way
    _same(snaps[0], snaps[1])
    _same(snaps[0], snaps[2])
    assert head.time.total == manual.time.total == realtime.time.total
    # and the walker really followed the scripted stick: 1 s forward at 2 m/s then 1 s right
    walker = head.scene.find("walker").position
    np.testing.assert_allclose(walker, [2.0, 0.0, 2.0], atol=1e-4)


def test_manual_accumulator_keeps_remainder():
    app = App(Scene(), Game(), mode="manual", fps=60)
    assert app.step(0.01) == 0
    assert app.step(0.01) == 1  # 0.02 s covers one 1/60 step
    assert app.step(0.5) == 30
    assert app.time.frame == 31
    with pytest.raises(KinemaError):
        app.run(frames=1)


def test_pause_single_step_and_time_scale():
    scene = Scene()
    e = scene.create_entity("e")
    e.add(Walker())
    track = ScriptedInput.from_keyframes([{"time": 0, "axes": {"left_y": -1.0}}], fps=10, duration=0)
    app = App(scene, mode="manual", fps=10, input=track)
    app.step_frames(10)  # 1 s at 2 m/s
    np.testing.assert_allclose(e.position[2], 2.0, atol=1e-5)
    app.time.paused = True
    app.step_frames(5)
    np.testing.assert_allclose(e.position[2], 2.0, atol=1e-5)
    assert app.time.frame == 15 and app.time.dt == 0.0
    app.time.step_once()
    app.step_frames(3)  # only one of them moves
    np.testing.assert_allclose(e.position[2], 2.2, atol=1e-5)
    app.time.paused = False
    app.time.time_scale = 0.5
    app.step_frames(10)
    np.testing.assert_allclose(e.position[2], 3.2, atol=1e-5)
    assert app.time.total == pytest.approx(1.1 + 0.5)


def test_profiler_reports_each_component_class():
    app = App(Scene(), Game(), mode="headless")
    app.run(frames=30)
    avg = app.profiler.averages()
    for name in ("Orbit", "Churn", "Walker", "program"):
        assert name in avg and avg[name]["total"] > 0
    assert avg["Orbit"]["update"] > 0 and "draw" not in avg["Orbit"]
    assert set(app.profiler.last()) >= {"Orbit", "Churn", "Walker", "program"}
    rows = app.profiler.rows()
    assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)
    assert len(app.profiler.lines()) == len(rows)
    off = App(Scene(), Game(), mode="headless", profile=False)
    off.run(frames=5)
    assert off.profiler.averages() == {}


class RecordingRenderer:
    """A RendererBackend that records the calls it gets and returns a plain image."""

    def __init__(self, frames_open: int | None = None) -> None:
        self.calls: list[str] = []
        self.ui = self
        self.opened_headless: bool | None = None
        self.frames_open = frames_open
        self._open = False
        self.frames = 0
        self.frame_seconds = 0.0 if frames_open is None else 1 / 100

    def open(self, width, height, title, headless):
        self.calls.append("open")
        self.opened_headless = headless
        self._open = True

    def is_open(self):
        return self._open and (self.frames_open is None or self.frames < self.frames_open)

    def begin_frame(self): self.calls.append("begin_frame")
    def begin_gui(self): self.calls.append("begin_gui")
    def end_frame(self):
        self.calls.append("end_frame")
        self.frames += 1
        time.sleep(self.frame_seconds)  # like a vsynced window
    def read_input(self): return InputFrame(keys_down=frozenset({"w"}))
    def capture(self): return np.full((8, 12, 3), self.frames, np.uint8)
    def close(self):
        self.calls.append("close")
        self._open = False
    def text(self, line, x, y): self.calls.append("text")
    def draw_sphere(self, *a, **k): self.calls.append("draw_sphere")


class Drawn(Component):
    def draw(self, renderer):
        renderer.calls.append("component.draw")

    def gui(self, ui):
        ui.calls.append("component.gui")


def test_render_order_and_captures(tmp_path):
    class Prog:
        def draw(self, r): r.calls.append("program.draw")
        def gui(self, ui): ui.calls.append("program.gui")

    scene = Scene()
    scene.create_entity("d").add(Drawn())
    r = RecordingRenderer()
    app = App(scene, Prog(), mode="headless", renderer=r, render_every=2, capture_dir=tmp_path / "png")
    stats = app.run(frames=6)
    assert stats.rendered == 3 and len(stats.captures) == 3 and r.opened_headless is True
    frame = r.calls[1:r.calls.index("end_frame") + 1]
    assert frame == ["begin_frame", "component.draw", "program.draw", "begin_gui", "component.gui",
                     "program.gui", "end_frame"]
    assert r.calls[-1] == "close"
    import imageio.v3 as iio
    img = iio.imread(stats.captures[-1])
    assert img.shape == (8, 12, 3) and (img == 3).all()  # captured after the third end_frame
    assert [p.name for p in stats.captures] == ["frame_000002.png", "frame_000004.png", "frame_000006.png"]


def test_standalone_with_injected_renderer_reads_and_records_its_input(tmp_path):
    scene = Scene()
    walker = scene.create_entity("walker")
    walker.add(Walker())
    r = RecordingRenderer(frames_open=20)
    app = App(scene, mode="standalone", renderer=r, show_profiler=True, record_input=tmp_path / "rec.json")
    stats = app.run()  # returns when the "window" closes
    assert stats.rendered == 20 and r.opened_headless is False and "text" in r.calls
    assert app.time.frame >= 5 and app.input.keys_down == {"w"}
    # forward by 2 m/s for however many fixed steps the real time covered
    assert walker.position[2] == pytest.approx(2.0 * app.time.total, abs=1e-4)
    # the recording replays headless to the same place
    track = ScriptedInput.load(tmp_path / "rec.json")
    assert len(track) == app.time.frame
    scene2 = Scene()
    scene2.create_entity("walker").add(Walker())
    App(scene2, mode="headless", input=track).run(frames=len(track))
    assert scene2.find("walker").position.tobytes() == walker.position.tobytes()


def test_engine_never_imports_raylib():
    import subprocess
    import sys
    code = ("import sys, kinema.engine, kinema.demos.ecs; from kinema.engine import App, Scene; "
            "App(Scene(), mode='headless').run(frames=3); "
            "assert not {'pyray', 'raylib'} & set(sys.modules), 'raylib imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_auto_mode_follows_the_display(monkeypatch):
    monkeypatch.setenv("DISPLAY", ":99")
    assert resolve_mode("auto", can_render=True) == "standalone"
    assert resolve_mode("auto") == "headless"            # no renderer offered: no window


def test_auto_mode_without_display_is_headless(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert resolve_mode("auto") == "headless"
    assert App(Scene()).mode == "headless"
    with pytest.raises(KinemaError):
        App(Scene(), mode="window")


def test_components_see_their_app_and_apps_are_independent():
    a, b = App(Scene(), Game(), mode="manual"), App(Scene(), Game(), mode="manual")
    a.step_frames(3)
    assert a.time.frame == 3 and b.time.frame == 0
    assert a.scene.find("walker").get(Walker).app is a
