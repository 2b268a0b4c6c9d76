"""``kinema demo crowd``: N characters, each on its own scripted stick, stepped as one batch.

Every frame the N sticks drive the batched springs
(:class:`kinema.control.trajectory.TrajectoryController` with ``batch=N``), whose predicted
trajectories are the requests of one batched controller: the LaFAN1 retrieval controller
(:class:`kinema.control.retrieval.controller.RetrievalCrowd`: one network step, one search
over the characters due a refresh, staggered over the refresh period) or, with
``--controller matching``, the batched motion-matching controller
(:class:`kinema.control.matching.MotionMatchingController` with ``batch``). The crowd is
drawn with one instanced capsule batch per colour.

Each character's stick is its own script: a heading that turns at its own rate, a push that
swells and fades, and a stop every few seconds, all phase-shifted per character. Each starts
in a database row of its own where the data stands upright for the next seconds
(:func:`kinema.matching.database.upright_rows`): the sample model's database also holds falls, getting up and
crawling (LaFAN1's ``fallAndGetUp``, ``pushAndFall``, ``obstacles``), and a character
started in one of those rows lay on the floor or tumbled in the first frames (a crowd's
character steps exactly as it would alone: nothing is shared between characters). For the
same reason every search, of either controller, returns only such rows
(:func:`kinema.matching.database.upright_mask`; ``--any-pose``: every row), as in the
matching and locomotion demos: a stick that swings round must not retrieve a fall.
``metrics.json`` holds the step time (ms per crowd step, steps per second) and, per
character, the root error against its simulated trajectory, the heading error, the distance
travelled, the foot skating (horizontal toe speed while the controller says the toe is in
contact), whether every pose stayed finite and its lowest hips height as a share of the
data's standing height (``fallen``: how many went below :data:`FALLEN`, i.e. lay down).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from kinema.control.retrieval.scenarios import FALLEN, crowd_starts, crowd_sticks, standing_hips
from kinema.control.trajectory import TrajectoryController
from kinema.errors import KinemaError
from kinema.matching.database import upright_mask

DESCRIPTION = "a crowd: N characters on their own scripted sticks, one batched controller (metrics, MP4)"
OUT, FRAMES, RENDER_EVERY = "out/demo_crowd", 600, 2
MODEL = Path(__file__).resolve().parents[3] / "models" / "retrieval_lafan1.safetensors"
CONTROLLERS = ("retrieval", "matching")
COLOURS = ((0.85, 0.55, 0.35, 1.0), (0.35, 0.55, 0.85, 1.0), (0.45, 0.75, 0.4, 1.0), (0.8, 0.75, 0.35, 1.0))


def grid(n: int, spacing: float) -> np.ndarray:
    """(N, 3) start positions on a square grid centred on the origin, ``spacing`` metres apart."""
    side = int(np.ceil(np.sqrt(n)))
    i = np.arange(n)
    xz = (np.stack([i % side, i // side], -1) - (side - 1) / 2) * spacing
    return np.stack([xz[:, 0], np.zeros(n), xz[:, 1]], -1)


class CrowdProgram:
    """The crowd (see the module docstring): ``step`` advances every character one frame;
    ``draw`` puts them in the scene; ``metrics`` summarises the run per character.

    Args:
        db: the database (the checkpoint's for the retrieval controller).
        count: number of characters N.
        controller: "retrieval" or "matching".
        checkpoint: the retrieval checkpoint.
        spacing: metres between start positions.
        seed: seeds the start rows (among :func:`~kinema.matching.database.upright_rows`) and the sticks.
        upright: searches return only :func:`~kinema.matching.database.upright_mask` rows
            (False: every row).
    """

    def __init__(self, db, count: int, controller: str = "retrieval", checkpoint: Path = MODEL,
                 spacing: float = 2.5, seed: int = 0, upright: bool = True):

        if controller not in CONTROLLERS:
            raise KinemaError(f"unknown crowd controller {controller!r}; choose from {CONTROLLERS}")
        if count < 1:
            raise KinemaError(f"a crowd needs at least one character, got --count {count}")
        self.db, self.count, self.kind = db, int(count), controller
        self.seeds, rows = crowd_starts(db, count, seed)   # each character's stick and first pose (N,)
        self.start_rows = rows
        start = grid(count, spacing)
        yaw = 2 * np.pi * self.seeds[:, 0]
        facing = np.stack([np.sin(yaw), np.zeros(count), np.cos(yaw)], -1)
        mask = upright_mask(db) if upright else None
        self.upright = mask is not None
        if controller == "retrieval":
            from kinema.control.retrieval.controller import RetrievalCrowd
            self.ctl = RetrievalCrowd(checkpoint, db, count, start_row=rows, phase=np.arange(count) % 6,
                                      search_mask=mask)
            self.ctl.reset(rows, start.astype(np.float32), facing.astype(np.float32))
            self.traj = self.ctl.trajectory
        else:   # the controller owns its springs
            from kinema.control.matching import MotionMatchingController
            self.ctl = MotionMatchingController(db, start_frame=rows, batch=count, search_mask=mask)
            self.ctl.trajectory = self.traj = TrajectoryController(self.ctl.control, start, yaw, batch=count)
            self.ctl.root_position, self.ctl.root_direction = start, facing
        self.parents = np.asarray(db.parents)
        self.toes = [db.roles["left_toe"], db.roles["right_toe"]]
        self.t = 0.0
        self.positions = None            # (N, J, 3) world joints of the last step
        self.view = None                 # the camera framing the crowd
        self.contacts = np.zeros((count, 2), bool)
        self._bones = None
        self.standing = standing_hips(db)
        self.records = {"step_s": [], "root_error": [], "heading_error": [], "root": [], "skate": [],
                        "skate_n": np.zeros(count), "finite": np.ones(count, bool), "hips": np.full(count, np.inf)}

    # -- stepping --------------------------------------------------------------------------
    def update(self, dt: float) -> None:
        self.step(dt)

    def step(self, dt: float) -> None:
        """Every character one frame of ``dt`` seconds on its own stick."""
        t0 = time.perf_counter()
        sticks, walk = crowd_sticks(self.t, self.seeds), np.zeros(self.count, bool)
        if self.kind == "retrieval":
            sim = self.ctl.drive(sticks, dt, walk=walk)
            _, pos = self.ctl.world_pose()
            root, facing, contacts = self.ctl.root_pos.astype(np.float64), self.ctl.root_dir, self.ctl.contacts > 0.5
        else:
            out = self.ctl.step(sticks, dt, walk=walk)
            sim = self.traj.sim
            pos, root, facing, contacts = out.positions, out.root_position, out.root_direction, out.contacts.astype(bool)
        self.records["step_s"].append(time.perf_counter() - t0)
        self._record(pos, root, facing, contacts, sim, dt)
        self.t += dt

    def _record(self, pos, root, facing, contacts, sim, dt) -> None:
        r = self.records
        r["finite"] &= np.isfinite(pos).all((1, 2))
        r["hips"] = np.minimum(r["hips"], pos[:, self.db.roles["hips"], 1])
        r["root_error"].append(np.linalg.norm((root - sim.position)[:, [0, 2]], axis=-1))
        cos = np.clip((facing * sim.direction).sum(-1), -1.0, 1.0)
        r["heading_error"].append(np.degrees(np.arccos(cos)))
        r["root"].append(root[:, [0, 2]].copy())
        if self.positions is not None:
            toe_speed = np.linalg.norm((pos[:, self.toes] - self.positions[:, self.toes])[..., [0, 2]], axis=-1) / dt
            both = contacts & self.contacts
            r["skate"].append((toe_speed * both).sum(1))
            r["skate_n"] += both.sum(1)
        self.positions, self.contacts = pos, contacts

    # -- drawing ---------------------------------------------------------------------------
    def _bone_set(self) -> tuple[np.ndarray, np.ndarray]:
        """(bone joints (K,), radii (K,)) of the procedural body, from the first character's
        pose (:func:`kinema.render.body.body_capsules`), shared by the whole crowd."""
        from kinema.render.body import body_capsules

        p = self.positions[0]
        _, end, radius = body_capsules(p, self.parents)
        child = np.nonzero(self.parents >= 0)[0]
        joints = child[np.argmin(np.linalg.norm(p[child][None] - end[:, None], axis=-1), axis=1)]
        return joints, radius

    def draw(self, renderer) -> None:
        if self.positions is None or getattr(renderer, "debug", None) is None:
            return
        if self._bones is None:
            self._bones = self._bone_set()
        joints, radius = self._bones
        start, end = self.positions[:, self.parents[joints]], self.positions[:, joints]
        for k, colour in enumerate(COLOURS):   # one instanced batch per colour
            sel = slice(k, None, len(COLOURS))
            n = len(range(self.count)[sel])
            if n:
                renderer.debug.capsules(start[sel].reshape(-1, 3), end[sel].reshape(-1, 3),
                                        np.tile(radius, n), colour)
        from kinema.render.camera import frame_subject  # a renderer exists: raylib is there
        # everyone in view: sized from the whole crowd's bounds every frame (it spreads out)
        self.view = frame_subject(renderer, self.view, self.positions, mode="fixed", yaw=np.pi, pitch=0.6,
                                  refit=True, scale=0.85)

    def gui(self, ui) -> None:
        panel, label = getattr(ui, "panel", None), getattr(ui, "label", None)
        if panel is None or label is None or not self.records["step_s"]:
            return
        with panel("crowd", x=10, y=40, width=360):
            ms = 1000 * float(np.mean(self.records["step_s"][-60:]))
            label(f"{self.count} characters, {self.kind} controller")
            label(f"crowd step {ms:.1f} ms ({1000 / max(ms, 1e-9):.0f} steps/s)")

    # -- results ---------------------------------------------------------------------------
    def metrics(self) -> dict:
        r = self.records
        step = np.asarray(r["step_s"])
        err, head = np.stack(r["root_error"]), np.stack(r["heading_error"])
        roots = np.stack(r["root"])
        travelled = np.linalg.norm(np.diff(roots, axis=0), axis=-1).sum(0) if len(roots) > 1 else np.zeros(self.count)
        skate = (np.stack(r["skate"]).sum(0) / np.maximum(r["skate_n"], 1) * 100) if r["skate"] else np.zeros(self.count)
        low = r["hips"] / self.standing
        per = [{"character": i, "root_error_m": float(err[:, i].mean()), "heading_error_deg": float(head[:, i].mean()),
                "travelled_m": float(travelled[i]), "foot_skate_cm_s": float(skate[i]), "finite": bool(r["finite"][i]),
                "lowest_hips": float(low[i])}
               for i in range(self.count)]
        return {"controller": self.kind, "count": self.count, "frames": len(step),
                "database": self.db.fingerprint, "upright_search": self.upright,
                "step_ms": {"mean": 1000 * float(step.mean()), "median": 1000 * float(np.median(step)),
                            "max": 1000 * float(step.max())},
                "steps_per_s": float(1.0 / np.median(step)), "us_per_character": 1e6 * float(np.median(step)) / self.count,
                "all_finite": bool(r["finite"].all()),
                "root_error_m": float(err.mean()), "heading_error_deg": float(head.mean()),
                "travelled_m": {"mean": float(travelled.mean()), "min": float(travelled.min())},
                "foot_skate_cm_s": float(skate.mean()),
                # world hips height over the data's standing (median) one: below FALLEN a character lies down
                "lowest_hips": float(low.min()), "fallen": int((low < FALLEN).sum()), "characters": per}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=64, help="number of characters")
    parser.add_argument("--controller", choices=CONTROLLERS, default="retrieval")
    parser.add_argument("--checkpoint", type=Path, default=MODEL, help="retrieval checkpoint (LaFAN1)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kinema",
                        help="where the checkpoint's rebuilt database is cached")
    parser.add_argument("--spacing", type=float, default=2.5, help="metres between start positions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--any-pose", action="store_true",
                        help="search every row (default: only rows that stay standing, walking or running)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: a second only adds synchronisation on a busy machine)")


def programs(args: argparse.Namespace) -> list[tuple[str, CrowdProgram]]:
    import torch

    from kinema.control.retrieval.evaluate import cached_database

    torch.set_num_threads(args.threads)
    db = cached_database(args.checkpoint, args.cache)
    db.search(db.features[:1], k=4)   # build the index and compile the search before any timing
    print(f"demo crowd: {args.count} characters, {args.controller} controller, database {db.fingerprint} "
          f"({db.rows} rows)")
    return [("crowd", CrowdProgram(db, args.count, args.controller, args.checkpoint, args.spacing, args.seed,
                                      upright=not args.any_pose))]


def report(m: dict) -> str:
    return (f"{m['count']} characters x {m['frames']} frames ({m['controller']}): {m['step_ms']['median']:.1f} ms "
            f"per crowd step ({m['steps_per_s']:.0f} steps/s, {m['us_per_character']:.0f} us per character), "
            f"root error {m['root_error_m']:.3f} m, heading error {m['heading_error_deg']:.1f} deg, "
            f"travelled {m['travelled_m']['mean']:.1f} m each, all finite: {m['all_finite']}, "
            f"fallen: {m['fallen']} (lowest hips {m['lowest_hips']:.2f} of standing)")
