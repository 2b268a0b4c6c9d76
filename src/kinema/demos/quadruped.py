"""``kinema demo quadruped``: the MANN dog steered in four gaits (walk, pace, trot, canter).

A motion-matching controller (:mod:`kinema.control.quadruped` over :mod:`kinema.matching.quadruped`) over the 11 MANN dog takes
(60 fps BVH, played at 30 fps, mirrored copies included): gait labels are measured from the
footfall pattern of the data, each search is restricted to the commanded gait, transitions
are inertialized and planted paws are locked by leg IK. The dog character
(``characters/dog/dog.glb``) is skinned to it through a
:class:`~kinema.retargeting.WorldBinding`: the GLB is the BVH skeleton's mirror image
(every local offset with x negated), so the binding draws its mirror image, whose joint
frames are the BVH's (skinned as stored, every bone of the mesh turned 180 degrees off
its joints).

Standalone: WASD/arrows or the left stick steer (relative to the world: up is +Z), keys
1-4 (gamepad a/b/x/y) choose walk/pace/trot/canter. Headless (``--headless --frames N
--out DIR``) follows ``--gait`` and ``--heading`` (or ``--tour``: every gait in turn, each
toward a new heading) and writes ``metrics.json`` (per command: the direction travelled
against the commanded one, the measured footfall pattern and gait, the speed; per rendered
frame its camera, where the dog's body joints were drawn and the largest angle between a
skinned bone and its joints, ``bone_error_deg``) and ``quadruped.mp4`` when an OpenGL
context exists.
"""
from __future__ import annotations

import argparse
import math

import numpy as np

import kinema.io
from kinema.control.quadruped import DogController
from kinema.data import optional_path
from kinema.demos._skin import frame_record
from kinema.engine import stick
from kinema.matching import quadruped as q
from kinema.motion import Motion
from kinema.retargeting import WorldBinding
from kinema.serve import LiveClip, ServedClip

DESCRIPTION = "quadruped: MANN dog, motion matching with walk/pace/trot/canter, steering, paw locking"
OUT, FRAMES, FPS = "out/demo_quadruped", 240, q.FPS
GAIT_KEYS = {"one": "walk", "two": "pace", "three": "trot", "four": "canter",
             "1": "walk", "2": "pace", "3": "trot", "4": "canter"}
PAD_BUTTONS = {"a": "walk", "b": "pace", "x": "trot", "y": "canter"}
# joints inside the dog's mesh (not the thin legs and tail): where a test finds the dog drawn
BODY_JOINTS = ("Hips", "Spine1", "Neck", "LeftUpLeg", "RightUpLeg", "LeftShoulder", "RightShoulder")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gait", choices=q.GAITS, default="trot", help="headless: commanded gait")
    parser.add_argument("--heading", type=float, default=90.0,
                        help="headless: commanded direction, degrees about +Y (0 = +Z, 90 = +X)")
    parser.add_argument("--tour", action="store_true",
                        help="headless: every gait in turn for --frames/4 frames, turning 90 degrees each time")
    parser.add_argument("--no-lock", action="store_true", help="no paw locking")


def _direction(deg: float) -> np.ndarray:
    r = math.radians(deg)
    return np.array([math.sin(r), math.cos(r)])


def schedule(args: argparse.Namespace, frames: int) -> list[tuple[int, str, float]]:
    """Headless commands ``(first frame, gait, heading degrees)``."""
    if args.tour:
        n = max(1, frames // len(q.GAITS))
        return [(i * n, g, args.heading + 90.0 * i) for i, g in enumerate(q.GAITS)]
    return [(0, args.gait, args.heading)]


class DogProgram:
    """Feeds the controller from a schedule (headless) or from the player's input."""

    def __init__(self, controller: DogController, binding: WorldBinding | None = None, commands=None) -> None:
        self.c, self.binding, self.commands = controller, binding, commands
        self.gait, self.heading = (commands[0][1], commands[0][2]) if commands else ("trot", 0.0)
        self.frame = 0
        self.view = None   # the camera framing the dog (first drawn frame)
        self.poses: list[np.ndarray] = []
        self.gaits: list[str] = []
        self.headings: list[float] = []
        self.pose = None
        self.views: list[dict] = []   # per rendered frame (headless): camera, body pixels, bone error

    def start(self, app) -> None:
        self.app = app
        self.pose = self.c.pose()

    def update(self, dt: float) -> None:
        direction = None
        if self.commands is not None:
            for first, gait, heading in self.commands:
                if self.frame >= first:
                    self.gait, self.heading = gait, heading
            direction = _direction(self.heading)
        else:
            inp = self.app.input
            for key, gait in GAIT_KEYS.items():
                if key in inp.keys_pressed:
                    self.gait = gait
            for button, gait in PAD_BUTTONS.items():
                if button in inp.gamepad_buttons:
                    self.gait = gait
            s = stick(inp)
            if np.hypot(*s) > 0.1:
                self.heading = math.degrees(math.atan2(s[0], s[1]))
            direction = _direction(self.heading)   # it keeps going the last way (no idle gait in the data)
        self.pose = self.c.step(direction, self.gait)
        self.poses.append(self.pose[1])
        self.gaits.append(self.gait)
        self.headings.append(self.heading)
        self.frame += 1

    def draw(self, renderer) -> None:
        if self.pose is None:
            return
        rot, pos = self.pose
        sk = self.c.db.skeleton
        if self.binding is not None:
            renderer.draw_character(self.binding.character, *self.binding.pose(rot, pos))
        else:
            renderer.draw_body(pos, sk.parents, color=(0.75, 0.55, 0.35, 1.0))
        locked = [k for k in range(4) if self.c.locks[k] is not None]
        if locked:
            renderer.draw_sphere(np.array([self.c.locks[k] for k in locked]), 0.03, (0.95, 0.2, 0.2, 1.0))
        hips = pos[0] * np.array([1, 0, 1])
        d = _direction(self.heading)
        renderer.draw_arrow(hips + [0, 0.02, 0], hips + [d[0] * 0.8, 0.02, d[1] * 0.8], (0.2, 0.5, 1.0, 1.0))
        from kinema.render.camera import frame_subject  # a renderer exists: raylib is there
        first = self.view is None and self.binding is not None
        box = np.subtract(*self.binding.character.bounds()[::-1]) if first else None
        # sized from the dog's mesh, with room for a galloping dog the camera trails
        self.view = frame_subject(renderer, self.view, pos, box=box, yaw=float(np.arctan2(1.6, 2.2)), pitch=0.3,
                                  scale=1.3)

    def after_frame(self, renderer) -> None:
        """The frame as shown: its camera, where it drew the dog's body joints and how far
        its skinned bones turned from its joints, to ``views``."""
        if not hasattr(renderer, "project") or self.pose is None:
            return
        rot, pos = self.pose
        if self.binding is None:
            self.views.append(frame_record(renderer, self.frame - 1, pos, pos[0]))
            return
        crot, cpos = self.binding.pose(rot, pos)
        names = self.binding.character.skeleton.names
        body = cpos[[names.index(n) for n in BODY_JOINTS]]
        view = frame_record(renderer, self.frame - 1, pos, cpos[names.index("Hips")], body)
        view["bone_error_deg"] = float(self.binding.bone_errors(crot, cpos).max())
        self.views.append(view)

    def gui(self, ui) -> None:
        ui.lines("quadruped", [f"gait {self.gait} (1-4)  heading {self.heading:.0f} deg",
                                f"database frame {self.c.index}  searches {self.c.searches}",
                                "WASD / arrows / stick: steer"])

    def metrics(self) -> dict:
        db = self.c.db
        return {"database_frames": db.num_frames, "gait_speeds_m_s": db.speeds,
                "gait_frames": {g: int((db.gait == i).sum()) for i, g in enumerate(q.GAITS)},
                "searches": self.c.searches,
                "segments": evaluate(np.asarray(self.poses), self.gaits, self.headings, db.skeleton),
                "character": None if self.binding is None else "skinned",
                "character_mirrored": None if self.binding is None else self.binding.mirrored,
                **({"rendered_frames": self.views} if self.views else {})}


def _character():
    path = optional_path("characters", "dog", "dog.glb", what="the dog character", instead="a stick figure")
    if path is None:
        return None
    return kinema.io.load_character(path)


def _binding(db: q.Database) -> WorldBinding | None:
    """The dog character bound to the database's skeleton, or None without the character."""
    character = _character()
    return None if character is None else WorldBinding(character, db.skeleton)


def evaluate(poses: np.ndarray, gaits: list[str], headings: list[float], skeleton, settle: int = 30) -> list[dict]:
    """Per command segment (after ``settle`` frames of turning and switching): the direction
    travelled (cosine with the commanded one), the measured gait, correlations, speed."""
    out = []
    edges = [0] + [i for i in range(1, len(gaits)) if (gaits[i], headings[i]) != (gaits[i - 1], headings[i - 1])]
    edges.append(len(gaits))
    for a, b in zip(edges[:-1], edges[1:]):
        a2 = min(a + settle, b - 1)
        seg = poses[a2:b]
        if len(seg) < 20:
            continue
        travel = seg[-1, 0] - seg[0, 0]
        travel[1] = 0
        d = _direction(headings[a])
        dist = float(np.hypot(travel[0], travel[2]))
        gait = q.measure_gait(seg, skeleton)
        out.append({"gait_commanded": gaits[a], "heading_deg": headings[a], "frames": int(b - a2),
                    "distance_m": dist, "direction_cos": float((travel[0] * d[0] + travel[2] * d[1]) / max(dist, 1e-9)),
                    **gait})
    return out


def programs(args: argparse.Namespace) -> list[tuple[str, DogProgram]]:
    """Headless (and manual): the commanded schedule; standalone: the player steers."""
    db = q.build_database(q.default_paths())
    commands = schedule(args, args.frames) if args.mode != "standalone" else None
    controller = DogController(db, foot_lock=not args.no_lock, start_gait=(commands or [(0, "trot")])[0][1])
    return [("quadruped", DogProgram(controller, _binding(db), commands))]


def report(m: dict) -> str:
    return "; ".join(f"{s['gait_commanded']} toward {s['heading_deg']:.0f} deg -> measured {s['gait']} "
                     f"cos {s['direction_cos']:.3f}, {s['speed_m_s']:.2f} m/s" for s in m["segments"])


def live_dog(db: q.Database, binding: WorldBinding | None = None, gait: str = "trot", heading: float = 0.0,
             lock: bool = True):
    """A :class:`kinema.serve.LiveClip` steering the dog from the browser: a gait dropdown
    and a heading slider (degrees about +Y, 0 = +Z); the binding's character skinned."""
    character = None if binding is None else binding.character

    class LiveDog(LiveClip):
        def __init__(self) -> None:
            parents = character.skeleton.parents if character is not None else db.skeleton.parents
            super().__init__("dog (live: steer it)", parents, character, color=(200, 160, 110), fps=q.FPS)
            self.controller = DogController(db, foot_lock=lock, start_gait=gait)
            self.gait, self.heading = gait, heading

        def add_gui(self, gui) -> None:
            with gui.add_folder("dog"):
                g = gui.add_dropdown("gait", q.GAITS, initial_value=self.gait)
                h = gui.add_slider("heading", -180.0, 180.0, 5.0, self.heading)
            g.on_update(lambda _e: setattr(self, "gait", g.value))
            h.on_update(lambda _e: setattr(self, "heading", float(h.value)))

        def advance(self):
            rot, pos = self.controller.step(_direction(self.heading), self.gait)
            return (rot, pos) if binding is None else binding.pose(rot, pos)

    return LiveDog()


def served_clips(args: argparse.Namespace) -> list:
    """``kinema serve quadruped``: the dog steered live from the browser (gait, heading),
    then one recorded rollout per gait (``--frames`` each), the dog skinned."""
    db = q.build_database(q.default_paths())
    frames = args.frames or FRAMES
    character = _character()
    binding = None if character is None else WorldBinding(character, db.skeleton)
    clips = [live_dog(db, binding, args.gait, args.heading, not args.no_lock)]
    for i, gait in enumerate(q.GAITS):
        c = DogController(db, foot_lock=not args.no_lock, start_gait=gait)
        d = _direction(args.heading + 90 * i)
        rot, pos = zip(*(c.step(d, gait) for _ in range(frames)))
        m = Motion.from_global(db.skeleton, q.FPS, np.array(rot), np.array(pos), name=gait)
        clips.append(ServedClip(f"dog {gait}", m, character, color=(200, 160, 110), match="world"))
    return clips
