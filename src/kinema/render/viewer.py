"""The interactive clip viewer: timeline, play/pause, speed, mirror, camera modes, effect
switches, a live root-speed plot. The motion editor behind ``kinema view``
(:class:`kinema.render.editor.Editor`) builds on it (clip browser, feature overlays).

Keys: space play/pause, left/right step a frame, m mirror, c next camera mode,
1-4 toggle shadows/SSAO/bloom/FXAA, p profiler overlay, r start/stop recording an MP4
(``<clip>_<n>.mp4`` in ``record_dir``) from the framebuffer.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from kinema.render.camera import MODES
from kinema.render.playback import Clip


class Viewer:
    """Playback state plus the per-frame update/draw/gui of the viewer.

    Args:
        clip: what to show.
        camera: initial camera mode.
    """

    def __init__(self, clip: Clip, camera: str = "follow", record_dir: str | Path = ".") -> None:
        self.clip = clip
        self.record_dir = Path(record_dir)
        self._recordings = 0
        self.time = 0.0
        self.playing = True
        self.speed = 1.0
        self.mirror = False
        self.skeleton = False
        self.camera_mode = camera
        self._last = None
        f = clip.focus
        self.root_speed = np.r_[0.0, np.linalg.norm(np.diff(f[:, [0, 2]], axis=0), axis=1) * clip.motion.fps]

    @property
    def frame(self) -> int:
        return int(np.clip(round(self.time * self.clip.motion.fps), 0, self.clip.num_frames - 1))

    def update(self, dt: float, inp) -> None:
        """Advance playback and react to keys."""
        keys = inp.keys_pressed
        if "space" in keys:
            self.playing = not self.playing
        if "m" in keys:
            self.mirror = not self.mirror
        if "c" in keys:
            self.camera_mode = MODES[(MODES.index(self.camera_mode) + 1) % len(MODES)]
        step = 1.0 / self.clip.motion.fps
        if "right" in keys:
            self.playing, self.time = False, self.time + step
        if "left" in keys:
            self.playing, self.time = False, self.time - step
        if self.playing:
            self.time += dt * self.speed
        duration = (self.clip.num_frames - 1) / self.clip.motion.fps
        if duration > 0:
            self.time = self.time % duration if self.time >= 0 else duration + self.time % -duration
        else:
            self.time = 0.0

    def gui(self, ui, renderer) -> None:
        self.playback_panel(ui, renderer)
        self.effects_panel(ui, renderer)
        # live speed plot of the last 2 seconds above the timeline
        f = self.frame
        lo = max(0, f - int(2 * self.clip.motion.fps))
        ui.plot("root speed (m/s)", self.root_speed[lo:f + 1], lo=0.0, hi=max(3.0, float(self.root_speed.max())),
                rect=(10, renderer.height - 120, 300, 70))
        self.timeline(ui, renderer)

    def playback_panel(self, ui, renderer, x: float | None = None, y: float = 10) -> None:
        """Clip name and frame, play/pause, speed, mirror, skeleton, camera mode."""
        x = renderer.width - 290 if x is None else x
        with ui.panel("Playback", x, y, 280):
            ui.label(f"{self.clip.motion.name}  frame {self.frame}/{self.clip.num_frames - 1}")
            if ui.button("pause" if self.playing else "play"):
                self.playing = not self.playing
            self.speed = ui.slider("speed", self.speed, 0.0, 3.0)
            self.mirror = ui.checkbox("mirror", self.mirror)
            self.skeleton = ui.checkbox("skeleton", self.skeleton)
            modes = list(MODES) + ([self.camera_mode] if self.camera_mode not in MODES else [])
            self.camera_mode = modes[ui.dropdown("camera", modes, modes.index(self.camera_mode))]

    def effects_panel(self, ui, renderer, x: float | None = None, y: float = 260) -> None:
        """Shadows, SSAO, bloom, FXAA, profiler switches and the MP4 recording button."""
        e = renderer.effects
        x = renderer.width - 290 if x is None else x
        with ui.panel("Effects", x, y, 280):
            e.shadows = ui.checkbox("shadows", e.shadows)
            e.ssao = ui.checkbox("SSAO", e.ssao)
            e.bloom = ui.checkbox("bloom", e.bloom)
            e.fxaa = ui.checkbox("FXAA", e.fxaa)
            renderer.show_profiler = ui.checkbox("profiler", renderer.show_profiler)
            if ui.button("stop recording" if renderer.recording else "record MP4"):
                self.toggle_recording(renderer)

    def timeline(self, ui, renderer) -> None:
        """The time slider along the bottom; dragging it pauses playback."""
        w, h = renderer.width, renderer.height
        duration = (self.clip.num_frames - 1) / self.clip.motion.fps
        t = ui.slider("time", self.time, 0.0, max(duration, 1e-3), rect=(10, h - 40, w - 20, 28), fmt="{:.2f}s")
        if abs(t - self.time) > 1e-6:
            self.time, self.playing = t, False

    def toggle_recording(self, renderer) -> Path | None:
        """Start recording to a new MP4 in ``record_dir``, or finish the current one."""
        if renderer.recording:
            path = renderer.stop_recording()
            print(f"kinema view: recorded {path}")
            return path
        self._recordings += 1
        path = self.record_dir / f"{self.clip.motion.name or 'clip'}_{self._recordings}.mp4"
        renderer.start_recording(path, fps=60.0)
        return path

    def step(self, renderer) -> None:
        """Read input, update, draw and present one frame."""
        now = time.perf_counter()
        dt = 0.0 if self._last is None else min(now - self._last, 0.1)
        self._last = now
        inp = renderer.read_input()
        if "p" in inp.keys_pressed:
            renderer.show_profiler = not renderer.show_profiler
        if "r" in inp.keys_pressed:
            self.toggle_recording(renderer)
        for key, name in (("1", "shadows"), ("2", "ssao"), ("3", "bloom"), ("4", "fxaa")):
            if key in inp.keys_pressed:
                setattr(renderer.effects, name, not getattr(renderer.effects, name))
        self.update(dt, inp)
        self.present(renderer)

    def frame_camera(self, renderer) -> None:
        """Point the renderer's camera rig as ``camera_mode`` asks (``free`` flies by the user's
        keys; any other name, e.g. ``"manual"``, leaves the rig as the caller set it)."""
        if self.camera_mode not in MODES:   # "manual": the rig is the caller's
            return
        if self.camera_mode == "free":
            if renderer.camera.mode != "free":
                renderer.camera.set_mode("free")
        else:
            self.clip.frame_camera(renderer.camera, self.camera_mode, self.frame)

    def draw(self, renderer) -> None:
        """Queue the 3D content of the current frame."""
        self.clip.draw(renderer, self.frame, mirror=self.mirror, skeleton=self.skeleton)

    def present(self, renderer) -> None:
        """Camera, 3D content and GUI of the current frame, rendered and shown."""
        self.frame_camera(renderer)
        renderer.begin_frame()
        self.draw(renderer)
        renderer.begin_gui()
        self.gui(renderer.ui, renderer)
        renderer.end_frame()
