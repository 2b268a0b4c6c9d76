"""Scripted sticks as a user plays them, run through the runtime as the locomotion demo runs
it, and what a user would see go wrong (NOTES.md 3.5).

Each scenario is a stick function of time (60 s at 60 Hz by default; ``long_idle``, the
released stick of ``idle`` for five times as long, 5 min). Every frame, as in
``kinema demo locomotion``: the controller's runtime frame from the stick
(:meth:`RetrievalController.drive`: the trajectory springs, their prediction relative to
the character's root as the joystick, the network step, the root pulled toward the
simulation), and the drawn pose is the world pose with the toes locked
(:class:`~kinema.control.footlock.FootLock`).

Measured on every drawn frame: ``finite``; ``bone_length_drift_mm``, the largest change of
any bone length from the rest skeleton (a pose whose positions and rotations drift apart
stretches bones: the tear a user sees); ``head_above_hips``; ``torso_share_min``, the
lowest height of the head above the hips as a share of the data's (:func:`standing_torso`):
a character bowed double keeps its head above its hips by a few centimetres, which
``head_above_hips`` passes and a user does not; ``root_error_m``, the mean
horizontal distance from the character's root to the requested path (the simulation
object); ``foot_skate_cm_s``, horizontal toe speed weighted by how near the toe is to the floor
(:func:`kinema.control.retrieval.metrics.foot_skate`); ``support_height_m``, the median
height of the lower toe above that floor height (a character that floats escapes the
skating measure, which weighs a toe by how near it is to the floor: this reads the float);
``feet_down_share``, on the frames where the requested path has stood still for a second,
the share with both toes on the floor (:func:`feet_down_share`: a character let go of
stands on its feet, not on one leg with a knee raised); ``travelled_m`` and ``path_m``,
the horizontal distance the character's root and the requested path (the simulation
object) covered: a root that runs away with the stick released, or shakes back and forth
while its mean error stays small, travels far more than its path; ``stride_ratio``, how
fast the toes move in character space for each metre per second the root moves
(:func:`stride_ratio`; the database's own is :func:`database_stride_ratio`): a character
that glides with still legs while its root follows the stick scores near 0, one whose legs
carry it about the data's ratio.

:func:`run_crowd` is the other robustness check: a crowd of characters (64 by default), each
on its own wandering stick (:func:`crowd_sticks`, as ``kinema demo crowd`` drives them), from
rows where the data stands, for 10 s: how many lie down (hips below :data:`FALLEN` of the
data's standing height) or sink into a crouch (below :data:`SUNK`). One scripted stick
decides nothing: a character that sinks when its stick slows in one of 64 wanderings is
what a user of the crowd demo sees.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from kinema.control import footlock
from kinema.control.footlock import FootLock
from kinema.control.retrieval.metrics import floor_height, foot_skate, joint_positions
from kinema.control.trajectory import TrajectoryController
from kinema.errors import KinemaError
from kinema.features.root import yaw_rotate
from kinema.matching.database import Database

Stick = Callable[[float], tuple[np.ndarray, bool]]   # t (s) -> (stick (2,), walk)


def _idle(t: float) -> tuple[np.ndarray, bool]:
    return np.zeros(2), True


def _stop_start(t: float) -> tuple[np.ndarray, bool]:
    return (np.array([0.0, 1.0]) if t % 5.0 < 3.0 else np.zeros(2)), True


def _turns(t: float) -> tuple[np.ndarray, bool]:
    return np.array([0.0, 1.0 if t % 6.0 < 3.0 else -1.0]), False      # 180-degree reversals, running


def _circle(t: float) -> tuple[np.ndarray, bool]:
    a = 2.0 * np.pi * t / 10.0                                           # the stick turns once every 10 s
    return np.array([np.sin(a), np.cos(a)]), True


def _walk_run(t: float) -> tuple[np.ndarray, bool]:
    return np.array([0.0, 1.0]), t % 8.0 < 4.0


def _run_release(t: float) -> tuple[np.ndarray, bool]:
    return (np.array([0.0, 1.0]) if t < 8.0 else np.zeros(2)), False    # run 8 s, then let go of the stick


SCENARIOS: dict[str, Stick] = {"idle": _idle, "stop_start": _stop_start, "turns": _turns, "circle": _circle,
                               "walk_run": _walk_run, "run_release": _run_release, "long_idle": _idle}
# scenarios that run this many times the others' frames: a user who leaves the stick released
# for minutes (the session-20 LaFAN1 network stood for 90 s, then lifted off)
LENGTH_FACTOR = {"long_idle": 5}


def bone_lengths(positions: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """Lengths (..., J) of the bone from each joint's parent to it (0 for roots), of
    positions (..., J, 3)."""
    parents = np.asarray(parents)
    safe = np.where(parents < 0, np.arange(len(parents)), parents)
    return np.linalg.norm(positions - positions[..., safe, :], axis=-1)


def rigid_bones(db: Database) -> np.ndarray:
    """(J,) bool: the joints whose bone to their parent has a fixed rest length (every
    joint but the roots and the hips, which translate in some skeletons, e.g. below
    Bandai-Namco's static ``joint_Root``)."""
    keep = np.asarray(db.parents) >= 0
    keep[db.roles["hips"]] = False
    return keep


def head_joint(db: Database) -> int:
    """The joint highest above the floor in the database's mean pose (the head or its end)."""
    return int(np.argmax(joint_positions(db, db.pose.mean(0))[:, 1]))


MOVING_M_S = 0.3   # root speed (m/s) above which a frame counts for the stride ratio
STILL_M_S = 0.05   # requested-path speed (m/s) below which the stick asks the character to stand
SETTLE_S = 1.0     # ... for this long (s) before a frame counts for feet_down_share
TOE_DOWN_M = 0.10  # a toe within this height (m) of the floor is down


def settled_frames(path: np.ndarray, fps: float) -> np.ndarray:
    """(F,) bool: the frames at which a path of positions (F, 3), metres, has moved slower
    than STILL_M_S for at least SETTLE_S (a character asked to stand, given time to stop)."""
    speed = np.r_[np.inf, np.linalg.norm(np.diff(path[:, [0, 2]], axis=0), axis=-1) * fps]
    run = np.zeros(len(path), np.int64)
    for i in range(len(path)):   # length of the current still run, in frames
        run[i] = run[i - 1] + 1 if speed[i] < STILL_M_S and i > 0 else 0
    return run >= SETTLE_S * fps


def feet_down_share(toe_heights: np.ndarray, settled: np.ndarray) -> float | None:
    """Share of the ``settled`` frames (F,) bool at which both toes (F, 2) heights above the
    floor, metres, are within TOE_DOWN_M of it: a character asked to stand stands on both
    feet (a raised knee or a hop held with the stick released scores low); None when no
    frame is settled."""
    if not settled.any():
        return None
    return float((toe_heights[settled] < TOE_DOWN_M).all(-1).mean())


def database_feet_down_share(db: Database) -> float | None:
    """:func:`feet_down_share` of the database's own motion, its rows settled by their root
    path (the actor's standing; None when the data never stands still, e.g. Bandai-Namco)."""
    heights = database_toe_heights(db)
    settled = np.zeros(db.rows, bool)
    for start, stop in db.ranges:   # per clip: a still run does not continue across clips
        settled[start:stop] = settled_frames(db.root_positions[start:stop], db.fps)
    return feet_down_share(heights, settled)


def database_support_height(db: Database) -> float:
    """The median height (m) of the lower toe above the floor height over the database's
    rows: where the actor's support toe rests (``support_height_m`` of the data)."""
    return float(np.median(database_toe_heights(db).min(1)))


def database_toe_heights(db: Database) -> np.ndarray:
    """Heights (N, 2) in metres of the database rows' toes (left, right) above the floor
    height (:func:`~kinema.control.retrieval.metrics.floor_height`)."""
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    return joint_positions(db, db.pose)[:, toes, 1] - floor_height(db)


def stride_ratio(toes: np.ndarray, roots: np.ndarray, fps: float) -> float | None:
    """Mean character-space toe speed over mean horizontal root speed (dimensionless) on
    the frames whose root moves faster than MOVING_M_S, of toes (F, T, 3) in character
    space and roots (F, 3) in the world, metres; None when fewer than a tenth of the
    frames move (standing)."""
    toe_speed, root_speed = _step_speeds(toes, roots, fps)
    if (root_speed > MOVING_M_S).mean() < 0.1:
        return None
    return _moving_ratio(toe_speed, root_speed)


def database_stride_ratio(db: Database) -> float:
    """:func:`stride_ratio` of the database's own motion: consecutive rows of each clip,
    toes from the pose vectors, roots from ``root_positions``."""
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    toe_speed, root_speed = _step_speeds(joint_positions(db, db.pose)[:, toes], db.root_positions, db.fps)
    same = db.clip_of(np.arange(db.rows - 1)) == db.clip_of(np.arange(1, db.rows))   # not across clips
    return _moving_ratio(toe_speed[same], root_speed[same])


def _step_speeds(toes: np.ndarray, roots: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """(F-1,) mean toe speed of toes (F, T, 3) and horizontal root speed of roots (F, 3), m/s."""
    toe_speed = np.linalg.norm(np.diff(toes, axis=0), axis=-1).mean(-1) * fps
    root_speed = np.linalg.norm(np.diff(roots[:, [0, 2]], axis=0), axis=-1) * fps
    return toe_speed, root_speed


def _moving_ratio(toe_speed: np.ndarray, root_speed: np.ndarray) -> float:
    moving = root_speed > MOVING_M_S
    return float(toe_speed[moving].mean() / root_speed[moving].mean())


def path_length(positions: np.ndarray) -> float:
    """Horizontal length (m) of a path of positions (F, 3)."""
    return float(np.linalg.norm(np.diff(positions[:, [0, 2]], axis=0), axis=-1).sum())


@lru_cache(maxsize=32)   # a pure function of a module-level stick: the same path each call
def requested_path_m(stick: Stick, frames: int = 3600, fps: float = 60.0) -> float:
    """Length (m) of the path the trajectory springs make of ``stick`` over ``frames``
    frames: the simulation object's, which does not depend on the controller."""
    traj = TrajectoryController()
    path = np.empty((frames, 3))
    for f in range(frames):
        s, walk = stick(f / fps)
        path[f] = traj.update(np.asarray(s, np.float64), 1.0 / fps, walk=walk).position
    return path_length(path)


def run_scenario(ctl, stick: Stick, frames: int = 3600, fps: float = 60.0, foot_lock: bool = True,
                 unlock_radius: float = footlock.UNLOCK_RADIUS,
                 lock_halflife: float = footlock.HALFLIFE, traces: dict | None = None) -> dict:
    """Drive ``ctl`` (a :class:`~kinema.control.retrieval.controller.RetrievalController`,
    reset to its start) with ``stick`` for ``frames`` frames (see the module docstring).
    ``traces``, when given, receives the per-frame arrays the figures come from: ``drawn``
    (F, J, 3) world joints, ``local_toes`` (F, 2, 3) character-space toes, ``roots`` and
    ``path`` (F, 3), ``poses`` (F, P) the raw pose vectors the controller feeds back."""
    db = ctl.db
    dt = 1.0 / fps
    roles = db.roles
    toes = [roles["left_toe"], roles["right_toe"]]
    lock = FootLock.for_roles(db.parents, roles, unlock_radius, lock_halflife) if foot_lock else None
    drawn = np.empty((frames, db.num_joints, 3))
    local_toes = np.empty((frames, 2, 3))
    roots = np.empty((frames, 3))
    path = np.empty((frames, 3))
    poses = np.empty((frames, len(ctl.pose)), np.float32)
    finite = True
    for f in range(frames):
        s, walk = stick(f * dt)
        sim = ctl.drive(s, dt, walk=walk)
        rot, pos = ctl.world_pose()
        if lock is not None:
            rot, pos = lock.apply(rot.astype(np.float64), pos.astype(np.float64), ctl.contacts, dt)
        finite &= bool(np.isfinite(pos).all() and np.isfinite(rot).all())
        drawn[f], roots[f], path[f] = pos, ctl.root[0], sim.position
        poses[f] = ctl.pose
        local_toes[f] = joint_positions(db, poses[f])[toes]
    if traces is not None:
        traces.update(drawn=drawn, local_toes=local_toes, roots=roots, path=path, poses=poses)
    rest = np.linalg.norm(db.offsets, axis=-1)
    rigid = rigid_bones(db)
    drift = np.abs(bone_lengths(drawn, db.parents) - rest)[:, rigid]
    head = head_joint(db)
    torso = drawn[:, head, 1] - drawn[:, roles["hips"], 1]
    floor = floor_height(db)   # forward kinematics of every database row: once, for both toe measures
    heights = drawn[:, toes, 1] - floor   # (F, 2) toe heights above the floor height
    return {"frames": frames, "finite": finite,
            "bone_length_drift_mm": float(np.nanmax(drift) * 1000.0) if finite else float("inf"),
            "head_above_hips": bool(np.all(torso > 0.0)),
            "torso_share_min": float(torso.min() / standing_torso(db)),
            "root_error_m": float(np.linalg.norm((roots - path)[:, [0, 2]], axis=-1).mean()),
            "foot_skate_cm_s": float(foot_skate(drawn[None, :, toes], floor, fps)[0]),
            "support_height_m": float(np.median(heights.min(1))),
            "travelled_m": path_length(roots), "path_m": path_length(path),
            "stride_ratio": stride_ratio(local_toes, roots, fps),
            "feet_down_share": feet_down_share(heights, settled_frames(path, fps))}


def run_scenarios(ctl, names=None, frames: int = 3600, foot_lock: bool = True) -> dict[str, dict]:
    """:func:`run_scenario` for each of ``names`` (default all :data:`SCENARIOS`), each from
    the controller's start (``ctl.reset()``), for ``frames`` frames (times
    :data:`LENGTH_FACTOR` for the long ones: ``long_idle`` 5 min by default)."""
    out = {}
    for name in names or SCENARIOS:
        if name not in SCENARIOS:
            raise KinemaError(f"unknown scenario {name!r}; choose from {sorted(SCENARIOS)}")
        ctl.reset(0)
        out[name] = run_scenario(ctl, SCENARIOS[name], frames * LENGTH_FACTOR.get(name, 1), foot_lock=foot_lock)
    return out


FALLEN = 0.5   # hips below this share of the data's standing height: the character lies on the floor
SUNK = 0.75    # ... below this: it has sunk into a crouch
AIRBORNE_M = 0.2   # every body joint this far (m) above the skating metric's floor: the character is in the air
AIRBORNE_S = 0.1   # ... for this long (s) or longer: a flight (a run's flight phase is shorter and lower;
                   # motion matching's crowd on LaFAN1 has none: lowest body joint 9 cm up at its 99th percentile)


def crowd_sticks(t: float, seeds: np.ndarray) -> np.ndarray:
    """Sticks (N, 2) (x right, y forward) of N characters at time ``t`` seconds; ``seeds``
    (N, 4) in [0, 1) make each script its own: start heading, turn rate, push phase and
    stop phase. A character stops for 1.5 s of every 8."""
    heading = 2 * np.pi * seeds[:, 0] + (seeds[:, 1] - 0.5) * 0.8 * t
    push = 0.55 + 0.45 * np.sin(0.6 * t + 2 * np.pi * seeds[:, 2])
    moving = (t + 8.0 * seeds[:, 3]) % 8.0 < 6.5
    return np.stack([np.sin(heading), np.cos(heading)], -1) * (push * moving)[:, None]


def standing_hips(db: Database) -> float:
    """The data's standing hips height (m): the median root-space hips height of the rows."""
    return float(np.median(joint_positions(db, db.pose)[:, db.roles["hips"], 1]))


def standing_torso(db: Database) -> float:
    """The data's torso height (m): the median over the rows of the root-space height of the
    head (:func:`head_joint`) above the hips. On the Bandai-Namco and sample data no row reads
    under 0.83 of it (LaFAN1's crawls and falls read down to below the hips)."""
    pos = joint_positions(db, db.pose)
    return float(np.median(pos[:, head_joint(db), 1] - pos[:, db.roles["hips"], 1]))


def crowd_starts(db: Database, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(stick seeds (N, 4), start rows (N,)) of a crowd: rows where the data stands upright
    for the next seconds (:func:`kinema.matching.database.upright_rows`; any row where none
    does), drawn with ``seed``."""
    from kinema.matching.database import upright_rows

    rng = np.random.default_rng(seed)
    seeds = rng.random((count, 4))
    rows = upright_rows(db)
    return seeds, rng.choice(rows if len(rows) else np.arange(db.rows), count)


def run_crowd(crowd, seeds: np.ndarray, frames: int = 600, fps: float = 60.0, traces: dict | None = None,
              adjust: bool = True) -> dict:
    """Drive a :class:`~kinema.control.retrieval.controller.RetrievalCrowd` (reset to its
    start rows) with :func:`crowd_sticks` of ``seeds`` (N, 4) for ``frames`` frames; returns
    the number of characters, ``fallen`` and ``sunk`` (how many had their world hips below
    :data:`FALLEN` / :data:`SUNK` of :func:`standing_hips` at some frame), ``lowest_hips``
    (that share's minimum over the crowd), ``head_above_hips`` (every character, every
    frame), ``finite``, ``airborne`` (how many had every body joint at least
    :data:`AIRBORNE_M` above the floor of :func:`~kinema.control.retrieval.metrics.floor_height`
    for :data:`AIRBORNE_S` or longer: a character that floats never lies down, so ``fallen``
    passes it), ``longest_flight_s`` (the crowd's longest such flight), and the glide no single
    scripted stick decides: ``foot_skate_cm_s`` and ``foot_skate_p90_cm_s``, the mean and the
    90th percentile over the characters of each one's drawn skating
    (:func:`~kinema.control.retrieval.metrics.foot_skate`, no foot lock: what the legs
    themselves do), and ``stride_ratio``, the median over the characters that move of each
    one's :func:`stride_ratio` (a body that glides with still legs, or holds one pose while
    it travels, reads low where its skating may not: toes that hover a few centimetres up
    are not on the floor). ``traces``, when
    given, receives ``drawn`` (frames, N, J, 3), the world joint positions of every frame, and
    ``lowest`` (frames, N), the lowest body joint's height above that floor (m). ``adjust``
    pulls each root toward its springs as the runtime does; off, the roots stay where the
    network puts them (motion matching's pull cannot be turned off: it raises)."""
    from kinema.control.retrieval.metrics import body_joints

    db = crowd.db
    hips, head, body, floor = db.roles["hips"], head_joint(db), body_joints(db), floor_height(db)
    low = np.full(len(seeds), np.inf)
    flight = np.zeros(len(seeds), int)
    longest = np.zeros_like(flight)
    head_up, finite = True, True
    drawn, lowest, toes, roots, facings = [], [], [], [], []
    for f in range(frames):
        crowd.drive(crowd_sticks(f / fps, seeds), 1.0 / fps, adjust=adjust)
        pos = crowd.joint_positions()
        toes.append(pos[:, [db.roles["left_toe"], db.roles["right_toe"]]])
        root, facing = crowd.root   # (N, 3) each; copied: a driver may update them in place
        roots.append(np.array(root))
        facings.append(np.array(facing))
        finite &= bool(np.isfinite(pos).all())
        low = np.minimum(low, pos[:, hips, 1])
        head_up &= bool(np.all(pos[:, head, 1] > pos[:, hips, 1]))
        above = pos[:, body, 1].min(-1) - floor
        flight = np.where(above >= AIRBORNE_M, flight + 1, 0)
        longest = np.maximum(longest, flight)
        if traces is not None:
            drawn.append(pos.copy())
            lowest.append(above)
    share = low / standing_hips(db)
    world_toes, roots_ = np.stack(toes, 1), np.stack(roots, 1)                          # (N, F, 2, 3), (N, F, 3)
    skate = foot_skate(world_toes, floor, fps) if finite else np.full(len(seeds), np.inf)   # (N,) cm/s
    local = yaw_rotate(np.stack(facings, 1)[:, :, None], world_toes - roots_[:, :, None], inverse=True)
    strides = [r for r in (stride_ratio(local[c], roots_[c], fps) for c in range(len(seeds))) if r is not None]
    if traces is not None:
        traces.update(drawn=np.stack(drawn), lowest=np.stack(lowest))
    return {"characters": len(seeds), "frames": frames, "seconds": frames / fps, "finite": finite,
            "fallen": int((share < FALLEN).sum()), "sunk": int((share < SUNK).sum()),
            "lowest_hips": float(share.min()), "head_above_hips": head_up,
            "airborne": int((longest >= AIRBORNE_S * fps).sum()), "longest_flight_s": float(longest.max() / fps),
            "foot_skate_cm_s": float(skate.mean()), "foot_skate_p90_cm_s": float(np.percentile(skate, 90)),
            "stride_ratio": float(np.median(strides)) if strides and finite else None}
