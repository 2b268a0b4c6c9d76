"""The App: runs a scene and a program with a fixed time step in one of three modes.

* ``standalone``: opens a window through a renderer (``renderer``, or one made by
  ``renderer_factory``), reads keyboard/mouse/gamepad from it, steps the simulation from real time with
  an accumulator, renders every frame, and returns when the window closes (or after
  ``frames`` rendered frames).
* ``headless``: no window; exactly one fixed step per iteration, for ``frames`` steps or
  until ``app.stop()``; returns. With a renderer (passed, or made by ``renderer_factory``
  when ``render=True``) it also renders
  offscreen every ``render_every`` steps and can write the frames as PNG files.
* ``manual``: the caller drives it: ``app.step(dt)`` (real seconds, through the
  accumulator) or ``app.step_frames(n)``; ``app.render()`` draws one frame.

All three run the same fixed step (:meth:`App.fixed_step`), so the same program with the
same input gives bit-identical state in headless and manual mode.

A *program* is any object with optional methods ``start(app)``, ``update(dt)``,
``late_update(dt)``, ``draw(renderer)``, ``gui(ui)``, ``after_frame(renderer)`` and
``on_stop()``. Per fixed step:
input is read, then ``program.update``, then the scene's ``on_start``/``update``/
``late_update``, then ``program.late_update``. Per rendered frame: ``begin_frame``, every
component's ``draw``, ``program.draw``, ``begin_gui``, every ``gui``, ``program.gui``,
``end_frame``, ``program.after_frame`` (the frame as shown: its camera and projection).

The engine never imports :mod:`kinema.render`: whoever starts the App (the demo runner,
``kinema view``) passes a renderer or a factory for one, from above.
"""
from __future__ import annotations

import os
import time as _time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from kinema.engine.input import InputRecorder, InputSource, ScriptedInput
from kinema.engine.profiler import Profiler
from kinema.engine.protocols import InputFrame, RendererBackend
from kinema.engine.scene import Scene
from kinema.engine.time import Time
from kinema.errors import KinemaError

MODES = ("auto", "standalone", "headless", "manual")
_EMPTY = frozenset()


def display_available() -> bool:
    """True when an X11 or Wayland display is set in the environment."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def resolve_mode(mode: str, can_render: bool = False) -> str:
    """``"auto"`` -> ``"standalone"`` with a display and a renderer (``can_render``), else
    ``"headless"``; any other mode is returned as it is."""
    if mode not in MODES:
        raise KinemaError(f"App: mode must be one of {MODES}, got {mode!r}")
    if mode != "auto":
        return mode
    return "standalone" if display_available() and can_render else "headless"


@dataclass
class RunStats:
    """What a run did.

    Attributes:
        steps: fixed steps in this run. rendered: frames rendered in this run.
        wall_seconds: real time the run took. sim_seconds: simulated time at the end.
        steps_per_second: steps / wall_seconds. captures: PNG files written.
    """

    mode: str
    steps: int
    rendered: int
    wall_seconds: float
    sim_seconds: float
    captures: list[Path] = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.wall_seconds if self.wall_seconds > 0 else float("inf")


class App:
    """Runs ``scene`` (and ``program``) with a fixed time step.

    Args:
        scene: the scene to simulate (a new empty one when None).
        program: object with optional start/update/late_update/draw/gui/on_stop methods.
        mode: "auto", "standalone", "headless" or "manual".
        fps: fixed update rate, Hz.
        renderer: a :class:`RendererBackend`. In headless/manual mode it is used only when
            given or ``render=True``.
        renderer_factory: ``() -> RendererBackend``, called for a renderer when one is needed
            and ``renderer`` is None (standalone, ``render=True``, ``app.render()``).
        render: headless only: render (offscreen) through the renderer or the factory.
        render_every: headless only: render once per this many steps.
        capture_dir: headless only: write each rendered frame there as ``frame_NNNNNN.png``.
        input: a scripted source (``ScriptedInput``, or a path to a .json/.npz track);
            overrides the renderer's input in standalone mode.
        record_input: path to save the input of every step to (.json/.npz) when the run ends.
        width, height, title: window / offscreen target.
        max_steps_per_frame: standalone: cap on fixed steps per rendered frame (avoids the
            spiral of death after a stall; the excess time is dropped).
        profile: time every component class per frame (``app.profiler``).
        show_profiler: draw the profiler lines in the GUI.
    """

    def __init__(self, scene: Scene | None = None, program: Any = None, mode: str = "auto", fps: float = 60.0,
                 renderer: RendererBackend | None = None,
                 renderer_factory: Callable[[], RendererBackend] | None = None,
                 render: bool = False, render_every: int = 1,
                 capture_dir: str | Path | None = None, input: InputSource | str | Path | None = None,
                 record_input: str | Path | None = None, width: int = 1280, height: int = 720,
                 title: str = "kinema", max_steps_per_frame: int = 8, profile: bool = True,
                 show_profiler: bool = False) -> None:
        self.scene = scene if scene is not None else Scene()
        self.scene.app = self
        self.program = program
        self.requested_mode = mode
        self.mode = resolve_mode(mode, renderer is not None or renderer_factory is not None)
        self.time = Time(fps=float(fps))
        self.renderer = renderer
        self.renderer_factory = renderer_factory
        self.render_enabled = render or renderer is not None or capture_dir is not None
        self.render_every = max(1, int(render_every))
        self.capture_dir = None if capture_dir is None else Path(capture_dir)
        self.input_source = ScriptedInput.load(input) if isinstance(input, (str, Path)) else input
        self.record_path = None if record_input is None else Path(record_input)
        self.recorder = InputRecorder(fps) if record_input is not None else None
        self.width, self.height, self.title = int(width), int(height), title
        self.max_steps_per_frame = max(1, int(max_steps_per_frame))
        self.profiler = Profiler(enabled=profile)
        self.show_profiler = show_profiler
        self.input = InputFrame()
        self._started = False
        self._stop = False
        self._owns_renderer = False
        self._accumulator = 0.0
        self._pending_pressed: frozenset[str] = _EMPTY
        self._captures: list[Path] = []

    def __repr__(self) -> str:
        return f"App({self.scene!r}, mode={self.mode!r}, frame={self.time.frame})"

    # ------------------------------------------------------------- control
    def stop(self) -> None:
        """Ask the running loop to return after the current step."""
        self._stop = True

    @property
    def stopped(self) -> bool:
        return self._stop

    def start(self) -> None:
        """Call ``program.start(app)`` and start the scene's components (once; run/step do it)."""
        if self._started:
            return
        self._started = True
        fn = getattr(self.program, "start", None)
        if fn is not None:
            fn(self)
        self.scene.start()

    def close(self) -> None:
        """Call ``program.on_stop()``, save recorded input, close a renderer the App opened."""
        fn = getattr(self.program, "on_stop", None)
        if fn is not None and self._started:
            fn()
        if self.recorder is not None and self.record_path is not None and len(self.recorder):
            self.recorder.save(self.record_path)
        if self._owns_renderer and self.renderer is not None:
            self.renderer.close()
            self._owns_renderer = False

    # -------------------------------------------------------------- stepping
    def _call(self, name: str, arg: Any) -> None:
        fn = getattr(self.program, name, None)
        if fn is None:
            return
        if self.profiler.enabled:
            t0 = _time.perf_counter()
            fn(arg)
            self.profiler.add("program", name, _time.perf_counter() - t0)
        else:
            fn(arg)

    def _read_input(self, live: InputFrame | None) -> InputFrame:
        if self.input_source is not None:
            return self.input_source.read(self.time.frame, self.time.fps)
        if live is None:
            return InputFrame()
        frame = replace(live, keys_pressed=self._pending_pressed | live.keys_pressed)
        self._pending_pressed = _EMPTY
        return frame

    def fixed_step(self, live_input: InputFrame | None = None) -> None:
        """Advance the simulation by one fixed step (every mode goes through here).

        Args:
            live_input: the renderer's input for this frame (standalone), ignored when a
                scripted source is set.
        """
        self.start()
        self.input = self._read_input(live_input)
        if self.recorder is not None:
            self.recorder.record(self.input)
        dt = self.time.next_dt()
        timer = self.profiler if self.profiler.enabled else None
        self._call("update", dt)
        self.scene.update(dt, timer)
        self._call("late_update", dt)
        self.time.advance(dt)

    def step(self, dt: float) -> int:
        """Manual mode: let ``dt`` real seconds pass; runs the fixed steps they cover.

        Returns the number of fixed steps run (the remainder stays in the accumulator).
        """
        if dt < 0:
            raise KinemaError(f"App.step: dt must be >= 0, got {dt}")
        self._accumulator += dt
        step = self.time.fixed_dt
        n = 0
        while self._accumulator >= step - 1e-12 and not self._stop:
            self._accumulator -= step
            self.fixed_step()
            self._end_profile_frame()
            n += 1
        return n

    def step_frames(self, n: int = 1) -> None:
        """Manual mode: run exactly ``n`` fixed steps."""
        for _ in range(int(n)):
            if self._stop:
                break
            self.fixed_step()
            self._end_profile_frame()

    def _end_profile_frame(self) -> None:
        if self.profiler.enabled:
            self.profiler.end_frame()

    # ------------------------------------------------------------- rendering
    def _ensure_renderer(self, headless: bool) -> RendererBackend:
        if self.renderer is None:
            if self.renderer_factory is None:
                raise KinemaError("App: rendering needs a renderer: pass renderer= or renderer_factory= "
                                  "(e.g. kinema.render.Renderer; the demo runner does)")
            self.renderer = self.renderer_factory()
            self._owns_renderer = True
        is_open = getattr(self.renderer, "is_open", None)
        if is_open is None or not is_open():
            self.renderer.open(self.width, self.height, self.title, headless)
            self._owns_renderer = True
        return self.renderer

    def render(self) -> np.ndarray | None:
        """Render one frame with the renderer (opened offscreen when not open yet).

        Returns the captured (H, W, 3) uint8 image when ``capture_dir`` is set, else None.
        """
        r = self._ensure_renderer(headless=self.mode != "standalone")
        prof = self.profiler if self.profiler.enabled else None
        t0 = _time.perf_counter()
        self.scene.transforms.update_world()
        if prof is not None:
            prof.add("transforms", "draw", _time.perf_counter() - t0)
        r.begin_frame()
        self.scene.draw(r, prof)
        self._call("draw", r)
        r.begin_gui()
        ui = getattr(r, "ui", None)
        self.scene.gui(ui, prof)
        self._call("gui", ui)
        if self.show_profiler:
            self.profiler.gui(ui)
        r.end_frame()
        self._call("after_frame", r)
        self.time.render_frame += 1
        if self.capture_dir is None:
            return None
        image = r.capture()
        path = self.capture_dir / f"frame_{self.time.frame:06d}.png"
        write_png(path, image)
        self._captures.append(path)
        return image

    # ------------------------------------------------------------------ runs
    def run(self, frames: int | None = None) -> RunStats:
        """Run in the App's mode and return when done.

        Args:
            frames: headless: fixed steps to run (None: until ``app.stop()``);
                standalone: rendered frames (None: until the window closes).
        """
        if self.mode == "manual":
            raise KinemaError("App.run: a manual App is driven with app.step(dt) / app.step_frames(n)")
        self._stop = False
        self._captures = []
        t0 = _time.perf_counter()
        steps0, rendered0 = self.time.frame, self.time.render_frame
        try:
            if self.mode == "headless":
                self._run_headless(frames)
            else:
                self._run_standalone(frames)
        finally:
            self.close()
        return RunStats(self.mode, self.time.frame - steps0, self.time.render_frame - rendered0,
                        _time.perf_counter() - t0, self.time.total, list(self._captures))

    def _run_headless(self, frames: int | None) -> None:
        if self.capture_dir is not None:
            self.capture_dir.mkdir(parents=True, exist_ok=True)
        self.start()
        n = 0
        while not self._stop and (frames is None or n < frames):
            self.fixed_step()
            n += 1
            if self.render_enabled and n % self.render_every == 0:
                self.render()
            self._end_profile_frame()

    def _run_standalone(self, frames: int | None) -> None:
        r = self._ensure_renderer(headless=False)
        if self.capture_dir is not None:
            self.capture_dir.mkdir(parents=True, exist_ok=True)
        self.start()
        last = _time.perf_counter()
        rendered = 0
        while not self._stop and r.is_open() and (frames is None or rendered < frames):
            now = _time.perf_counter()
            self._accumulator += min(now - last, self.max_steps_per_frame * self.time.fixed_dt)
            last = now
            live = r.read_input()
            steps = 0
            while self._accumulator >= self.time.fixed_dt - 1e-12 and not self._stop:
                self._accumulator -= self.time.fixed_dt
                self.fixed_step(live)
                live = replace(live, keys_pressed=_EMPTY, mouse_wheel=0.0,
                               mouse_delta=np.zeros(2, np.float32))
                steps += 1
            if steps == 0:  # keep presses for the next step
                self._pending_pressed = self._pending_pressed | live.keys_pressed
            self.render()
            rendered += 1
            self._end_profile_frame()


def write_png(path: Path, image: np.ndarray) -> None:
    """Write an (H, W, 3|4) uint8 image (imageio, from the render extra, imported now)."""
    try:
        import imageio.v3 as iio
    except ImportError as exc:  # pragma: no cover - render extra missing
        raise KinemaError(f"writing {path} needs imageio (install kinema[render])") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, np.ascontiguousarray(image))
