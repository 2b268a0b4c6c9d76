"""``kinema demo matching``: motion matching driven by a gamepad, the keyboard or a script.

A database (``--db`` file, or built from ``--data`` motion files with ``--config``;
default: ../shared/data/lafan1 with mirroring) feeds a
:class:`kinema.control.matching.MotionMatchingController`, wrapped in the engine component
:class:`MotionMatchingComponent` that poses an :class:`kinema.engine.Actor`.

Interactive (default): left stick / WASD moves (camera-relative), hold the right trigger or
shift to walk. ``--headless --frames N --out DIR`` follows a scripted joystick track
(forward, turns, backwards, stop, diagonal, walk) and writes ``metrics.json``: root
position error and heading error of the character against the simulated (requested)
trajectory, foot skating (horizontal toe speed while the database labels the toe in
contact; this world speed includes the root's pull toward the simulation, reported
as root adjustment speed), searches, transitions and step time (foot locking on unless
``--no-foot-lock``), and ``matching.mp4`` (unless ``--no-video``).

Drawing: the skinned character :func:`kinema.demos._skin.database_skin` picks for the
database's skeleton (the LaFAN1 character of the shared data for LaFAN1, else the bundled
Geno, or ``--character``, retargeted); the Actor's procedural body only for a skeleton that
is no humanoid. ``metrics.json`` names the character and, per rendered frame, where it was drawn.

The search returns only rows from which the character stays on its feet for four seconds
(:func:`kinema.matching.database.upright_rows`), and it starts on one, so a released stick
settles into a standing idle, not into one of LaFAN1's crouches, crawls or falls
(``--any-pose``: every row).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from kinema.control.matching import MatchingConfig, MotionMatchingController
from kinema.data import require_path
from kinema.demos._skin import database_skin, frame_record
from kinema.engine import Actor, Component, ScriptedInput, stick
from kinema.motion import Skeleton
from kinema.motion.kinematics import inverse
from kinema.retargeting.skin import NO_SKIN, Skin

DESCRIPTION = "motion matching: stick -> springs -> exact search -> inertialized playback (metrics, MP4)"
OUT, FRAMES, RENDER_EVERY = "out/demo_matching", 1200, 2


class MotionMatchingComponent(Component):
    """Engine component: reads the stick each step, runs the controller, poses the actor.

    Args:
        controller: the motion-matching controller.
        actor: the :class:`Actor` to pose (optional).
        toes: joint indices whose skating is measured (default: the database's toes).
        skin: the skinned character drawn with the controller's pose (then the actor, still
            posed, draws nothing), or None.
    """

    def __init__(self, controller: MotionMatchingController, actor: Actor | None = None,
                 toes: tuple[int, int] | None = None, skin: Skin | None = None):
        self.controller = controller
        self.actor, self.skin = actor, skin
        if actor is not None and skin is not None:
            actor.enabled = False       # the skinned character is drawn instead of its procedural body
        self.skinned: tuple[np.ndarray, np.ndarray] | None = None   # the character's world pose drawn
        self.mirrored = 0.0     # how much the pose shown is a mirrored clip's (0-1)
        names = controller.db.joint_names
        cfg = controller.db.config
        self.toes = list(toes) if toes is not None else [names.index(cfg.left_toe), names.index(cfg.right_toe)]
        self.parents = np.asarray(controller.db.parents)
        self.records: dict[str, list] = {"root_error": [], "heading_error": [], "skate": [], "searched": [],
                                         "transitioned": [], "step_s": [], "root": [],
                                         "adjust": []}
        self._prev_toes: np.ndarray | None = None
        self.output = None

    def update(self, dt: float) -> None:
        inp = self.app.input if self.app is not None else None
        s = stick(inp) if inp is not None else np.zeros(2, np.float32)
        walk = False
        if inp is not None:
            walk = bool({"left_shift", "right_shift"} & set(inp.keys_down)) or \
                inp.gamepad_axes.get("right_trigger", -1.0) > 0.0
        t0 = time.perf_counter()
        out = self.controller.step(s, dt, walk=walk)
        self.records["step_s"].append(time.perf_counter() - t0)
        self.output = out
        sim = self.controller.trajectory.sim
        self.records["root_error"].append(float(np.linalg.norm(out.root_position - sim.position)))
        cosang = float(np.clip(out.root_direction @ sim.direction, -1.0, 1.0))
        self.records["heading_error"].append(float(np.degrees(np.arccos(cosang))))
        self.records["searched"].append(out.searched)
        self.records["transitioned"].append(out.transitioned)
        self.records["root"].append(out.root_position.tolist())
        self.records["adjust"].append(out.root_adjustment / dt)
        toes = out.positions[self.toes]
        if self._prev_toes is not None:
            speed = np.linalg.norm((toes - self._prev_toes)[:, [0, 2]], axis=1) / dt
            self.records["skate"].extend(speed[out.contacts].tolist())
        self._prev_toes = toes
        if self.actor is not None:
            rot, pos = inverse(out.rotations, out.positions, self.parents)
            self.actor.set_pose(rot, pos)
        if self.skin is not None:
            # a mirrored clip's rotations skin torn unless mirrored back (Skin.pose); the share
            # follows the playing row's clip with the controller's inertialization halflife
            db = self.controller.db
            target = float(db.clip_mirrored[db.clip_of(out.frame)])
            self.mirrored += (target - self.mirrored) * (1.0 - 0.5 ** (dt / self.controller.config.inertialize_halflife))
            self.skinned = self.skin.pose(out.rotations, out.positions, self.mirrored)

    def draw(self, renderer) -> None:
        if self.skin is not None and self.skinned is not None and hasattr(renderer, "draw_character"):
            renderer.draw_character(self.skin.character, *self.skinned)

    def metrics(self) -> dict:
        r = self.records
        skate = np.array(r["skate"]) if r["skate"] else np.zeros(1)
        return {
            "frames": len(r["step_s"]),
            "root_position_error_m": {"mean": float(np.mean(r["root_error"])), "max": float(np.max(r["root_error"]))},
            "heading_error_deg": {"mean": float(np.mean(r["heading_error"])), "max": float(np.max(r["heading_error"]))},
            "foot_skating_m_per_s": {"mean": float(skate.mean()), "median": float(np.median(skate)),
                                     "contact_samples": int(len(r["skate"]))},
            "root_adjustment_m_per_s": {"mean": float(np.mean(r["adjust"])), "max": float(np.max(r["adjust"]))},
            "searches": int(np.sum(r["searched"])),
            "transitions": int(np.sum(r["transitioned"])),
            "distance_travelled_m": float(np.linalg.norm(np.diff(np.array(r["root"]), axis=0), axis=1).sum())
            if len(r["root"]) > 1 else 0.0,
            "step_ms": {"mean": 1000 * float(np.mean(r["step_s"])), "max": 1000 * float(np.max(r["step_s"]))},
        }


def joystick_track(frames: int, fps: float = 60.0) -> ScriptedInput:
    """The scripted test track (left stick, gamepad convention: y +1 is pulled back):
    run forward, turn right, run back toward the camera, stop, diagonal, then walk."""
    t = np.arange(frames) / fps
    phase = t % 16.0
    x = np.select([phase < 4, phase < 7, phase < 9, phase < 10, phase < 13], [0.0, 1.0, 0.0, 0.0, -0.7], 0.0)
    y = np.select([phase < 4, phase < 7, phase < 9, phase < 10, phase < 13], [-1.0, 0.0, 1.0, 0.0, -0.7], -1.0)
    trigger = np.where(phase >= 13, 1.0, -1.0)  # walk in the last part
    return ScriptedInput(fps, axes={"left_x": x, "left_y": y, "right_trigger": trigger}, end="hold")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=Path, default=None, help="database file (kinema db build)")
    parser.add_argument("--data", nargs="*", default=None, help="motion files/folders to build a database from")
    parser.add_argument("--config", default="lafan1", help="database config when building (preset or JSON)")
    parser.add_argument("--no-mirror", action="store_true", help="build without mirrored clips")
    parser.add_argument("--keep-calibration", action="store_true",
                        help="build with the takes' opening calibration T-pose (trimmed by default)")
    parser.add_argument("--no-foot-lock", action="store_true", help="disable foot locking (leg IK)")
    parser.add_argument("--any-pose", action="store_true",
                        help="search every row (default: only rows that stay standing, walking or running)")
    parser.add_argument("--character", type=Path, default=None,
                        help="character to skin, retargeted when its skeleton is another (default: the LaFAN1 "
                             "character in the shared data for a LaFAN1 database, else the bundled Geno)")


def _database(args):
    from kinema.matching.database import Database, build_from_paths
    if args.db is not None:
        return Database.load(args.db)
    paths = args.data
    if not paths:
        lafan = require_path("lafan1", what="the LaFAN1 takes (no --db or --data given)")
        paths = [lafan]
    from dataclasses import replace

    from kinema.matching.config import DatabaseConfig
    config = replace(DatabaseConfig.resolve(args.config), trim_calibration=not args.keep_calibration)
    return build_from_paths(paths, config, mirror=not args.no_mirror, progress=True)


def _skeleton(db) -> Skeleton:
    return Skeleton(list(db.joint_names), np.asarray(db.parents), np.asarray(db.offsets))


class MatchingProgram:
    """Puts the character (an :class:`Actor` posed by :class:`MotionMatchingComponent`) in
    the App's scene, feeds it the scripted track when no one steers (headless, manual) and
    keeps the camera behind it."""

    def __init__(self, db, foot_lock: bool, track_frames: int | None, skin: Skin | None = None,
                 upright: bool = True) -> None:
        from kinema.matching.database import upright_mask  # numba/scipy-backed: imported with the database

        self.db, self.foot_lock, self.track_frames, self.skin = db, foot_lock, track_frames, skin
        mask = upright_mask(db) if upright else None   # None: every row (also where no row stays upright)
        self.upright = mask is not None
        start = 0 if mask is None else int(np.flatnonzero(mask)[0])
        self.controller = MotionMatchingController(db, config=MatchingConfig(foot_lock=foot_lock, unlock_radius=0.3),
                                                   start_frame=start, search_mask=mask)
        self.actor = Actor(_skeleton(db))
        self.comp = MotionMatchingComponent(self.controller, self.actor, skin=skin)
        _ = db.index  # build the search structure before the clock starts
        self.view = None   # the camera framing the character (first drawn frame)
        self.views: list[dict] = []   # per rendered frame: where the character was drawn

    def start(self, app) -> None:
        ent = app.scene.create_entity("character")
        ent.add(self.actor)
        ent.add(self.comp)
        if self.track_frames is not None and app.input_source is None:
            app.input_source = joystick_track(self.track_frames)

    def draw(self, renderer) -> None:
        out = self.comp.output
        if out is None:
            return
        from kinema.render.camera import frame_subject  # a renderer exists: raylib is there
        self.view = frame_subject(renderer, self.view, self._drawn()[0], yaw=float(np.arctan2(3.0, -4.0)))

    def _drawn(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The controller's world joint positions (J, 3) now, the drawn figure's hips (3,)
        and its body joints (B, 3) (the skinned character's; None for the procedural body).
        The camera frames the controller's joints: a character's joints it does not drive
        (the LaFAN1 character's ``Simulation`` root) stay at their bind place."""
        pos = self.comp.output.positions
        if self.comp.skinned is not None:
            skinned = self.comp.skinned[1]
            return pos, skinned[self.skin.hips], skinned[self.skin.body]
        return pos, pos[self.db.roles["hips"]], None

    def after_frame(self, renderer) -> None:
        """The frame as shown: its camera and where it drew the character, to ``views``."""
        if self.comp.output is None or not hasattr(renderer, "project"):
            return
        view = frame_record(renderer, len(self.comp.records["step_s"]) - 1, *self._drawn())
        if self.comp.skinned is not None:     # how far the skinned bones are from the joints, and from a mirror clip
            view.update(bone_error_deg=self.skin.bone_error(*self.comp.skinned), mirrored=self.comp.mirrored)
        self.views.append(view)

    def gui(self, ui) -> None:
        r = self.comp.records
        err = r["root_error"][-1] if r["root_error"] else 0.0
        ui.lines("motion matching", [f"database {self.db.rows} rows, {len(self.db.clip_names)} clips"
                                     + ("  (calibration T-poses trimmed)" if self.db.config.trim_calibration else ""),
                                     f"searches {int(np.sum(r['searched']))}  transitions "
                                     f"{int(np.sum(r['transitioned']))}  root error {100 * err:.1f} cm",
                                     "stick / WASD: move, shift: walk"
                                     + ("  foot lock on" if self.foot_lock else "")])

    def metrics(self) -> dict:
        return {**self.comp.metrics(), "database": self.db.info() | {"clips": len(self.db.clip_names)},
                "foot_lock": self.foot_lock, "upright_search": self.upright, **(self.skin.summary() if self.skin is not None else NO_SKIN),
                **({"rendered_frames": self.views} if self.views else {})}


def programs(args: argparse.Namespace) -> list[tuple[str, MatchingProgram]]:
    db = _database(args)
    print(f"demo matching: database {db.fingerprint}: {db.rows} rows, {len(db.clip_names)} clips")
    skin = database_skin(db, args.character)
    return [("matching", MatchingProgram(db, not args.no_foot_lock, args.frames if args.mode != "standalone" else None,
                                         skin, upright=not args.any_pose))]


def report(m: dict) -> str:
    return (f"{m['frames']} frames, root error {m['root_position_error_m']['mean']:.3f} m, heading error "
            f"{m['heading_error_deg']['mean']:.1f} deg, foot skating {m['foot_skating_m_per_s']['mean']:.3f} m/s, "
            f"{m['transitions']} transitions")
