"""``Renderer``: kinema's raylib renderer, the engine's :class:`RendererBackend`.

One pipeline renders either to a window (standalone) or to an offscreen target (headless,
a hidden window's context under Xvfb or on a real display); the frame always lands in an
offscreen framebuffer first, which is what :meth:`Renderer.capture` and recording read
and what the window shows.

Per frame::

    r.begin_frame()                 # camera update, empty draw queue
    r.draw_character(model, rot, pos); r.draw_skeleton(...); r.debug.spheres(...)
    r.begin_gui()                   # runs shadow/scene/post passes, then 2D on top
    r.ui.button(...)
    r.end_frame()                   # overlays, present (window), record
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyray as rl

from kinema.engine.protocols import InputFrame
from kinema.render import gl
from kinema.render.body import body_capsules
from kinema.render.camera import CameraRig, project
from kinema.render.characters import CharacterModel, skinning_matrices
from kinema.render.debug import DebugDraw
from kinema.render.pipeline import CharacterDraw, Effects, FrameQueue, Pipeline
from kinema.render.recorder import Recorder
from kinema.render.ui import Ui

_KEY_NAMES = {
    **{chr(c): getattr(rl, f"KEY_{chr(c).upper()}") for c in range(ord("a"), ord("z") + 1)},
    **{str(d): getattr(rl, f"KEY_{name}")
       for d, name in enumerate(['ZERO', 'ONE', 'TWO', 'THREE', 'FOUR', 'FIVE', 'SIX', 'SEVEN', 'EIGHT', 'NINE'])},
    "space": rl.KEY_SPACE, "escape": rl.KEY_ESCAPE, "enter": rl.KEY_ENTER, "tab": rl.KEY_TAB,
    "backspace": rl.KEY_BACKSPACE, "left_shift": rl.KEY_LEFT_SHIFT, "right_shift": rl.KEY_RIGHT_SHIFT,
    "left_control": rl.KEY_LEFT_CONTROL, "right_control": rl.KEY_RIGHT_CONTROL,
    "left_alt": rl.KEY_LEFT_ALT, "up": rl.KEY_UP, "down": rl.KEY_DOWN, "left": rl.KEY_LEFT,
    "right": rl.KEY_RIGHT, "home": rl.KEY_HOME, "end": rl.KEY_END, "page_up": rl.KEY_PAGE_UP,
    "page_down": rl.KEY_PAGE_DOWN, "comma": rl.KEY_COMMA, "period": rl.KEY_PERIOD,
    **{f"f{i}": getattr(rl, f"KEY_F{i}") for i in range(1, 13)},
}
_MOUSE_NAMES = {"left": rl.MOUSE_BUTTON_LEFT, "right": rl.MOUSE_BUTTON_RIGHT, "middle": rl.MOUSE_BUTTON_MIDDLE}
_PAD_AXES = {"left_x": rl.GAMEPAD_AXIS_LEFT_X, "left_y": rl.GAMEPAD_AXIS_LEFT_Y,
             "right_x": rl.GAMEPAD_AXIS_RIGHT_X, "right_y": rl.GAMEPAD_AXIS_RIGHT_Y,
             "left_trigger": rl.GAMEPAD_AXIS_LEFT_TRIGGER, "right_trigger": rl.GAMEPAD_AXIS_RIGHT_TRIGGER}
_PAD_BUTTONS = {"a": rl.GAMEPAD_BUTTON_RIGHT_FACE_DOWN, "b": rl.GAMEPAD_BUTTON_RIGHT_FACE_RIGHT,
                "x": rl.GAMEPAD_BUTTON_RIGHT_FACE_LEFT, "y": rl.GAMEPAD_BUTTON_RIGHT_FACE_UP,
                "lb": rl.GAMEPAD_BUTTON_LEFT_TRIGGER_1, "rb": rl.GAMEPAD_BUTTON_RIGHT_TRIGGER_1,
                "start": rl.GAMEPAD_BUTTON_MIDDLE_RIGHT, "back": rl.GAMEPAD_BUTTON_MIDDLE_LEFT,
                "dpad_up": rl.GAMEPAD_BUTTON_LEFT_FACE_UP, "dpad_down": rl.GAMEPAD_BUTTON_LEFT_FACE_DOWN,
                "dpad_left": rl.GAMEPAD_BUTTON_LEFT_FACE_LEFT, "dpad_right": rl.GAMEPAD_BUTTON_LEFT_FACE_RIGHT}


def display_available() -> bool:
    """True when an X11/Wayland display is set (needed for a window; headless rendering
    without one goes through OSMesa)."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class Renderer:
    """kinema's renderer (implements :class:`kinema.engine.protocols.RendererBackend`).

    Args:
        effects: pipeline switches (shadows, SSAO, bloom, FXAA, floor, colours).
        camera: the camera rig (orbit by default).
        target_fps: frame cap of the window (0: uncapped); headless is never capped.
        show_fps: draw the FPS/profiler overlay.
        headless_dt: seconds per frame assumed by camera smoothing when headless.
        camera_controls: in a window, move the camera with mouse/keyboard each frame
            (orbit drag/wheel, free-fly WASD), except while the mouse is over a GUI panel.

    Attributes:
        ui: the immediate-mode GUI (:class:`kinema.render.ui.Ui`) for ``gui(ui)`` callbacks.
        debug: the frame's :class:`~kinema.render.debug.DebugDraw` batch.
        camera: the :class:`~kinema.render.camera.CameraRig`.
        effects: the live :class:`~kinema.render.pipeline.Effects` (change any time).
    """

    def __init__(self, effects: Effects | None = None, camera: CameraRig | None = None,
                 target_fps: int = 60, show_fps: bool = True, headless_dt: float = 1.0 / 30.0,
                 camera_controls: bool = True):
        self.effects = effects or Effects()
        self.camera = camera or CameraRig()
        self.debug = DebugDraw()
        self.ui = Ui(self)
        self.target_fps = int(target_fps)
        self.show_fps = bool(show_fps)
        self.show_profiler = False
        self.headless_dt = float(headless_dt)
        self.camera_controls = bool(camera_controls)
        self.headless = True
        self.width = self.height = 0
        self.frame_index = 0
        self.fps = 0.0
        self._pipeline: Pipeline | None = None
        self._queue = FrameQueue()
        self._open = False
        self._in_gui = False
        self._in_frame = False
        self._recorder: Recorder | None = None
        self._last_time = 0.0
        self._frame_start = 0.0
        self._timings: dict[str, float] = {}
        self._models: list[CharacterModel] = []
        self._model_cache: dict[int, tuple[object, CharacterModel]] = {}
        self.view = np.eye(4)
        self.projection = np.eye(4)

    # ------------------------------------------------------------------ lifecycle
    def open(self, width: int = 1280, height: int = 720, title: str = "kinema", headless: bool = False) -> None:
        """Open a window (``headless=False``) or an offscreen target of ``width`` x ``height``.

        Headless uses a hidden window's context when a display is set (a real one or Xvfb),
        and otherwise GLFW's null platform with an OSMesa context (Debian ``libosmesa6``),
        so it renders without any X server.
        """
        if self._open:
            raise gl.RenderError("renderer is already open; close it first")
        use_null = headless and not display_available()
        if not headless and not display_available():
            raise gl.RenderError("no display for a window: set DISPLAY (or run under xvfb-run), "
                                 "or open the renderer headless")
        rl.set_trace_log_level(rl.LOG_WARNING)
        rl.glfw_init_hint(rl.GLFW_PLATFORM, rl.GLFW_PLATFORM_NULL if use_null else rl.GLFW_ANY_PLATFORM)
        rl.set_config_flags(rl.FLAG_WINDOW_HIDDEN if headless else rl.FLAG_WINDOW_RESIZABLE)
        rl.init_window(int(width), int(height), str(title))
        if not rl.is_window_ready():
            hint = " (no display: install libosmesa6 for OSMesa, or run under xvfb-run)" if use_null else ""
            raise gl.RenderError(f"raylib could not open a window / OpenGL 3.3 context{hint}")
        rl.set_exit_key(rl.KEY_NULL)
        rl.set_target_fps(0 if headless else self.target_fps)
        self.headless = bool(headless)
        self.width, self.height = int(width), int(height)
        self._pipeline = Pipeline(self.width, self.height, self.effects)
        self.ui.setup()
        self._open = True
        self._last_time = time.perf_counter()
        gl.gl_errors()  # start clean

    def is_open(self) -> bool:
        if not self._open:
            return False
        return True if self.headless else not rl.window_should_close()

    def resize(self, width: int, height: int) -> None:
        """Change the frame size (the offscreen target; the window too when there is one)."""
        width, height = int(width), int(height)
        if not self.headless:
            rl.set_window_size(width, height)
        self.width, self.height = width, height
        self.pipeline.resize(width, height)

    def close(self) -> None:
        """Stop recording, free GPU resources and close the window/context."""
        if not self._open:
            return
        self.stop_recording()
        for m in self._models:
            m.unload()
        self._models = []
        self._model_cache = {}
        self._pipeline.unload()
        self._pipeline = None
        rl.close_window()
        gl.forget_context()
        self._open = False

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pipeline(self) -> Pipeline:
        if self._pipeline is None:
            raise gl.RenderError("renderer is not open")
        return self._pipeline

    # ------------------------------------------------------------------ content
    def load_character(self, character) -> CharacterModel:
        """Upload a :class:`kinema.io.character.Character` (meshes, textures) for drawing."""
        self.pipeline  # noqa: B018 - needs a context
        model = CharacterModel(character)
        self._models.append(model)
        return model

    def model_for(self, character) -> CharacterModel:
        """The GPU model of a :class:`Character`, uploaded on first use and cached."""
        if isinstance(character, CharacterModel):
            return character
        key = id(character)
        entry = self._model_cache.get(key)
        if entry is None or entry[0] is not character:
            entry = (character, self.load_character(character))
            self._model_cache[key] = entry
        return entry[1]

    def draw_character(self, model, global_rotations=None, global_positions=None,
                       tint=(1.0, 1.0, 1.0, 1.0), bones: np.ndarray | None = None) -> None:
        """Queue a skinned character in the pose given by world joint rotations (J, 4) and
        positions (J, 3), or by precomputed skinning matrices ``bones`` (J, 4, 4). With no
        pose, the bind pose is drawn.

        ``model`` is a :class:`CharacterModel` or a :class:`~kinema.io.character.Character`
        (uploaded once and cached)."""
        model = self.model_for(model)
        if bones is None:
            if global_rotations is None:
                bones = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_joints, 4, 4))
            else:
                bones = skinning_matrices(model.character, global_rotations, global_positions)
        self._queue.characters.append(CharacterDraw(model, np.ascontiguousarray(bones, np.float32),
                                                    np.asarray(tint, np.float32).reshape(4)))

    def draw_actor(self, actor, tint=(1.0, 1.0, 1.0, 1.0)) -> None:
        """Draw a :class:`kinema.engine.actor.Actor`: its skinned character when it has one
        whose joints it drives (same count, or every character joint found by name), else a
        procedural body."""
        rot, pos = actor.global_rotations(), actor.global_positions()
        ch = getattr(actor, "character", None)
        if ch is not None and ch.has_mesh:
            if rot.shape[0] != ch.skeleton.num_joints:
                index = {n: i for i, n in enumerate(actor.skeleton.names)}
                idx = [index.get(n, -1) for n in ch.skeleton.names]
                if min(idx) >= 0:
                    rot, pos = rot[idx], pos[idx]
            if rot.shape[0] == ch.skeleton.num_joints:
                self.draw_character(ch, rot, pos, tint=tint)
                return
        self.draw_body(pos, actor.parents)

    def draw_body(self, positions, parents, color=(0.85, 0.55, 0.35, 1.0), thickness: float = 1.0) -> None:
        """Procedural body for a skeleton without mesh: a capsule per bone (world positions (J, 3))."""
        a, b, r = body_capsules(positions, parents, thickness)
        self.debug.capsules(a, b, r, color)

    # debug drawing, delegated to the batch (see kinema.render.debug.DebugDraw)
    def draw_line(self, a, b, color=(1, 1, 1, 1), width: float = 2.0) -> None:
        self.debug.lines(a, b, color, width)

    def draw_lines(self, a, b, color=(1, 1, 1, 1), width: float = 2.0) -> None:
        self.debug.lines(a, b, color, width)

    def draw_points(self, p, color=(1, 1, 1, 1), size: float = 6.0) -> None:
        self.debug.points(p, color, size)

    def draw_sphere(self, c, radius=0.05, color=(1, 1, 1, 1)) -> None:
        self.debug.spheres(c, radius, color)

    def draw_arrow(self, a, b, color=(1, 1, 1, 1), width: float = 3.0) -> None:
        self.debug.arrows(a, b, color, width)

    def draw_axes(self, transforms, size: float = 0.2) -> None:
        self.debug.axes(transforms, size)

    def draw_text(self, position, text: str, color=(1, 1, 1, 1), size: int = 16) -> None:
        self.debug.text(position, text, color, size)

    def draw_trajectory(self, positions, directions=None, current=None, **kw) -> None:
        self.debug.trajectory(positions, directions, current, **kw)

    def draw_contacts(self, positions, mask, **kw) -> None:
        self.debug.contacts(positions, mask, **kw)

    def draw_skeleton(self, positions, parents, color=(0.95, 0.95, 0.95, 1.0), **kw) -> None:
        self.debug.skeleton(positions, parents, color, **kw)

    def draw_velocities(self, positions, velocities, **kw) -> None:
        self.debug.velocities(positions, velocities, **kw)

    # ------------------------------------------------------------------ frame
    def begin_frame(self) -> None:
        """Start a frame: update the camera, clear the draw queue."""
        if not self._open:
            raise gl.RenderError("renderer is not open")
        now = time.perf_counter()
        dt = self.headless_dt if self.headless else max(now - self._last_time, 1e-6)
        frame_dt = max(now - self._last_time, 1e-6)
        self.fps = 1.0 / frame_dt if self.fps == 0 else 0.9 * self.fps + 0.1 / frame_dt
        self._last_time = now
        self._frame_start = now
        if not self.headless:
            w, h = rl.get_screen_width(), rl.get_screen_height()
            if (w, h) != (self.width, self.height) and w > 0 and h > 0:
                self.width, self.height = w, h
                self._pipeline.resize(w, h)
        if not self.headless and self.camera_controls and not self.ui.wants_mouse:
            self.camera.handle_input(self.read_input(), dt)
        self.camera.update(dt)
        self.debug.clear()
        self._queue = FrameQueue()
        self._in_frame, self._in_gui = True, False

    def _render_scene(self) -> None:
        cam = self.camera.camera
        aspect = self.width / max(self.height, 1)
        self.view = cam.view()
        self.projection = cam.projection(aspect)
        self._queue.lines = self.debug.line_vertices()
        self._queue.solids = self.debug.solid_vertices()
        t0 = time.perf_counter()
        self._timings["draw calls (python)"] = t0 - self._frame_start
        # the shadow map follows what the camera looks at (in fixed and free mode the rig's
        # focus can be anywhere: a stale focus left the visible scene without shadows)
        self.pipeline.render(self._queue, self.view, self.projection, cam.position, cam.target)
        for k, v in self.pipeline.timings.items():
            self._timings[k] = v

    def _render_texture(self):
        p = self.pipeline.output
        return rl.RenderTexture(p.id, rl.Texture(p.color, p.width, p.height, 1, rl.PIXELFORMAT_UNCOMPRESSED_R8G8B8A8),
                                rl.Texture(p.depth, p.width, p.height, 1, rl.PIXELFORMAT_UNCOMPRESSED_R8G8B8A8))

    def begin_gui(self) -> None:
        """Render the 3D scene, then start 2D drawing (3D text labels first, then GUI)."""
        if self._in_gui:
            return
        self._render_scene()
        t0 = time.perf_counter()
        rl.begin_texture_mode(self._render_texture())
        self._in_gui = True
        self._gui_start = t0
        vp = self.projection @ self.view
        for pos, text, color, size in self.debug.texts:
            px, _, vis = project(pos[None], vp, self.width, self.height)
            if vis[0]:
                c = rl.Color(*[int(v) for v in np.clip(color * 255, 0, 255)])
                rl.draw_text(text, int(px[0, 0]), int(px[0, 1]), size, c)
        self.ui.begin()

    def end_frame(self) -> None:
        """Finish the frame: overlays, present to the window, append to a recording."""
        if not self._in_frame:
            raise gl.RenderError("end_frame() without begin_frame()")
        if not self._in_gui:
            self.begin_gui()
        self.ui.end()
        self._timings["gui"] = time.perf_counter() - self._gui_start
        if self.show_fps:
            self._draw_overlay()
        rl.end_texture_mode()
        if not self.headless:
            out = self.pipeline.output
            rl.begin_drawing()
            rl.clear_background(rl.BLACK)
            tex = rl.Texture(out.color, out.width, out.height, 1, rl.PIXELFORMAT_UNCOMPRESSED_R8G8B8A8)
            rl.draw_texture_pro(tex, rl.Rectangle(0, 0, out.width, -out.height),
                                rl.Rectangle(0, 0, rl.get_screen_width(), rl.get_screen_height()),
                                rl.Vector2(0, 0), 0.0, rl.WHITE)
            rl.end_drawing()
        self._in_frame = self._in_gui = False
        if self._recorder is not None:
            self._recorder.add(self.capture())
        self.frame_index += 1

    def _draw_overlay(self) -> None:
        lines = [f"{self.fps:5.1f} FPS  {self.width}x{self.height}"]
        if self.show_profiler:
            lines += [f"{k:>20s} {v * 1000:6.2f} ms" for k, v in self._timings.items()]
        h = 18 * len(lines) + 6
        rl.draw_rectangle(4, 4, 250, h, rl.Color(0, 0, 0, 140))
        for i, s in enumerate(lines):
            rl.draw_text(s, 10, 8 + 18 * i, 16, rl.Color(230, 240, 230, 255))

    @property
    def timings(self) -> dict[str, float]:
        """Seconds spent per stage in the last frame (CPU side)."""
        return dict(self._timings)

    def read_input(self) -> InputFrame:
        """Keyboard, mouse and gamepad state (empty when headless)."""
        if self.headless or not self._open:
            return InputFrame()
        down = frozenset(n for n, k in _KEY_NAMES.items() if rl.is_key_down(k))
        pressed = frozenset(n for n, k in _KEY_NAMES.items() if rl.is_key_pressed(k))
        mp, md = rl.get_mouse_position(), rl.get_mouse_delta()
        buttons = frozenset(n for n, b in _MOUSE_NAMES.items() if rl.is_mouse_button_down(b))
        axes, pad_buttons = {}, frozenset()
        if rl.is_gamepad_available(0):
            axes = {n: float(rl.get_gamepad_axis_movement(0, a)) for n, a in _PAD_AXES.items()}
            pad_buttons = frozenset(n for n, b in _PAD_BUTTONS.items() if rl.is_gamepad_button_down(0, b))
        return InputFrame(keys_down=down, keys_pressed=pressed,
                          mouse_position=np.array([mp.x, mp.y], np.float32),
                          mouse_delta=np.array([md.x, md.y], np.float32),
                          mouse_buttons=buttons, mouse_wheel=float(rl.get_mouse_wheel_move()),
                          gamepad_axes=axes, gamepad_buttons=pad_buttons)

    def capture(self) -> np.ndarray:
        """The last rendered frame as (H, W, 3) uint8 RGB, read from the framebuffer."""
        return self.pipeline.output.read_rgb()

    # ------------------------------------------------------------------ recording
    def start_recording(self, path: str | Path, fps: float = 30.0) -> Recorder:
        """Record every following frame to ``path``: ``*.mp4`` or a folder of PNGs."""
        self.stop_recording()
        self._recorder = Recorder(path, fps)
        return self._recorder

    def stop_recording(self) -> Path | None:
        """Finish the recording; returns its path (None when not recording)."""
        if self._recorder is None:
            return None
        rec, self._recorder = self._recorder, None
        rec.close()
        return rec.path

    @property
    def recording(self) -> bool:
        return self._recorder is not None

    # ------------------------------------------------------------------ helpers
    @property
    def view_projection(self) -> np.ndarray:
        """(4, 4) projection @ view of the last rendered frame."""
        return self.projection @ self.view

    def project(self, points):
        """Pixels (..., 2), NDC depth and visibility of world ``points`` in the last frame."""
        return project(points, self.view_projection, self.width, self.height)

    def gl_errors(self) -> list[int]:
        """OpenGL errors raised since the last call (empty list when none)."""
        return gl.gl_errors()
