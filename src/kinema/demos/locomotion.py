"""``kinema demo locomotion``: a biped driven by the retrieval-augmented Mamba controller.

A stick (gamepad left stick, or WASD/arrows) moves a spring-damped simulation object
(:class:`kinema.control.trajectory.TrajectoryController`, walk speeds unless shift/``rb``
is held); its predicted trajectory at +20/+40/+60 frames, relative to the character's own
root, is the controller's 12-d joystick. Keys 1/2/3 (or gamepad x/y/b) switch live between
the retrieval controller, the no-retrieval model and motion-matching playback; key 4 (or
gamepad a) switches to the Bandai walking styles when ``bandai_namco/dataset-1`` is in the
shared data folder: :class:`kinema.control.styles.StylePlayer` walks the character in the
stick's direction at the style's own pace, keys 5-9 or the GUI dropdown pick the style
(normal, angry, old, proud, tired), switched at the best-matching frame with a blend.

The drawn pose of every controller mode has its toes locked while the controller's contacts
say they are planted (:class:`kinema.control.footlock.FootLock`, leg IK): the model's
predicted contacts for the networks, the database's for motion matching. The controller
keeps its own pose; a switch releases the locks without a pop (``--no-foot-lock``: off).

Drawing: the LaFAN1 skinned character (``characters/lafan1_character/character.bin`` in the
shared data folder) when the model's skeleton is LaFAN1's and the file exists, else the
bundled Geno (or ``--character``), retargeted from the model's skeleton pose by pose
(:class:`~kinema.retargeting.Retargeter`); the procedural body (a capsule per bone) only
for a skeleton that is no humanoid; the Bandai styles' walker gets the bundled Geno (or ``--character``),
retargeted (:func:`kinema.demos._skin.style_skin`). The simulation object's
predicted trajectory is drawn on top; the recorded video carries no debug text.

The model: ``--checkpoint``, else the LaFAN1 model in ``models/`` when ``--data`` points at
LaFAN1 BVH files, else the model trained on the bundled GAMES-105 sample. Its database is
rebuilt from the checkpoint's training clips on first run (checked against the
checkpoint's fingerprint) and cached.

Headless (``--headless --frames N --out DIR``): a scripted stick track (walk, turn left,
turn right, stop, walk back; or the ``--input`` track, its shift held to run) is run with
every controller in turn from the same start;
``metrics.json`` gets, per controller, the distance between the character's root and the
simulation object (trajectory following; by default the root is pulled toward the
simulation object as Motion Matching does,
:meth:`~kinema.control.retrieval.controller.RetrievalController.adjust_toward`), heading
error, foot skating (of the drawn toes, as ``kinema eval`` scores it:
:func:`kinema.control.retrieval.metrics.foot_skate`; and, as ``foot_skate_in_contact_cm_s``,
the mean toe speed while the controller's contact label for it is on), speed,
time per frame and whether the foot lock was on (with its time per frame). Each
controller's run is also written as ``locomotion_<controller>.mp4`` (unless ``--no-video``),
and ``metrics.json`` gets, per rendered frame, the camera, the hips' pixel and the drawn
joints' share inside the image and pixel box.
``--controller styles`` runs the styles instead (not part of ``all``): ``--style NAME``
walks one style, ``--styles a,b,c`` switches through them every ``--style-every`` frames;
the metrics hold the gait features (:func:`kinema.control.styles.style_gait_features`) of
each style segment.
"""
from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np

from kinema.control import footlock
from kinema.control.footlock import FootLock
from kinema.control.retrieval.metrics import floor_height, foot_skate
from kinema.control.styles import DEFAULT_STYLES, StyleLibrary, StylePlayer, style_gait_features
from kinema.control.styles import FPS as STYLE_FPS
from kinema.data import shared_path
from kinema.demos._skin import database_skin, frame_record, style_skin
from kinema.engine import stick
from kinema.errors import KinemaError, NonFiniteError
from kinema.maths import angles

DESCRIPTION = "biped locomotion with the retrieval-augmented Mamba controller (switch to no-retrieval / motion matching)"
OUT, FRAMES, RENDER_EVERY = "out/demo_locomotion", 720, 2    # FRAMES: per controller
MODEL_DIR = Path(__file__).resolve().parents[3] / "models"
SAMPLE_MODEL = "retrieval_sample_games105.safetensors"
SAMPLE_BASELINE = "retrieval_sample_games105_noretrieval.safetensors"
LAFAN1_MODEL = "retrieval_lafan1.safetensors"
LAFAN1_BASELINE = "retrieval_lafan1_noretrieval.safetensors"
SWITCH_KEYS = {"1": "retrieval", "2": "no_retrieval", "3": "matching", "4": "styles"}
SWITCH_BUTTONS = {"x": "retrieval", "y": "no_retrieval", "b": "matching", "a": "styles"}
STYLE_KEYS = ("5", "6", "7", "8", "9")        # styles mode: pick the first five loaded styles
STYLE_SETTLE = 20                             # 30 fps frames left out after a switch (blend)
STYLE_MIN_SEGMENT = 30                        # 30 fps frames: shorter segments are not measured

# (seconds, stick x, stick y): +y forward, +x right (kinema.control.trajectory conventions)
TRACK = [(2.0, 0.0, 1.0), (2.5, -0.8, 0.6), (2.5, 0.8, 0.6), (1.5, 0.0, 0.0), (2.0, 0.0, -1.0), (1.5, 0.0, 1.0)]


def scripted_stick(t: float) -> np.ndarray:
    """The headless stick at time ``t`` seconds (the TRACK, repeated)."""
    total = sum(d for d, _, _ in TRACK)
    t = t % total
    for d, x, y in TRACK:
        if t < d:
            return np.array([x, y], np.float64)
        t -= d
    return np.zeros(2)


def pick_models(args) -> tuple[Path, Path | None]:
    """(checkpoint, no-retrieval baseline or None) from the arguments (module docstring)."""
    if args.checkpoint:
        return Path(args.checkpoint), Path(args.baseline) if args.baseline else None
    names = (LAFAN1_MODEL, LAFAN1_BASELINE) if args.data else (SAMPLE_MODEL, SAMPLE_BASELINE)
    model = MODEL_DIR / names[0]
    if not model.is_file():
        raise KinemaError(f"{model}: model not found (train it with `kinema train configs/...` or pass --checkpoint)")
    base = MODEL_DIR / names[1]
    return model, base if base.is_file() else None


def bandai_available() -> bool:
    """Whether the Bandai walks for the styles mode are in the shared data folder."""
    return shared_path("bandai_namco", "dataset-1") is not None


class StyleDriver:
    """The ``styles`` mode: a :class:`~kinema.control.styles.StylePlayer` (Bandai walks,
    30 fps) advanced in the demo's 60 Hz steps and steered toward the simulation object's
    facing. It keeps the poses it showed (30 fps) and their styles for the metrics."""

    def __init__(self, library, style: str, skin=None) -> None:
        self.library, self.skin = library, skin
        self.player = StylePlayer(library, style)
        self.parents = np.asarray(library.skeleton.parents)
        self.pose = self.player.pose()
        self.clock = 0.0
        self.poses: list[np.ndarray] = []
        self.shown: list[str] = []

    @property
    def styles(self) -> list[str]:
        return self.library.styles

    @property
    def style(self) -> str:
        return self.player.style

    def set_style(self, style: str) -> None:
        self.player.set_style(style)

    def place(self, position: np.ndarray, direction: np.ndarray) -> None:
        """Put the walker's root at ``position`` (3,) facing ``direction`` (3,)."""
        self.player.position = np.asarray(position, np.float64) * [1, 0, 1]
        self.player.yaw = float(angles.yaw(direction))
        self.pose = self.player.pose()

    def step(self, direction: np.ndarray, dt: float) -> None:
        """Advance ``dt`` seconds, heading for the floor ``direction`` (3,)."""

        self.clock += dt
        heading = float(angles.yaw(direction))
        while self.clock >= 1.0 / STYLE_FPS - 1e-9:
            self.clock -= 1.0 / STYLE_FPS
            self.pose = self.player.step(heading)
            self.poses.append(self.pose[1])
            self.shown.append(self.player.style)

    @property
    def root(self) -> tuple[np.ndarray, np.ndarray]:
        y = self.player.yaw
        return (np.asarray(self.player.position, np.float32).copy(),
                np.array([np.sin(y), 0.0, np.cos(y)], np.float32))

    def joint_positions(self) -> np.ndarray:
        """World joint positions (J, 3)."""
        return self.pose[1].copy()

    def segments(self) -> list[dict]:
        """Gait features of every style segment shown (after STYLE_SETTLE frames of blend)."""

        poses, shown, out = np.asarray(self.poses), self.shown, []
        edges = [0] + [i for i in range(1, len(shown)) if shown[i] != shown[i - 1]] + [len(shown)]
        for a, b in itertools.pairwise(edges):
            settle = min(a + STYLE_SETTLE, b)
            if b - settle >= STYLE_MIN_SEGMENT:
                out.append({"style": shown[a], "first_frame": settle, "frames": b - settle,
                            **style_gait_features(poses[settle:b], self.library.skeleton)})
        return out


class Locomotion:
    """The program: stick -> simulation springs -> joystick -> controller -> drawn character.

    Args:
        controller: the :class:`RetrievalController` (modes retrieval / no_retrieval / matching).
        script: stick as a function of time (headless) or None (read the gamepad/keyboard).
        walk: walk speeds (else run). adjust: pull the root toward the simulation object.
        character: the :class:`~kinema.retargeting.skin.Skin` drawn for the controller's skeleton, or None (procedural body).
        styles: a :class:`StyleDriver` for the ``styles`` mode, or None when unavailable.
        style_schedule: headless: style as a function of the frame index, or None.
        foot_lock: lock the toes of the drawn (and measured) pose of every controller mode
            with :class:`kinema.control.footlock.FootLock`, driven by the controller's
            contacts (the model's predicted ones, the database's for ``matching``); the
            controller itself keeps its own pose.
    """

    def __init__(self, controller, script=None, walk: bool = True, adjust: bool = True, character=None,
                 styles: StyleDriver | None = None, style_schedule=None, foot_lock: bool = True):

        self.ctl, self.script, self.walk, self.adjust = controller, script, walk, adjust
        self.character, self.styles, self.style_schedule = character, styles, style_schedule
        self.styling = False
        self.view = None                      # the camera framing the character (first drawn frame)
        self.t = 0.0
        self.frame = 0
        self.log: list[tuple] = []
        self.lock = FootLock.for_roles(controller.db.parents, controller.db.roles) if foot_lock else None
        self.shown: tuple[np.ndarray, np.ndarray] | None = None   # world (rotations, positions) drawn
        self.restarts: list[tuple[int, str]] = []   # (frame, mode) where a diverged network was restarted

    @property
    def mode(self) -> str:
        return "styles" if self.styling else self.ctl.mode

    def set_mode(self, mode: str) -> None:
        """Switch live to ``mode`` (a controller mode or ``"styles"``); the character keeps its place."""
        if mode == "styles":
            if self.styles is None:
                raise KinemaError("the styles mode needs the Bandai walks (bandai_namco/dataset-1 in the shared data)")
            if not self.styling:
                self.styles.place(*self.ctl.root)
            self.styling = True
            return
        if self.lock is not None:   # the toes' lock points belong to the previous mode's motion
            if self.styling:
                self.lock.reset()      # the character is placed anew at the walker's root
            elif mode != self.ctl.mode:
                self.lock.release()    # inertialized: the shown toes do not pop
        if self.styling:
            pos, d = self.styles.root
            self.ctl.root_pos[0], self.ctl.root_dir[0] = pos, d
            self.shown = None
        self.styling = False
        self.ctl.set_mode(mode)

    def start(self, app) -> None:
        self.app = app

    def reset(self) -> None:

        self.ctl.reset(0)
        if self.styles is not None:
            self.styles.place(*self.ctl.root)
            self.styles.poses, self.styles.shown = [], []
        self.t = 0.0
        self.frame = 0
        self.log = []
        self.restarts = []
        self.shown = None
        if self.lock is not None:
            self.lock.reset()

    def update(self, dt: float) -> None:
        walk = self.walk
        if self.script is not None:
            s = self.script(self.t)
        else:
            inp = self.app.input
            s = np.asarray(stick(inp), np.float64)
            for key, mode in SWITCH_KEYS.items():
                if key in inp.keys_pressed and (mode != "styles" or self.styles is not None):
                    self.set_mode(mode)
            for button, mode in SWITCH_BUTTONS.items():
                if button in inp.gamepad_buttons and (mode != "styles" or self.styles is not None):
                    self.set_mode(mode)
            if self.styling:
                for key, style in zip(STYLE_KEYS, self.styles.styles):
                    if key in inp.keys_pressed:
                        self.styles.set_style(style)
            walk = not ({"left_shift", "right_shift"} & set(inp.keys_down) or "rb" in inp.gamepad_buttons)
        self.step(s, dt, walk)

    @property
    def traj(self):
        """The simulation object's springs: the controller's own (they live on across mode
        switches and start anew with the controller's reset)."""
        return self.ctl.trajectory

    def restart(self, err: NonFiniteError, s: np.ndarray, dt: float, walk: bool):
        """Start a network whose pose went non-finite again where it stands (the database's
        first pose, the springs at rest there) instead of ending the program, say so, and
        count it in ``restarts`` (the metrics' ``restarts``); returns this frame's simulation."""
        pos, direction = self.ctl.root
        self.ctl.reset(0, pos, direction)
        if self.lock is not None:
            self.lock.reset()
        self.restarts.append((self.frame, self.ctl.mode))
        print(f"demo locomotion: {err}; restarted it where it stood")
        return self.ctl.drive(s, dt, walk=walk, adjust=self.adjust)

    def step(self, s: np.ndarray, dt: float, walk: bool) -> None:
        t0 = time.perf_counter()
        if self.styling:
            sim = self.traj.update(np.asarray(s, np.float64).reshape(1, 2), dt, walk=walk).at(0)
            if self.style_schedule is not None:
                self.styles.set_style(self.style_schedule(self.frame))
            self.styles.step(sim.direction, dt)
            cost = time.perf_counter() - t0
            root_pos, root_dir = self.styles.root
            # the style sets the pace: the simulation follows
            self.traj.sim.position[0] = sim.position = root_pos.astype(np.float64)
            joints = self.styles.joint_positions().copy()
            lock_cost = 0.0
        else:
            try:
                sim = self.ctl.drive(s, dt, walk=walk, adjust=self.adjust)
            except NonFiniteError as err:
                sim = self.restart(err, s, dt, walk)
            cost = time.perf_counter() - t0
            root_pos, root_dir = self.ctl.root
            t0 = time.perf_counter()
            self.shown = self.pose()
            lock_cost = time.perf_counter() - t0
            joints = self.shown[1].copy()
        contacts = np.zeros(2, bool) if self.styling else self.ctl.contacts > 0.5
        self.log.append((root_pos, root_dir, sim.position.copy(), sim.direction.copy(), joints, cost, lock_cost,
                         contacts))
        self.t += dt
        self.frame += 1

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The controller's world pose now (rotations (J, 4), positions (J, 3)), foot-locked
        with the controller's contacts when the lock is on (this advances the lock by one
        60 Hz frame: call it once per step)."""
        rot, pos = self.ctl.world_pose()
        if self.lock is None:
            return rot, pos
        rot, pos = self.lock.apply(rot.astype(np.float64), pos.astype(np.float64), self.ctl.contacts, 1 / 60)
        return rot.astype(np.float32), pos.astype(np.float32)

    def shown_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World pose (rotations (J, 4), positions (J, 3)) drawn for the controller: the one
        of the last step (before the first step, the controller's unlocked pose)."""
        return self.shown if self.shown is not None else self.ctl.world_pose()

    def draw(self, renderer) -> None:
        if getattr(renderer, "debug", None) is None:
            return
        if self.styling:
            joints = self.styles.joint_positions()
            skin = self.styles.skin
            if skin is not None and hasattr(renderer, "draw_character"):
                renderer.draw_character(skin.character, *skin.pose(*self.styles.pose))
            else:
                renderer.draw_body(joints, self.styles.parents, color=(0.35, 0.55, 0.85, 1.0))
        else:
            rot, pos = self.shown_pose()
            if self.character is not None and hasattr(renderer, "draw_character"):
                renderer.draw_character(self.character.character, *self.character.pose(rot, pos))
            else:
                renderer.draw_body(pos, self.ctl.db.parents)
        pred, sim = self.traj.predict(), self.traj.sim.at(0)
        renderer.debug.trajectory(np.vstack([sim.position[None], pred.positions[0]]),
                                  np.vstack([sim.direction[None], pred.directions[0]]))
        from kinema.render.camera import frame_subject  # a renderer exists: raylib is there
        self.view = frame_subject(renderer, self.view, joints if self.styling else pos)

    def hips(self) -> np.ndarray:
        """World position (3,) of the drawn character's hips (its first moving joint)."""
        if self.styling:
            return self.styles.joint_positions()[self.styles.player.hips].copy()
        return self.shown_pose()[1][0].copy()

    def gui(self, ui) -> None:
        panel, label = getattr(ui, "panel", None), getattr(ui, "label", None)
        if panel is None or label is None:
            return
        with panel("locomotion", x=10, y=40, width=420):
            modes = list(SWITCH_KEYS.values())[:3] + (["styles"] if self.styles is not None else [])
            label("keys: " + "  ".join(f"{k} {m}" for k, m in SWITCH_KEYS.items() if m in modes))
            label("stick / WASD: move, shift: run")
            if hasattr(ui, "dropdown"):
                i = ui.dropdown("controller", modes, modes.index(self.mode))
                if modes[i] != self.mode:
                    self.set_mode(modes[i])
            else:
                label(f"controller: {self.mode}")
            if self.styles is not None and hasattr(ui, "dropdown"):
                styles = self.styles.styles
                label("style (keys " + " ".join(f"{k} {s}" for k, s in zip(STYLE_KEYS, styles)) + ")")
                i = ui.dropdown("style", styles, styles.index(self.styles.style))
                if styles[i] != self.styles.style:
                    self.styles.set_style(styles[i])
                    self.set_mode("styles")

    def metrics(self, floor: float | None = None) -> dict:
        """The run's trajectory following, heading, skating against ``floor`` (m; default
        :func:`~kinema.control.retrieval.metrics.floor_height` of the controller's database) and timing."""
        if not self.log:
            return {"frames": 0}
        floor = floor_height(self.ctl.db) if floor is None else floor
        rp = np.array([r[0] for r in self.log])
        rd = np.array([r[1] for r in self.log])
        sp = np.array([r[2] for r in self.log])
        sd = np.array([r[3] for r in self.log])
        joints = np.array([r[4] for r in self.log])
        heading = np.degrees(np.arccos(np.clip((rd * sd).sum(1), -1, 1)))
        travelled = np.linalg.norm(np.diff(rp[:, [0, 2]], axis=0), axis=1).sum()
        out = {"frames": len(self.log), "finite": bool(np.isfinite(joints).all()),
               "restarts": [{"frame": f, "mode": m} for f, m in self.restarts],
               "heading_error_deg": float(heading.mean()), "distance_travelled_m": float(travelled),
               "ms_per_frame": 1e3 * float(np.mean([r[5] for r in self.log]))}
        if not self.styling:
            out.update(foot_lock=self.lock is not None, foot_lock_ms_per_frame=1e3 * float(np.mean([r[6] for r in self.log])))
        if self.styling:       # the style sets the pace (the simulation follows): no trajectory error
            out.update(styles=list(self.styles.styles), switches=self.styles.player.switches,
                       segments=self.styles.segments(),
                       **(self.styles.skin.summary() if self.styles.skin is not None else {"character": None}))
            return out
        dist = np.linalg.norm((rp - sp)[:, [0, 2]], axis=1)
        out.update(trajectory_error_m=float(dist.mean()), trajectory_error_max_m=float(dist.max()),
                   simulation_travelled_m=float(np.linalg.norm(np.diff(sp[:, [0, 2]], axis=0), axis=1).sum()))
        db = self.ctl.db
        toes = joints[:, [db.roles["left_toe"], db.roles["right_toe"]]]
        speed = np.linalg.norm(np.diff(toes[..., [0, 2]], axis=0), axis=-1) * 60.0 * 100.0
        out["foot_skate_cm_s"] = float(foot_skate(toes[None], floor, 60.0)[0])
        planted = np.array([r[7] for r in self.log[1:]], bool)
        out["foot_skate_in_contact_cm_s"] = float(speed[planted].mean()) if planted.any() else 0.0
        return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", help="retrieval controller checkpoint (default: the shipped model)")
    parser.add_argument("--baseline", help="no-retrieval checkpoint for mode 2 (default: the shipped one)")
    parser.add_argument("--data", help="folder of LaFAN1 BVH files: use the LaFAN1 model")
    parser.add_argument("--controller", choices=["all", "retrieval", "no_retrieval", "matching", "styles"],
                        default="all", help="headless: which controllers to run (default all three models, one "
                        "after the other; styles: the Bandai walking styles)")
    parser.add_argument("--style", default=None, help="styles: the (first) style (default: the first of --styles)")
    parser.add_argument("--styles", default=None,
                        help="styles to load, comma-separated (default normal,angry,old,proud,tired); headless "
                        "with --controller styles and no --style: switched through every --style-every frames")
    parser.add_argument("--style-every", type=int, default=240, help="headless styles: frames per style")
    parser.add_argument("--character", type=Path, default=None,
                        help="character to skin, retargeted when its skeleton is another (default: the LaFAN1 "
                             "character in the shared data for the LaFAN1 model, else the bundled Geno)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kinema",
                        help="where the rebuilt database is cached")
    parser.add_argument("--no-adjust", action="store_true",
                        help="do not pull the character's root toward the simulation object")
    parser.add_argument("--no-foot-lock", action="store_true",
                        help="draw and measure the controllers' poses without foot locking")
    parser.add_argument("--any-pose", action="store_true",
                        help="search every database row (default: only rows that stay standing, walking or running)")


def style_schedule(styles: list[str], every: int):
    """Headless style as a function of the frame: ``styles`` in turn, ``every`` frames each."""
    if every < 1:
        raise KinemaError(f"--style-every must be at least 1, got {every}")
    return lambda frame: styles[(frame // every) % len(styles)]


def load_styles(args) -> tuple[StyleDriver | None, list[str]]:
    """The styles mode's driver (None when the Bandai walks are absent and not asked for)
    and the headless schedule's styles."""

    wanted = args.controller == "styles" or args.style is not None or args.styles is not None
    if not bandai_available():
        if wanted:
            raise KinemaError("the styles mode needs bandai_namco/dataset-1 in the shared data folder")
        return None, []
    styles = [x for x in (args.styles or ",".join(DEFAULT_STYLES)).split(",") if x]
    schedule = [args.style] if args.style else styles
    first = schedule[0]
    library = StyleLibrary.load(list(dict.fromkeys(styles + [first])))
    return StyleDriver(library, first, style_skin(library, getattr(args, "character", None))), schedule


def programs(args: argparse.Namespace) -> list[tuple[str, Locomotion]]:
    """Standalone: one program, every controller a key away. Headless (and manual): one run
    per controller (``--controller``; all three models by default) along the scripted TRACK."""
    import torch

    from kinema.control.retrieval import evaluate
    from kinema.control.retrieval.controller import MODES, RetrievalController

    checkpoint, baseline = pick_models(args)
    db = evaluate.cached_database(checkpoint, args.cache, args.data)
    db.search(db.features[:1], k=4)   # build the index and compile the search before any timing
    # One character steps batch-1 matrices: a second intra-op thread only adds synchronisation
    # (measured: 16 ms per frame with 2 threads on a busy 2-core machine, 1 ms with 1).
    torch.set_num_threads(1)
    from kinema.matching.database import upright_mask
    mask = None if args.any_pose else upright_mask(db)
    ctl = RetrievalController(checkpoint, db, baseline, search_mask=mask)
    args.upright_search = mask is not None
    character = database_skin(db, args.character)
    args.checkpoint, args.baseline = str(checkpoint), None if baseline is None else str(baseline)
    args.database, args.skinned = db.fingerprint, character is not None
    args.character_file = None if character is None else character.name
    args.retargeted = character is not None and character.retargeter is not None
    if args.mode == "standalone":
        styles, _ = load_styles(args)
        program = Locomotion(ctl, walk=True, adjust=not args.no_adjust, character=character, styles=styles,
                             foot_lock=not args.no_foot_lock)
        if args.controller not in ("all",):
            program.set_mode(args.controller)
        return [("interactive", program)]
    floor = floor_height(db)
    styles, schedule = load_styles(args) if args.controller == "styles" else (None, [])
    args.schedule = schedule
    out = []
    for mode in MODES if args.controller == "all" else (args.controller,):
        # --input replays a recorded or authored track (stick and shift) instead of the TRACK
        program = _ControllerRun(ctl, mode, floor, script=None if args.input else scripted_stick, adjust=not args.no_adjust,
                                 character=character, styles=styles, style_schedule=None if styles is None else
                                 style_schedule(schedule, args.style_every), foot_lock=not args.no_foot_lock)
        out.append((mode, program))
    return out


class _ControllerRun(Locomotion):
    """One headless run: the shared controller switched to ``mode`` at the start, metrics
    against ``floor``, and per drawn frame the camera, the hips' pixel, the share of the drawn
    joints inside the image and their pixel box (x0, y0, x1, y1)."""

    def __init__(self, controller, mode: str, floor: float, **options) -> None:
        super().__init__(controller, **options)
        self.run_mode, self.floor = mode, floor
        self.views: list[dict] = []

    def start(self, app) -> None:
        super().start(app)
        self.ctl.set_mode(self.run_mode if self.run_mode != "styles" else "matching")
        self.reset()
        self.set_mode(self.run_mode)

    def after_frame(self, renderer) -> None:
        """The frame as shown: its camera and where it drew the hips, to ``views``."""
        if not hasattr(renderer, "project"):
            return
        joints = self.styles.joint_positions() if self.styling else self.shown_pose()[1]
        self.views.append(frame_record(renderer, self.frame - 1, joints, self.hips()))

    def metrics(self, floor: float | None = None) -> dict:
        m = super().metrics(self.floor if floor is None else floor)
        if self.views:
            m["rendered_frames"] = self.views
        return m


def summary(args: argparse.Namespace, runs: dict[str, dict]) -> dict:
    from kinema.control.retrieval import rollout

    if "interactive" in runs:
        return {"checkpoint": args.checkpoint, "steps": runs["interactive"]["steps"]}
    out = {"checkpoint": args.checkpoint, "baseline": args.baseline,
           "root_adjustment": None if args.no_adjust else {"halflife_s": rollout.ADJUST_HALFLIFE,
                                                             "clamp_m": rollout.ADJUST_CLAMP},
           "foot_lock": None if args.no_foot_lock else {"unlock_radius_m": footlock.UNLOCK_RADIUS,
                                                          "halflife_s": footlock.HALFLIFE},
           "database": args.database, "upright_search": args.upright_search, "frames": args.frames,
           "track": str(args.input) if args.input else TRACK,
           "character": "skinned" if args.skinned else None, "character_file": args.character_file,
           "retargeted": args.retargeted, "controllers": runs}
    if "styles" in runs:
        out.update(style_schedule=args.schedule, style_every=args.style_every)
    return out


def report(m: dict) -> str:
    lines = []
    for mode, r in m.get("controllers", {}).items():
        if mode == "styles":
            lines += [f"styles: {s['style']} speed {s['speed_m_s']:.2f} m/s, cadence {s['cadence_steps_s']:.2f}/s, "
                      f"lean {s['lean_m']:+.2f} m" for s in r["segments"]]
            continue
        lines.append(f"{mode}: trajectory error {r['trajectory_error_m']:.3f} m (max {r['trajectory_error_max_m']:.3f}), "
                     f"heading {r['heading_error_deg']:.1f} deg, skate {r['foot_skate_cm_s']:.1f} cm/s "
                     f"(in contact {r['foot_skate_in_contact_cm_s']:.1f}), {r['ms_per_frame']:.2f} ms/frame, "
                     f"foot lock {'on' if r['foot_lock'] else 'off'} ({r['foot_lock_ms_per_frame']:.2f} ms/frame)"
                     + (f", restarted after a non-finite pose at frames {[x['frame'] for x in r['restarts']]}"
                        if r.get("restarts") else ""))
    return "\n  ".join(["", *lines]) if lines else ""
