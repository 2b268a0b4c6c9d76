"""``kinema demo styles``: a Bandai-Namco biped walking that switches style live (normal,
angry, old, proud, tired, ...), with inertialized transitions (:mod:`kinema.control.styles`).

Headless it cycles the styles every ``--every`` frames and writes, per style segment, the
gait features (:func:`kinema.control.styles.style_gait_features`: speed, cadence, step
length, head height and lean, arm swing); in a window keys 1-9 pick the style.

Drawing: the shared data has no character of the Bandai skeleton, so the walker is the
bundled Geno (or ``--character``), retargeted pose by pose (:func:`kinema.retargeting.skin.character_skin`);
the procedural body only when retargeting is impossible (with a warning). ``metrics.json``
names the character and, per rendered frame, where it was drawn.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from kinema.control.styles import DEFAULT_STYLES, FPS, StyleLibrary, StylePlayer, style_gait_features
from kinema.demos._skin import frame_record, style_skin
from kinema.engine import stick
from kinema.motion import Motion
from kinema.retargeting.skin import NO_SKIN, Skin
from kinema.serve import LiveClip, ServedClip

DESCRIPTION = "styles: a Bandai biped switching walking styles live (normal, angry, old, proud, tired...)"
OUT, FRAMES = "out/demo_styles", 600


# ---------------------------------------------------------------------- the demo
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--styles", default=",".join(DEFAULT_STYLES), help="comma-separated Bandai styles to load")
    parser.add_argument("--every", type=int, default=120, help="headless: frames per style before switching")
    parser.add_argument("--character", type=Path, default=None,
                        help="character to skin, retargeted from the Bandai skeleton (default: the bundled Geno)")




class StyleProgram:
    """Headless: cycles the styles every ``every`` frames. Window: keys 1-9 pick a style,
    the stick / WASD steers."""

    def __init__(self, player: StylePlayer, every: int | None, skin: Skin | None = None) -> None:
        self.player, self.every, self.skin = player, every, skin
        self.views: list[dict] = []   # per rendered frame: where the walker was drawn
        self.frame, self.heading = 0, 0.0
        self.poses: list[np.ndarray] = []
        self.styles_shown: list[str] = []
        self.pose = player.pose()
        self.view = None   # the camera framing the walker (first drawn frame)

    def start(self, app) -> None:
        self.app = app

    def update(self, dt: float) -> None:
        styles = self.player.lib.styles
        if self.every:
            self.player.set_style(styles[(self.frame // self.every) % len(styles)])
            self.heading = 0.0
        else:
            inp = self.app.input
            names = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
            for i, style in enumerate(styles[:9]):
                if names[i] in inp.keys_pressed or str(i + 1) in inp.keys_pressed:
                    self.player.set_style(style)
            s = stick(inp)
            if np.hypot(*s) > 0.3:
                self.heading = math.atan2(s[0], s[1])
        self.pose = self.player.step(self.heading)
        self.poses.append(self.pose[1])
        self.styles_shown.append(self.player.style)
        self.frame += 1

    def draw(self, renderer) -> None:
        rot, pos = self.pose
        if self.skin is not None:
            renderer.draw_character(self.skin.character, *self.skin.pose(rot, pos))
        else:
            renderer.draw_body(pos, self.player.lib.skeleton.parents, color=(0.35, 0.55, 0.85, 1.0), thickness=0.5)
        from kinema.render.camera import frame_subject  # a renderer exists: raylib is there
        self.view = frame_subject(renderer, self.view, pos, yaw=float(np.arctan2(3.2, 3.6)))

    def after_frame(self, renderer) -> None:
        """The frame as shown: its camera and where it drew the walker, to ``views``."""
        if not hasattr(renderer, "project"):
            return
        rot, pos = self.pose
        if self.skin is not None:
            drawn = self.skin.pose(rot, pos)[1]
            hips, body = drawn[self.skin.hips], drawn[self.skin.body]
        else:
            hips, body = pos[self.player.hips], None
        self.views.append(frame_record(renderer, self.frame - 1, pos, hips, body))

    def gui(self, ui) -> None:
        styles = self.player.lib.styles
        keys = [f"{i + 1} {s}" for i, s in enumerate(styles[:9])]
        # three keys a row: one long row made the panel reach over the character's head
        rows = ["keys: " + "  ".join(keys[i:i + 3]) for i in range(0, len(keys), 3)]
        ui.lines("styles", [f"style: {self.player.style}  (switches {self.player.switches})", *rows], width=300)


    def metrics(self) -> dict:
        poses = np.asarray(self.poses)
        segments = []
        shown = self.styles_shown
        edges = [0] + [i for i in range(1, len(shown)) if shown[i] != shown[i - 1]] + [len(shown)]
        for a, b in zip(edges[:-1], edges[1:]):
            settle = min(a + 20, b)                     # after the transition has blended out
            if b - settle >= 30:
                segments.append({"style": shown[a], "frames": b - settle,
                                 **style_gait_features(poses[settle:b], self.player.lib.skeleton)})
        return {"styles": list(self.player.lib.styles), "switches": self.player.switches, "segments": segments,
                **(self.skin.summary() if self.skin is not None else NO_SKIN),
                **({"rendered_frames": self.views} if self.views else {})}


def programs(args: argparse.Namespace) -> list[tuple[str, StyleProgram]]:
    """Headless (and manual): the styles in turn, ``--every`` frames each; standalone: keys 1-9."""
    styles = [s for s in args.styles.split(",") if s]
    library = StyleLibrary.load(styles)
    skin = style_skin(library, args.character)
    if skin is not None:
        print(f"demo styles: the shared data has no Bandai character; drawing {skin.name}, retargeted")
    player = StylePlayer(library, styles[0])
    return [("styles", StyleProgram(player, args.every if args.mode != "standalone" else None, skin))]


def report(m: dict) -> str:
    return "; ".join(f"{s['style']} speed {s['speed_m_s']:.2f} m/s cadence {s['cadence_steps_s']:.2f}/s "
                     f"lean {s['lean_m']:+.2f} m" for s in m["segments"])


def live_styles(library: StyleLibrary, style: str):
    """A :class:`kinema.serve.LiveClip` walking (straight on, or turning to a heading) whose style and
    heading are chosen in the browser (a style dropdown, a heading slider in degrees)."""

    class LiveStyles(LiveClip):
        def __init__(self) -> None:
            super().__init__("styles (live: pick one)", library.skeleton.parents, None, color=(90, 140, 220), fps=FPS)
            self.player, self.heading = StylePlayer(library, style), 0.0

        def add_gui(self, gui) -> None:
            with gui.add_folder("style"):
                pick = gui.add_dropdown("style", tuple(library.styles), initial_value=self.player.style)
                turn = gui.add_slider("walk heading", -180.0, 180.0, 5.0, 0.0)
            pick.on_update(lambda _e: self.player.set_style(pick.value))
            turn.on_update(lambda _e: setattr(self, "heading", float(turn.value)))

        def advance(self):
            return self.player.step(math.radians(self.heading))

    return LiveStyles()


def served_clips(args: argparse.Namespace) -> list:
    """``kinema serve styles``: a live walker whose style is picked in the page, then one
    recorded clip that switches through every style."""
    styles = [s for s in args.styles.split(",") if s]
    library = StyleLibrary.load(styles)
    player = StylePlayer(library, styles[0])
    frames = args.frames or FRAMES
    rot, pos = [], []
    for f in range(frames):
        player.set_style(styles[(f // args.every) % len(styles)])
        r, p = player.step(0.0)
        rot.append(r)
        pos.append(p)
    m = Motion.from_global(library.skeleton, FPS, np.array(rot), np.array(pos), name="styles")
    recorded = ServedClip("styles: " + " -> ".join(styles), m, None, color=(90, 140, 220))
    return [live_styles(library, styles[0]), recorded]
