"""The motion editor behind ``kinema view``: browse the clips of a folder, scrub a timeline,
mirror, and see every :mod:`kinema.features` quantity on the character.

Overlays (each switchable in the "Features" panel, with F1-F9, or :meth:`Editor.toggle`):

=================== ===========================================================
``root``            the ground-projected root (simulation bone) and its facing arrow
``trajectory``      past (blue) and future (orange) root trajectory with facings
``joints``          past (violet) / future (green) trajectories of feet and hands, with
                    each sample's rotation (6D feature: local x red, y green)
``velocities``      joint velocity vectors (cyan, 0.1 s of travel), root velocity (pink, 0.5 s)
``contacts``        a marker on each contact joint: green in contact, red in the air
``phases``          a dial per contact joint showing its local phase
``plots``           root speed and contact signals over the whole clip, with a cursor
``skeleton``        the motion's own joints as a stick figure
``body``            the character (skinned mesh or procedural body)
=================== ===========================================================

Keys, besides the viewer's (space, left/right, m, c, 1-4, p, r): n / page down next clip,
b / page up previous clip, h hide the GUI.

Features are computed once per clip and mirror state (vectorised over all frames) and then
only indexed per frame. The mirrored view is a clip of ``Motion.mirror()`` with features
computed on that motion, so the character and its features always agree.

Headless, the editor is driven from code::

    ed = Editor(renderer=r)           # r: an open kinema.render.Renderer
    ed.open("folder/")                # lists clips; loads the first
    ed.select(3); ed.seek(40); ed.toggle("velocities")
    image = ed.render_frame()         # (H, W, 3) uint8
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyray as rl

import kinema.io
from kinema.errors import KinemaError
from kinema.io import format_module
from kinema.render.editor.browser import Browser
from kinema.render.editor.features import ClipFeatures, FeatureSetup, feature_setup
from kinema.render.editor.overlays import AIR_COLOR, CONTACT_COLOR, DEFAULT_OVERLAYS, OVERLAYS, draw_features
from kinema.render.playback import Clip
from kinema.render.ui import ROW
from kinema.render.viewer import Viewer

PLOT_HEIGHT = 56
LOAD_ERRORS = (KinemaError, OSError, ValueError)   # what a broken file may raise while loading
LIST_ROWS = 4


def _ellipsis(text: str, n: int) -> str:
    """``text`` cut to its last ``n`` characters behind "..." when longer."""
    return text if len(text) <= n else "..." + text[-(n - 3):]




@dataclass(eq=False)
class MirroredClip(Clip):
    """A clip of ``source.motion.mirror()`` whose skinned character is drawn as the mirror
    image of the source's skinned character (see :func:`mirrored_skinning`); its focus,
    heading, joints and features are those of the mirrored motion."""

    source: Clip | None = None

    def skinning(self, frame: int) -> np.ndarray:
        """(J, 4, 4) skinning matrices of the character at ``frame``."""
        from kinema.render.characters import mirrored_skinning, skinning_matrices
        rot, pos = self.source.pose(frame)
        return mirrored_skinning(self.character, skinning_matrices(self.character, rot, pos))

    def draw(self, renderer, frame: int, mirror: bool = False, tint=(1.0, 1.0, 1.0, 1.0),
             skeleton: bool = False) -> None:
        if self.character is None or self.source is None or mirror:
            super().draw(renderer, frame, mirror, tint, skeleton)
            return
        renderer.draw_character(self.character, bones=self.skinning(frame), tint=tint)
        if skeleton:
            if "joints" not in self._poses:
                self._poses["joints"] = self.motion.global_positions()
            f = int(np.clip(frame, 0, self.num_frames - 1))
            renderer.draw_skeleton(self._poses["joints"][f], self.motion.parents, (1.0, 1.0, 1.0, 1.0), width=2.0)


@dataclass(eq=False)
class LoadedClip:
    """One browsed clip: its :class:`~kinema.render.playback.Clip`, the mirrored clip
    (made on first use) and the features of each, computed once.

    Attributes:
        clip: the clip as loaded; ``setup`` the feature rules for its skeleton.
        computations: how many feature computations ran (one per mirror state at most).
        path: the file; ``animations`` its animation names (GLB/FBX; empty for one-take
            formats), ``animation`` the one shown.
    """

    clip: Clip
    setup: FeatureSetup
    computations: int = 0
    path: Path | None = None
    animations: list = field(default_factory=list)
    animation: str | None = None
    _mirrored: Clip | None = field(default=None, repr=False)
    _features: dict = field(default_factory=dict, repr=False)

    def view(self, mirror: bool = False) -> Clip:
        """The clip as shown: the original, or a :class:`MirroredClip` of ``motion.mirror()``."""
        if not mirror:
            return self.clip
        if self._mirrored is None:
            self._mirrored = MirroredClip(self.clip.motion.mirror(), self.clip.character, source=self.clip)
        return self._mirrored

    def features(self, mirror: bool = False) -> ClipFeatures:
        """Features of the shown motion (computed on the first call per mirror state)."""
        key = bool(mirror)
        if key not in self._features:
            self._features[key] = ClipFeatures.compute(self.view(key).motion, self.setup)
            self.computations += 1
        return self._features[key]


def dial_layout(rect, count: int) -> tuple[np.ndarray, float]:
    """Centres (count, 2) in pixels and radius of the phase dials inside panel ``rect``
    (x, y, w, h): one row below the title bar."""
    x, y, w, _ = rect
    cell = (w - 12) / max(count, 1)
    radius = float(min(22.0, cell / 2 - 6))
    cx = x + 6 + (np.arange(count) + 0.5) * cell
    cy = np.full(count, y + ROW + 6 + radius)
    return np.stack([cx, cy], -1), radius


def dial_needles(centres: np.ndarray, radius: float, phases: np.ndarray) -> np.ndarray:
    """Needle tips (count, 2) in pixels: phase 0 points up, turning clockwise."""
    a = 2 * np.pi * np.asarray(phases, np.float64)
    return centres + radius * np.stack([np.sin(a), -np.cos(a)], -1)


def _rl_color(c) -> rl.Color:
    c = np.clip(np.round(np.asarray(c, np.float64) * 255), 0, 255).astype(int)
    return rl.Color(int(c[0]), int(c[1]), int(c[2]), int(c[3]) if c.size > 3 else 255)


class Editor(Viewer):
    """The motion editor: a :class:`~kinema.render.viewer.Viewer` over a browsed folder
    with feature overlays.

    Args:
        path: a motion file or a folder (searched recursively); more can be opened later.
        character: a character file (GLB, FBX, character.bin) or a loaded
            :class:`~kinema.io.character.Character` skinned by every clip that shares
            joint names with it; None draws a procedural body (or a GLB/FBX clip's own mesh).
        camera: initial camera mode (``orbit``, ``follow``, ``fixed``, ``free`` or
            ``manual``: the renderer's rig is left as the caller sets it).
        renderer: the renderer :meth:`render_frame` draws with by default.
        overlays: names switched on (default :data:`DEFAULT_OVERLAYS`).
        keep: clips kept loaded by the browser.
    """

    def __init__(self, path: str | Path | None = None, character=None, camera: str = "orbit",
                 renderer=None, overlays=DEFAULT_OVERLAYS, record_dir: str | Path = ".", keep: int = 8) -> None:
        unknown = set(overlays) - set(OVERLAYS)
        if unknown:
            raise KinemaError(f"unknown overlays {sorted(unknown)}; choose from {list(OVERLAYS)}")
        self.character = kinema.io.load_character(character) if isinstance(character, (str, Path)) else character
        self.renderer = renderer
        self.record_dir = Path(record_dir)
        self._recordings = 0
        self.overlays = {name: name in overlays for name in OVERLAYS}
        self.time, self.playing, self.speed, self.mirror = 0.0, True, 1.0, False
        self.camera_mode = camera
        self.show_gui = True
        self.message = ""
        self.browser: Browser | None = None
        self.index = 0
        self.entry: LoadedClip | None = None
        self._last = None
        self._scroll = 0
        self._snap = True              # jump the camera (new clip, seek, mirror) instead of gliding
        self._shown = None
        self._shown_clip = None
        self._keep = keep
        if path is not None:
            self.open(path)

    # ------------------------------------------------------------------ clips
    def open(self, path: str | Path) -> list[str]:
        """Browse ``path`` (file or folder) and show its first clip that loads (files that
        fail are named in the GUI message); returns the clip names. Raises
        :class:`~kinema.errors.KinemaError` when no clip loads (the editor keeps what it showed)."""
        before = (self.browser, self.entry, self.index, self._scroll)
        self.browser, self.entry, self._scroll = Browser(path, loader=self._load, keep=self._keep), None, 0
        errors = self._first_loadable(range(len(self.browser)))
        if self.entry is None:
            self.browser, self.entry, self.index, self._scroll = before
            raise KinemaError(f"{path}: no clip could be loaded ({errors[0]})")
        return self.browser.names

    def _first_loadable(self, order) -> list[str]:
        """Select the first clip of ``order`` (indices) that loads; returns the errors met."""
        errors = []
        for i in order:
            try:
                self.select(i)
                break
            except LOAD_ERRORS as exc:
                errors.append(f"{self.browser.names[i]}: {exc}")
        if errors and self.entry is not None:
            self.message = f"skipped {errors[0]}" + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "")
        return errors

    @property
    def clips(self) -> list[str]:
        """Names of the browsed clips (relative paths)."""
        return [] if self.browser is None else self.browser.names

    def _load(self, path: Path, animation: str | None = None, own_character=None) -> LoadedClip:
        """Read ``path`` (its ``animation`` when given) into a :class:`LoadedClip`. A GLB/FBX
        with a mesh skins itself unless the editor has a character (``own_character``: the
        file's character, already loaded)."""
        module = format_module(path)
        animations: list[str] = []
        if hasattr(module, "animation_names"):
            try:
                animations = [str(n) for n in module.animation_names(path)]
            except KinemaError:
                animations = []
        motion = kinema.io.load(path) if animation is None else kinema.io.load(path, animation=animation)
        ch = self.character
        if ch is None and path.suffix.lower() in kinema.io.MESH_SUFFIXES:
            ch = own_character if own_character is not None else kinema.io.mesh_character(path)
            ch = ch if ch is not None and ch.has_mesh else None
        if ch is not None:
            from kinema.retargeting import fit
            try:
                motion = fit(motion, ch)
            except KinemaError as exc:
                self.message = f"{path.name}: cannot retarget onto {ch.name} ({exc}); procedural body"
                ch = None
        if ch is not None and "retarget" in motion.metadata:
            self.message = f"{path.name}: retargeted onto {ch.name} (scale {motion.metadata['retarget']['scale']:.2f})"
        if ch is not None and not set(ch.skeleton.names) & set(motion.skeleton.names):
            self.message = f"{path.name}: no joint of it is the character's and it is no humanoid to retarget; procedural body"
            ch = None
        if not motion.name:
            motion.name = path.stem
        entry = LoadedClip(Clip(motion, ch), feature_setup(motion.skeleton, motion.fps))
        entry.path, entry.animations = path, animations
        entry.animation = animation if animation is not None else (animations[0] if animations else None)
        return entry

    def select_animation(self, name: str) -> LoadedClip:
        """Show animation ``name`` of the current file (GLB/FBX with several animations)."""
        entry = self.entry
        if entry is None or name not in entry.animations:
            have = [] if entry is None else entry.animations
            raise KinemaError(f"no animation {name!r} in this clip; it has {have}")
        own = entry.clip.character if self.character is None else None
        self.entry = self._load(entry.path, name, own)
        self.browser.replace(self.index, self.entry)
        self.time = 0.0
        self._snap = True
        return self.entry

    def select(self, i: int) -> LoadedClip:
        """Show clip ``i`` (wrapping around) from its first frame; loads it on first use."""
        if self.browser is None:
            raise KinemaError("no clips: open a file or folder first")
        i = int(i) % len(self.browser)
        self.message = ""
        self.entry = self.browser.load(i)
        self.index = i
        self.time = 0.0
        if not self._scroll <= i < self._scroll + LIST_ROWS:   # keep the selection visible in the list
            self._scroll = max(0, i - LIST_ROWS // 2)
        return self.entry

    def next(self, step: int = 1) -> None:
        """The next (or with a negative ``step`` previous) clip; clips that fail to load
        are skipped and named in the GUI message."""
        if self.browser is None:
            return
        n = len(self.browser)
        self._first_loadable([(self.index + step * k) % n for k in range(1, n + 1)])

    def previous(self) -> None:
        self.next(-1)

    @property
    def clip(self) -> Clip:
        """The clip on screen (the mirrored one while mirroring)."""
        if self.entry is None:
            raise KinemaError("no clip: open a file or folder first")
        return self.entry.view(self.mirror)

    def features(self, mirror: bool | None = None) -> ClipFeatures:
        """Features of the current clip (as shown, or of the given mirror state)."""
        if self.entry is None:
            raise KinemaError("no clip: open a file or folder first")
        return self.entry.features(self.mirror if mirror is None else mirror)

    @property
    def skeleton(self) -> bool:
        return self.overlays["skeleton"]

    @skeleton.setter
    def skeleton(self, on: bool) -> None:
        self.overlays["skeleton"] = bool(on)

    @property
    def root_speed(self) -> np.ndarray:
        return self.features().root_speed

    # ------------------------------------------------------------------ controls
    def seek(self, frame: int) -> int:
        """Go to ``frame`` (clamped) and pause; returns the frame shown."""
        f = int(np.clip(frame, 0, self.clip.num_frames - 1))
        self.time = f / self.clip.motion.fps
        self.playing = False
        self._snap = True
        return self.frame

    def toggle(self, name: str, on: bool | None = None) -> bool:
        """Switch overlay ``name`` (or ``"mirror"``) on/off (flip when ``on`` is None);
        returns the new state."""
        if name == "mirror":
            self.mirror = (not self.mirror) if on is None else bool(on)
            return self.mirror
        if name not in self.overlays:
            raise KinemaError(f"unknown overlay {name!r}; choose from {list(OVERLAYS)} or 'mirror'")
        self.overlays[name] = (not self.overlays[name]) if on is None else bool(on)
        return self.overlays[name]

    def update(self, dt: float, inp) -> None:
        keys = inp.keys_pressed
        if keys & {"n", "page_down"}:
            self.next()
        if keys & {"b", "page_up"}:
            self.previous()
        if "h" in keys:
            self.show_gui = not self.show_gui
        for i, name in enumerate(OVERLAYS):
            if f"f{i + 1}" in keys:
                self.toggle(name)
        super().update(dt, inp)

    # ------------------------------------------------------------------ drawing
    def frame_camera(self, renderer) -> None:
        shown = (self.browser, self.index, self.mirror)
        if self._shown is None or shown[:2] != self._shown[:2] or self.entry.clip is not self._shown_clip:
            # a new clip: orbit and follow distances suit its size (figures in cm, dogs, ...)
            self.entry.clip.fit_view(renderer)
        super().frame_camera(renderer)
        if (self._snap or shown != self._shown) and self.camera_mode not in ("free", "manual"):
            renderer.camera.snap()
        self._snap, self._shown, self._shown_clip = False, shown, self.entry.clip

    def draw(self, renderer) -> None:
        f = self.frame
        if self.overlays["body"]:
            self.clip.draw(renderer, f, skeleton=self.overlays["skeleton"])
        elif self.overlays["skeleton"]:
            renderer.draw_skeleton(self.features().positions[f], self.clip.motion.parents, width=2.0)
        draw_features(renderer, self.features(), f, {k for k, v in self.overlays.items() if v})

    def render_frame(self, renderer=None) -> np.ndarray:
        """Render the current frame (camera, character, overlays, GUI) without advancing
        time; returns the (H, W, 3) uint8 image."""
        r = renderer or self.renderer
        if r is None:
            raise KinemaError("render_frame needs a renderer (pass one, or Editor(renderer=...))")
        self.present(r)
        return r.capture()

    def gui(self, ui, renderer) -> None:
        if not self.show_gui:
            return
        self.playback_panel(ui, renderer)
        self.effects_panel(ui, renderer, y=222)
        self.clips_panel(ui, renderer)
        self.features_panel(ui, renderer)
        feats = self.features()
        if self.overlays["phases"] and feats.contact_joints.size:
            self.phase_dials(ui, renderer, feats)
        if self.overlays["plots"]:
            self.plots(ui, renderer, feats)
        self.timeline(ui, renderer)

    def clips_panel(self, ui, renderer, x: float = 10, y: float = 34, width: float = 260) -> None:
        """The clip list (click to open, mouse wheel scrolls), previous/next buttons and
        the load message. Only the visible rows go to raygui (its list takes 1 KB of text)."""
        names = self.clips
        list_h = LIST_ROWS * 30.0 + 4
        with ui.panel(f"Clips ({self.index + 1}/{len(names)})", x, y, width, height=ROW + list_h + 2 * 28 + 16):
            box = rl.Rectangle(x + 6, y + ROW + 6, width - 12, list_h)
            if not renderer.headless:
                m = rl.get_mouse_position()
                if box.x <= m.x <= box.x + box.width and box.y <= m.y <= box.y + box.height:
                    self._scroll -= int(np.sign(rl.get_mouse_wheel_move()))
            self._scroll = int(np.clip(self._scroll, 0, max(len(names) - LIST_ROWS, 0)))
            shown = names[self._scroll:self._scroll + LIST_ROWS]
            text = ";".join(_ellipsis(n.replace(";", ","), 34) for n in shown)
            scroll = rl.ffi.new("int *", 0)
            active = rl.ffi.new("int *", self.index - self._scroll if 0 <= self.index - self._scroll < len(shown) else -1)
            before = int(active[0])
            rl.gui_list_view(box, text, scroll, active)
            by = y + ROW + list_h + 12
            if ui.button("< previous (b)", rect=(x + 6, by, width / 2 - 9, ROW)):
                self.previous()
            elif ui.button("next (n) >", rect=(x + width / 2 + 3, by, width / 2 - 9, ROW)):
                self.next()
            elif int(active[0]) != before and 0 <= int(active[0]) < len(shown):
                i = self._scroll + int(active[0])
                try:
                    self.select(i)
                except LOAD_ERRORS as exc:
                    self.message = f"{names[i]}: {exc}"
            anims = self.entry.animations
            if len(anims) > 1 and not self.message:
                cur = anims.index(self.entry.animation) if self.entry.animation in anims else 0
                pick = ui.dropdown("animation", anims, cur, rect=(x + 6, by + 28, width - 12, ROW))
                if pick != cur:
                    try:
                        self.select_animation(anims[pick])
                    except LOAD_ERRORS as exc:
                        self.message = f"{anims[pick]}: {exc}"
            else:
                ui.label(self.message or f"{self.entry.setup.preset} features, {self.clip.motion.fps:g} fps",
                         rect=(x + 6, by + 28, width - 12, ROW))

    def features_panel(self, ui, renderer, x: float = 10, y: float = 262, width: float = 260) -> None:
        """A checkbox per overlay."""
        with ui.panel("Features", x, y, width):
            for i, (name, text) in enumerate(OVERLAYS.items()):
                self.overlays[name] = ui.checkbox(f"{text} (F{i + 1})", self.overlays[name])

    def phase_dials(self, ui, renderer, feats: ClipFeatures) -> tuple[np.ndarray, float]:
        """Local phase dials (needle coloured by contact) in a panel; returns the dial
        centres (C, 2) and radius."""
        rect = self.phase_rect(renderer, feats.contact_joints.size)
        with ui.panel("Local phases", *rect):
            pass
        centres, radius = dial_layout(rect, feats.contact_joints.size)
        f = self.frame
        tips = dial_needles(centres, radius, feats.phases[f])
        names = self.clip.motion.skeleton.names
        for k, j in enumerate(feats.contact_joints):
            c = rl.Vector2(float(centres[k, 0]), float(centres[k, 1]))
            col = _rl_color(CONTACT_COLOR if feats.contacts[f, k] else AIR_COLOR)
            rl.draw_circle_v(c, radius, rl.Color(40, 42, 48, 255))
            rl.draw_circle_lines(int(c.x), int(c.y), radius, rl.Color(200, 200, 200, 255))
            rl.draw_line_ex(c, rl.Vector2(float(tips[k, 0]), float(tips[k, 1])), 3.0, col)
            label = str(names[int(j)])[:9]
            rl.draw_text(label, int(c.x - radius - 4), int(c.y + radius + 4), 10, rl.Color(60, 60, 60, 255))
        return centres, radius

    @staticmethod
    def phase_rect(renderer, count: int) -> tuple[float, float, float, float]:
        """Where the phase panel goes: right column, below the effects panel."""
        return (renderer.width - 290.0, 430.0, 280.0, ROW + 2 * min(22.0, 268.0 / max(count, 1) / 2 - 6) + 34)

    def plot_rects(self, renderer) -> tuple[tuple, tuple]:
        """Pixel rects (x, y, w, h) of the root-speed and contact plots above the timeline."""
        w, h = renderer.width, renderer.height
        return ((10, h - 48 - 2 * PLOT_HEIGHT - 8, w - 20, PLOT_HEIGHT), (10, h - 48 - PLOT_HEIGHT, w - 20, PLOT_HEIGHT))

    def plots(self, ui, renderer, feats: ClipFeatures) -> None:
        """Root speed and contact signals over the whole clip with a cursor at the frame;
        clicking or dragging on them scrubs (and pauses)."""
        speed_rect, contact_rect = self.plot_rects(renderer)
        n = feats.num_frames
        idx = np.linspace(0, n - 1, int(min(n, max(speed_rect[2], 2)))).round().astype(np.int64)
        ui.plot("root speed (m/s)", feats.root_speed[idx], lo=0.0, hi=max(2.0, float(feats.root_speed.max())),
                rect=speed_rect)
        names = self.clip.motion.skeleton.names
        c = feats.contacts.shape[1]
        if c:
            series = {names[int(j)]: k + 0.8 * feats.contacts[idx, k] for k, j in enumerate(feats.contact_joints)}
            ui.plot("contacts", series, lo=-0.2, hi=c + 0.1, rect=contact_rect)
        bottom = (contact_rect if c else speed_rect)
        if not renderer.headless and rl.is_mouse_button_down(rl.MOUSE_BUTTON_LEFT):   # click/drag scrubs
            m = rl.get_mouse_position()
            if speed_rect[0] <= m.x <= speed_rect[0] + speed_rect[2] and \
                    speed_rect[1] <= m.y <= bottom[1] + bottom[3]:
                self.seek(int(round((m.x - speed_rect[0]) / speed_rect[2] * (n - 1))))
        x = speed_rect[0] + speed_rect[2] * self.frame / max(n - 1, 1)
        rl.draw_line_ex(rl.Vector2(float(x), float(speed_rect[1])),
                        rl.Vector2(float(x), float(bottom[1] + bottom[3])), 2.0, rl.Color(255, 255, 255, 255))
