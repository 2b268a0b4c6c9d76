"""The motion-matching controller (Holden's Motion-Matching, in NumPy), engine-free.

Every ``step(stick, dt)``:

1. the stick drives the simulated root through springs (:mod:`kinema.control.trajectory`);
2. every ``search_every`` frames, at the end of a clip, or when the desired velocity
   changes sharply, the query is built: the pose part (foot positions and velocities, hip
   velocity) copied from the playing database row, the trajectory part from the springs'
   prediction expressed in the character's root space; the database returns the nearest
   row (exact search, excluding +-``exclude_around`` rows of the playing one and the last
   ``exclude_clip_end`` rows of every clip). If it beats continuing, the controller
   transitions there and the pose offset is inertialized (:mod:`kinema.control.inertialize`);
3. the next row plays; the character's root moves by the row's root velocity and yaw
   rate, then is pulled toward the simulation (damper, halflife ``adjust_halflife``) and
   clamped to ``clamp_distance`` metres / ``clamp_angle`` radians of it, so the character
   follows the requested trajectory.

The output is the world pose (root-space pose rows placed at the character's root).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kinema.control import springs
from kinema.control.footlock import FootLock
from kinema.control.inertialize import Inertializer, PoseState
from kinema.control.trajectory import ControlConfig, TrajectoryController
from kinema.features.root import yaw_rotate
from kinema.matching.search import Exclusion
from kinema.maths import quat


@dataclass(frozen=True)
class MatchingConfig:
    """Controller settings (MM defaults).

    Attributes:
        search_every: frames between searches (MM: 0.1 s = 6 frames at 60 Hz).
        force_search_rate: search at once when the desired velocity changes faster than
            this (m/s^2).
        exclude_around, exclude_clip_end: search exclusions, rows.
        inertialize_halflife: seconds (MM: 0.1).
        adjust_halflife, adjust_rotation_halflife: pull of the character root toward the
            simulation (position, facing), seconds.
        adjust_speed_ratio: the pull moves/turns at most this times the animation's own
            speed/turn rate (no sliding while standing).
        clamp_distance: max metres between character root and simulation.
        clamp_angle: max radians between their facings.
        foot_lock: pin each toe to the world point where its contact began, moving the
            ankle by the same offset with leg IK (:class:`kinema.control.footlock.FootLock`,
            the foot keeps its world rotation); a lock is released when the animated toe moves
            ``unlock_radius`` metres away or the contact ends; locking and release are
            inertialized with halflife ``lock_halflife`` (MM: 0.2 m, 0.1 s).
    """

    search_every: int = 6
    force_search_rate: float = 50.0
    exclude_around: int = 20
    exclude_clip_end: int = 20
    inertialize_halflife: float = 0.1
    adjust_halflife: float = 0.1
    adjust_rotation_halflife: float = 0.2
    adjust_speed_ratio: float = 0.5
    clamp_distance: float = 0.15
    clamp_angle: float = np.pi / 2
    foot_lock: bool = False
    unlock_radius: float = 0.2
    lock_halflife: float = 0.1


@dataclass
class MatchingOutput:
    """One controller step.

    Attributes:
        positions: (J, 3) world joint positions; rotations: (J, 4) world joint rotations.
        root_position, root_direction: (3,) the character's root (floor) and facing.
        frame: database row playing; contacts: (2,) toe contact labels of that row.
        searched / transitioned: whether a search ran / changed the row this step.
        root_adjustment: metres the root was moved this step beyond the row's own root
            motion (pull toward the simulation and clamp); planted feet slide by it unless
            locked.
    """

    positions: np.ndarray
    rotations: np.ndarray
    root_position: np.ndarray
    root_direction: np.ndarray
    frame: int
    contacts: np.ndarray
    searched: bool
    transitioned: bool
    root_adjustment: float = 0.0


def row_pose_state(db, row: int) -> PoseState:
    """Root-space pose of row ``row`` of a database (or of any clips built with a database's
    config, e.g. held-out clips).

    Velocities are world velocities and angular velocities world rates (the root's own
    yaw rate added to the root-space rate toward the next row), both expressed in root
    space: the root switches to the new row's motion at once on a transition, and the
    inertialized offsets of these world rates carry that jump, so the shown world pose
    keeps its velocity (a planted toe stays planted through the switch).
    """
    layout = {name: (a, b) for name, a, b in db.pose_layout}
    p = db.pose
    j = db.num_joints

    def rotations(r: int) -> np.ndarray:
        a, b = layout["joint_rotations_6d"]
        return quat.from_6d(p[r, a:b].reshape(j, 6).astype(np.float64))

    a, b = layout["joint_positions"]
    pos = p[row, a:b].reshape(j, 3).astype(np.float64)
    a, b = layout["joint_velocities"]
    vel = p[row, a:b].reshape(j, 3).astype(np.float64)
    rot = rotations(row)
    stop = db.ranges[db.clip_of(row), 1]
    nxt = rotations(min(row + 1, stop - 1))
    ang = quat.log(quat.abs(quat.mul(nxt, quat.inv(rot)))) * db.fps
    a, _ = layout["root_angular_velocity"]
    ang[:, 1] += float(p[row, a + 1])
    return PoseState(pos, vel, rot, ang)


def _yaw_quat(d: np.ndarray) -> np.ndarray:
    half = 0.5 * np.arctan2(d[0], d[2])
    return np.array([np.cos(half), 0.0, np.sin(half), 0.0])


class MotionMatchingController:
    """Motion matching over a :class:`kinema.matching.database.Database`.

    Args:
        db: the database (features, poses, clip ranges).
        control: stick -> trajectory settings (prediction times must match the database's
            trajectory frames).
        config: search and root settings.
        start_frame: first row to play (default: the start of the first clip).
    """

    def __init__(self, db, control: ControlConfig | None = None, config: MatchingConfig | None = None,
                 start_frame: int | None = None):
        self.db = db
        times = tuple(f / db.fps for f in db.config.trajectory_frames)
        self.control = control or ControlConfig(times=times)
        self.config = config or MatchingConfig()
        self.layout = {name: (a, b) for name, a, b in db.pose_layout}
        self.num_joints = len(db.joint_names)
        self.frame = int(db.ranges[0, 0] if start_frame is None else start_frame)
        self.root_position = np.zeros(3)
        self.root_direction = np.array([0.0, 0.0, 1.0])
        self.trajectory = TrajectoryController(self.control)
        self.inertializer = Inertializer(self._pose(self.frame), self.config.inertialize_halflife)
        self.frames_since_search = 0
        self._last_desired = np.zeros(3)
        self._clip_stop = db.ranges[db.clip_of(self.frame), 1]
        names = db.joint_names
        self.foot_lock = FootLock(db.parents, [names.index(db.config.left_foot), names.index(db.config.right_foot)],
                                  [names.index(db.config.left_toe), names.index(db.config.right_toe)],
                                  self.config.unlock_radius, self.config.lock_halflife)
        self._adjustment = 0.0

    # -- pose rows -------------------------------------------------------------------------
    def _pose(self, row: int) -> PoseState:
        return row_pose_state(self.db, row)

    # -- search ----------------------------------------------------------------------------
    def query(self, request: np.ndarray | None = None) -> np.ndarray:
        """Normalised query (D,): pose features of the playing row, trajectory from the
        springs' prediction in the character's root space (or the given ``request`` (4T,),
        a trajectory already in that space)."""
        raw = self.db.raw_features[self.frame].astype(np.float64).copy()
        if request is None:
            traj = self.trajectory.predict().features(self.root_position, self.root_direction)
        else:
            traj = np.asarray(request, np.float64)
        t = self.db.trajectory_start
        raw[t:t + len(traj)] = traj
        return self.db.normalize(raw)

    def _search(self, next_row: int, request: np.ndarray | None = None, clips=None) -> tuple[int, bool]:
        cfg = self.config
        q = self.query(request)
        ex = Exclusion(current=self.frame, around=cfg.exclude_around, clip_end=cfg.exclude_clip_end, clips=clips)
        idx, cost = self.db.search(q, k=1, exclude=ex)
        best = int(idx[0])
        if best < 0:
            return next_row, False
        continuing = float(((self.db.features[next_row] - q) ** 2).sum())
        if next_row < self._clip_stop and continuing <= float(cost[0]):
            return next_row, False
        return best, True

    # -- step -------------------------------------------------------------------------------
    def step(self, stick: np.ndarray, dt: float, walk: bool = False, camera_yaw: float = 0.0,
             facing_stick: np.ndarray | None = None) -> MatchingOutput:
        """Advance by ``dt`` seconds with the (dead-zoned) ``stick`` (2,) held."""
        cfg = self.config
        self.trajectory.update(np.asarray(stick, np.float64), dt, walk=walk, camera_yaw=camera_yaw,
                               facing_stick=facing_stick)
        desired = self.trajectory.desired_velocity
        rate = np.linalg.norm(desired - self._last_desired) / max(dt, 1e-9)
        self._last_desired = desired.copy()

        self.frames_since_search += 1
        searched = (self.frame + 1 >= self._clip_stop or self.frames_since_search >= cfg.search_every
                    or rate > cfg.force_search_rate)
        transitioned = self._advance(searched)
        self._move_root(dt)
        out = self.inertializer.update(self._pose(self.frame), dt)
        yaw = _yaw_quat(self.root_direction)
        world_pos = yaw_rotate(self.root_direction, out.positions) + self.root_position
        world_rot = quat.mul(np.broadcast_to(yaw, out.rotations.shape), out.rotations)
        contacts = self.db.contacts[self.frame]
        if cfg.foot_lock:
            world_rot, world_pos = self.foot_lock.apply(world_rot, world_pos, contacts, dt)
        return MatchingOutput(world_pos, world_rot, self.root_position.copy(), self.root_direction.copy(),
                              self.frame, contacts.copy(), searched, transitioned,
                              self._adjustment)

    # -- driven by a trajectory request (evaluation) ----------------------------------------
    def start_from(self, pose: PoseState, features: np.ndarray, request: np.ndarray,
                   root_position: np.ndarray, root_direction: np.ndarray, clips=None) -> None:
        """Start from a pose that need not be a database row (e.g. the last frame of a
        held-out clip): the best row for its raw matching ``features`` (D,) with the
        trajectory ``request`` (4T,) starts playing, inertialized from ``pose``
        (root space); the root is put at ``root_position`` facing ``root_direction``."""
        raw = np.asarray(features, np.float64).copy()
        t = self.db.trajectory_start
        raw[t:t + len(request)] = request
        ex = Exclusion(clip_end=self.config.exclude_clip_end, clips=clips)
        idx, _ = self.db.search(self.db.normalize(raw), k=1, exclude=ex)
        self.frame = max(int(idx[0]), 0)
        self._clip_stop = self.db.ranges[self.db.clip_of(self.frame), 1]
        self.inertializer.reset()
        self.inertializer.transition(pose, self._pose(self.frame))
        self.root_position = np.asarray(root_position, np.float64).copy()
        self.root_direction = np.asarray(root_direction, np.float64).copy()
        self.frames_since_search = 0

    def follow(self, request: np.ndarray, dt: float, clips=None) -> PoseState:
        """Advance one frame toward a trajectory ``request`` (4T,) given in the character's
        root space (the joystick of the retrieval controller), without the springs: a search
        every ``search_every`` frames and at a clip's end, inertialized transitions, the root
        moved by the playing row's own root motion (as the retrieval controller's root).
        ``clips``: database clips never to play (e.g. the evaluated clip's own). Returns the
        inertialized root-space pose; the root is ``root_position``/``root_direction``."""
        self.frames_since_search += 1
        self._advance(self.frame + 1 >= self._clip_stop or self.frames_since_search >= self.config.search_every,
                      request, clips)
        self._animate_root(dt)
        return self.inertializer.update(self._pose(self.frame), dt)

    def _advance(self, search: bool, request: np.ndarray | None = None, clips=None) -> bool:
        """Move to the next row to play: with ``search``, the best match when it beats
        continuing (inertialized, as MM: switch at the current instant, the row shown now ->
        the match, then both advance one frame so the offset decays over a real step); at a
        clip's end with nothing better, hold its last row. Returns whether it transitioned."""
        next_row = self.frame + 1
        transitioned = False
        if search:
            self.frames_since_search = 0
            target, transitioned = self._search(min(next_row, self._clip_stop - 1), request, clips)
            if transitioned:
                self.inertializer.transition(self._pose(self.frame), self._pose(target))
                next_row = min(target + 1, int(self.db.ranges[self.db.clip_of(target), 1]) - 1)
        if not transitioned and next_row >= self._clip_stop:
            next_row = self._clip_stop - 1
        self.frame = next_row
        self._clip_stop = self.db.ranges[self.db.clip_of(self.frame), 1]
        return transitioned

    def _animate_root(self, dt: float) -> tuple[np.ndarray, float, np.ndarray, float]:
        """Move and turn the root by the playing row's own root motion (position kept on the
        floor, facing set); returns the row's root velocity (3,) in root space, its yaw rate
        (rad/s), the animated position before it was put on the floor (3,), and the new
        facing angle (radians)."""
        a, b = self.layout["root_velocity"]
        v_rs = self.db.pose[self.frame, a:b].astype(np.float64)
        a, b = self.layout["root_angular_velocity"]
        yaw_rate = float(self.db.pose[self.frame, a + 1])
        self.root_position = self.root_position + yaw_rotate(self.root_direction, v_rs) * dt
        animated = self.root_position.copy()
        self.root_position[1] = 0
        ang = np.arctan2(self.root_direction[0], self.root_direction[2]) + yaw_rate * dt
        self.root_direction = np.array([np.sin(ang), 0.0, np.cos(ang)])
        return v_rs, yaw_rate, animated, float(ang)

    def _move_root(self, dt: float) -> None:
        """Root motion of the playing row, then pull toward the simulation and clamp."""
        cfg = self.config
        v_rs, yaw_rate, animated, ang = self._animate_root(dt)
        sim = self.trajectory.sim
        sim_dir = sim.direction
        sim_ang = np.arctan2(sim_dir[0], sim_dir[2])
        # pull toward the simulation, at most adjust_speed_ratio x the animation's speed (MM)
        speed = float(np.linalg.norm(v_rs))
        step = springs.damper(self.root_position, sim.position, cfg.adjust_halflife, dt) - self.root_position
        n = float(np.linalg.norm(step))
        limit = cfg.adjust_speed_ratio * speed * dt
        if n > limit:
            step *= limit / n
        self.root_position = self.root_position + step
        diff = np.angle(np.exp(1j * (sim_ang - ang)))
        turn = diff * (1 - np.exp(-np.log(2) * dt / cfg.adjust_rotation_halflife))
        turn_limit = cfg.adjust_speed_ratio * abs(yaw_rate) * dt
        ang = ang + float(np.clip(turn, -turn_limit, turn_limit))
        # clamp
        off = self.root_position - sim.position
        dist = np.linalg.norm(off)
        if dist > cfg.clamp_distance:
            self.root_position = sim.position + off * (cfg.clamp_distance / dist)
        diff = np.angle(np.exp(1j * (ang - sim_ang)))
        if abs(diff) > cfg.clamp_angle:
            ang = sim_ang + np.sign(diff) * cfg.clamp_angle
        self.root_direction = np.array([np.sin(ang), 0.0, np.cos(ang)])
        self._adjustment = float(np.linalg.norm((self.root_position - animated)[[0, 2]]))
