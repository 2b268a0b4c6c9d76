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

The output is the world pose (root-space pose rows placed at the character's root). Every
bone of it keeps its rest length (:meth:`MotionMatchingController._rigid`): inertializing
each joint's position on an offset of its own moved the joints apart, and a transition
stretched bones by up to 22 cm (median 2 cm on LaFAN1's scripted sticks; session 32).

With ``batch=B`` one controller steps B characters at once: one array update of the
springs, one search over the characters due (a (Q, D) query batch), one inertializer over
(B, J) offsets; every output gains a leading (B,) dim. One character (``batch=None``) runs
the same array code on a batch of one and returns unbatched shapes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kinema.control import footlock, springs
from kinema.control.footlock import FootLock
from kinema.control.inertialize import Inertializer, PoseState
from kinema.control.trajectory import ControlConfig, TrajectoryController
from kinema.errors import KinemaError
from kinema.features.root import yaw_quaternions, yaw_rotate
from kinema.ik.fabrik import two_bone
from kinema.matching.database import row_offsets
from kinema.matching.search import Exclusion
from kinema.maths import angles, quat
from kinema.maths.backend import unit
from kinema.motion.kinematics import positions_with_lengths

OFFSET_RIGID = 1e-5   # m: a pose whose inertialization offsets are all below this is drawn as its row


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
        transition_cost: a search leaves the playing row only for a match whose cost
            (squared normalised feature distance) is lower than continuing's by more than
            this (MM: 0, any better match). 1, chosen on each shipped model's validation
            takes (``benchmarks/matching_transition_cost.py``, session 33): fewer
            transitions, so motion nearer the actor's energy and distribution (Bandai-Namco:
            joint speed 1.46 -> 1.04 of the actor's, Fréchet 600 -> 77, joint error at 2 s
            7.7 -> 5.6 cm) for a root that follows the path a few millimetres less closely.
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
    unlock_radius: float = footlock.UNLOCK_RADIUS
    lock_halflife: float = footlock.HALFLIFE
    transition_cost: float = 1.0


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


def row_pose_state(db, row: int | np.ndarray) -> PoseState:
    """Root-space pose of row ``row`` (an int, or rows (...) for poses (..., J, ...)) of a
    database (or of any clips built with a database's config, e.g. held-out clips).

    Velocities are world velocities and angular velocities world rates (the root's own
    yaw rate added to the root-space rate toward the next row), both expressed in root
    space: the root switches to the new row's motion at once on a transition, and the
    inertialized offsets of these world rates carry that jump, so the shown world pose
    keeps its velocity (a planted toe stays planted through the switch).
    """
    layout = {name: (a, b) for name, a, b in db.pose_layout}
    p = db.pose
    j = db.num_joints
    lead = np.shape(row)

    def rotations(r) -> np.ndarray:
        a, b = layout["joint_rotations_6d"]
        return quat.from_6d(p[r, a:b].reshape(lead + (j, 6)).astype(np.float64))

    a, b = layout["joint_positions"]
    pos = p[row, a:b].reshape(lead + (j, 3)).astype(np.float64)
    a, b = layout["joint_velocities"]
    vel = p[row, a:b].reshape(lead + (j, 3)).astype(np.float64)
    rot = rotations(row)
    stop = db.ranges[db.clip_of(row), 1]
    nxt = rotations(np.minimum(row + 1, stop - 1))
    ang = quat.log(quat.abs(quat.mul(nxt, quat.inv(rot)))) * db.fps
    a, _ = layout["root_angular_velocity"]
    ang[..., 1] += np.asarray(p[row, a + 1], np.float64)[..., None]
    return PoseState(pos, vel, rot, ang)


def _first(state: PoseState) -> PoseState:
    return PoseState(state.positions[0], state.velocities[0], state.rotations[0], state.angular_velocities[0])


def _batched(state: PoseState, n: int, j: int) -> PoseState:
    return PoseState(*(np.asarray(a, np.float64).reshape(n, j, -1) for a in
                       (state.positions, state.velocities, state.rotations, state.angular_velocities)))


class MotionMatchingController:
    """Motion matching over a :class:`kinema.matching.database.Database`, for one character
    or a batch (see the module docstring).

    Args:
        db: the database (features, poses, clip ranges).
        control: stick -> trajectory settings (prediction times must match the database's
            trajectory frames).
        config: search and root settings.
        start_frame: first row to play (default: the start of the first clip); an int, or
            (B,) rows with ``batch``.
        batch: number of characters B (None: one, with unbatched inputs and outputs).
        search_mask: (N,) bool, the rows a search may return (None: every row), e.g.
            :func:`kinema.matching.database.upright_rows` so that a released stick settles
            into a standing idle and not into a crouch or a fall of the data.

    State, one row per character: ``frames`` (B,) playing rows, ``root_positions`` and
    ``root_directions`` (B, 3); one character reads them as ``frame``, ``root_position``
    and ``root_direction``.
    """

    def __init__(self, db, control: ControlConfig | None = None, config: MatchingConfig | None = None,
                 start_frame: int | np.ndarray | None = None, batch: int | None = None,
                 search_mask: np.ndarray | None = None):
        self.db = db
        if search_mask is not None:
            search_mask = np.asarray(search_mask, bool)
            if search_mask.shape != (db.rows,) or not search_mask.any():
                raise KinemaError(f"search_mask must be ({db.rows},) bool with a True row, got {search_mask.shape}")
        self.search_mask = search_mask
        times = tuple(f / db.fps for f in db.config.trajectory_frames)
        self.control = control or ControlConfig(times=times)
        self.config = config or MatchingConfig()
        self.layout = {name: (a, b) for name, a, b in db.pose_layout}
        self.num_joints = len(db.joint_names)
        self.batch = batch
        n = self.n = 1 if batch is None else int(batch)
        first = int(db.ranges[0, 0]) if start_frame is None else start_frame
        self.frames = np.broadcast_to(np.asarray(first, np.int64), (n,)).copy()
        self.root_positions = np.zeros((n, 3))
        self.root_directions = np.tile([0.0, 0.0, 1.0], (n, 1))
        self.trajectory = TrajectoryController(self.control, batch=batch)
        self.inertializer = Inertializer(self._pose(self.frames), self.config.inertialize_halflife)
        self.frames_since_search = np.zeros(n, np.int64)
        self._last_desired = np.zeros((n, 3))
        self._clip_stop = db.ranges[db.clip_of(self.frames), 1]
        names = db.joint_names
        self.foot_locks = [FootLock(db.parents, [names.index(db.config.left_foot), names.index(db.config.right_foot)],
                                    [names.index(db.config.left_toe), names.index(db.config.right_toe)],
                                    self.config.unlock_radius, self.config.lock_halflife) for _ in range(n)]
        self._adjustment = np.zeros(n)
        # what hangs below the feet (the toes): the rigid rebuild re-hangs it from the solved feet
        feet = (db.roles["left_foot"], db.roles["right_foot"])
        self._below_feet = np.zeros(len(db.parents), bool)
        for j, p in enumerate(db.parents):   # parents come first
            self._below_feet[j] = p >= 0 and (p in feet or self._below_feet[p])

    # -- one character's view ----------------------------------------------------------------
    def _one(self, a: np.ndarray):
        """``a`` (B, ...) as the caller sees it: its only row for one character."""
        return a[0] if self.batch is None else a

    @property
    def frame(self) -> int | np.ndarray:
        """The playing row (an int; (B,) rows for a batch)."""
        return int(self.frames[0]) if self.batch is None else self.frames

    @property
    def root_position(self) -> np.ndarray:
        """The root on the floor (3,) ((B, 3) for a batch; the controller's own array)."""
        return self._one(self.root_positions)

    @root_position.setter
    def root_position(self, value: np.ndarray) -> None:
        self.root_positions[:] = np.asarray(value, np.float64).reshape(-1, 3)

    @property
    def root_direction(self) -> np.ndarray:
        """The root's facing (3,) ((B, 3) for a batch; the controller's own array)."""
        return self._one(self.root_directions)

    @root_direction.setter
    def root_direction(self, value: np.ndarray) -> None:
        self.root_directions[:] = np.asarray(value, np.float64).reshape(-1, 3)

    @property
    def foot_lock(self) -> FootLock:
        """The foot lock of the (first) character."""
        return self.foot_locks[0]

    # -- pose rows -------------------------------------------------------------------------
    def _pose(self, row: int | np.ndarray) -> PoseState:
        return row_pose_state(self.db, row)

    def _rigid(self, pose: PoseState) -> PoseState:
        """The inertialized ``pose`` (B, J, ...) with every bone at its rest length (the
        playing row's skeleton's), the roots and the hips kept: each bone along the
        direction the inertialized positions give it
        (:func:`~kinema.motion.kinematics.positions_with_lengths`), except that each leg's
        knee and foot are solved (:func:`~kinema.ik.fabrik.two_bone`) so the toe stays where
        the inertialized pose puts it, the foot a rest length behind it along the same line:
        lengths rebuilt from the hips alone move the toes, and planted toes then slide
        (LaFAN1's windows: 6 cm/s more skating after the lock). Not forward kinematics of the inertialized
        rotations: a transition between a clip and a mirrored one blends rotations of two
        skeletons whose rest offsets differ."""
        db, parents = self.db, self.db.parents
        # only the characters still carrying a position offset: the others show their row,
        # rigid already (the rebuild costs 0.5 ms a step for one character)
        bent = np.flatnonzero(np.abs(self.inertializer.pos_offset).max((-1, -2)) > OFFSET_RIGID)
        if len(bent) == 0:
            return pose
        lengths = np.linalg.norm(row_offsets(db, self.frames[bent]), axis=-1)   # (Q, J): a mirrored row's skeleton
        raw = pose.positions[bent]
        placed = positions_with_lengths(raw, parents, lengths, anchors=[db.roles["hips"]])
        for side in ("left", "right"):
            foot, toe = db.roles[f"{side}_foot"], db.roles[f"{side}_toe"]
            knee = int(parents[foot])
            # the toe where the inertialized pose puts it, the foot one rest length behind it
            ball = raw[:, toe] - lengths[:, toe, None] * unit(raw[:, toe] - raw[:, foot])
            hip, reach = int(parents[knee]), lengths[:, knee, None] + lengths[:, foot, None]
            # a stretched inertialized leg: the nearest the leg reaches, straight toward it
            to_ball = ball - placed[:, hip]
            ball = placed[:, hip] + to_ball * np.minimum(1.0, 0.9999 * reach / np.maximum(
                np.linalg.norm(to_ball, axis=-1, keepdims=True), 1e-12))
            two_bone(placed, hip, knee, foot, ball, lengths[:, knee, None], lengths[:, foot, None])
        # what hangs below the solved feet (the toes) hangs from them again, along the
        # inertialized directions; every other joint is placed already
        pose.positions[bent] = positions_with_lengths(raw, parents, lengths, anchors=np.flatnonzero(~self._below_feet),
                                                      placed=placed)
        return pose

    # -- search ----------------------------------------------------------------------------
    def _queries(self, request: np.ndarray | None = None) -> np.ndarray:
        """Normalised queries (B, D) (see :meth:`query`)."""
        raw = self.db.raw_features[self.frames].astype(np.float64)
        if request is None:
            traj = self.trajectory.predict().features(self.root_position, self.root_direction)
        else:
            traj = np.asarray(request, np.float64)
        traj = traj.reshape(self.n, -1)
        t = self.db.trajectory_start
        raw[:, t:t + traj.shape[1]] = traj
        return self.db.normalise(raw)

    def query(self, request: np.ndarray | None = None) -> np.ndarray:
        """Normalised query (D,) ((B, D) for a batch): pose features of the playing row,
        trajectory from the springs' prediction in the character's root space (or the given
        ``request`` (4T,) ((B, 4T)), a trajectory already in that space)."""
        return self._one(self._queries(request))

    def _search(self, due: np.ndarray, next_rows: np.ndarray, request: np.ndarray | None = None, clips=None
                ) -> tuple[np.ndarray, np.ndarray]:
        """One search for the characters ``due`` (Q,) indices, each continuing to
        ``next_rows`` (Q,) unless a match beats it: (rows to play (Q,), transitioned (Q,))."""
        cfg = self.config
        q = self._queries(request)[due]
        ex = Exclusion(current=self.frames[due], around=cfg.exclude_around, clip_end=cfg.exclude_clip_end, clips=clips,
                       mask=self.search_mask)
        idx, cost = self.db.search(q, k=1, exclude=ex)
        best = idx[:, 0]
        continuing = ((self.db.features[next_rows] - q) ** 2).sum(-1)
        keep = (best < 0) | ((next_rows < self._clip_stop[due]) & (continuing - cfg.transition_cost <= cost[:, 0]))
        return np.where(keep, next_rows, best), ~keep

    # -- step -------------------------------------------------------------------------------
    def step(self, stick: np.ndarray, dt: float, walk: bool | np.ndarray = False,
             camera_yaw: float | np.ndarray = 0.0, facing_stick: np.ndarray | None = None) -> MatchingOutput:
        """Advance by ``dt`` seconds with the (dead-zoned) ``stick`` (2,) ((B, 2)) held."""
        cfg = self.config
        self.trajectory.update(np.asarray(stick, np.float64), dt, walk=walk, camera_yaw=camera_yaw,
                               facing_stick=facing_stick)
        desired = self.trajectory.desired_velocity.reshape(self.n, 3)
        rate = np.linalg.norm(desired - self._last_desired, axis=-1) / max(dt, 1e-9)
        self._last_desired = desired.copy()

        self.frames_since_search += 1
        searched = ((self.frames + 1 >= self._clip_stop) | (self.frames_since_search >= cfg.search_every)
                    | (rate > cfg.force_search_rate))
        transitioned = self._advance(searched)
        self._move_root(dt)
        out = self._rigid(self.inertializer.update(self._pose(self.frames), dt))
        world_pos = yaw_rotate(self.root_directions[:, None], out.positions) + self.root_positions[:, None]
        yaw = yaw_quaternions(self.root_directions)[:, None]
        world_rot = quat.mul(np.broadcast_to(yaw, out.rotations.shape), out.rotations)
        contacts = self.db.contacts[self.frames]
        if cfg.foot_lock:
            for i, lock in enumerate(self.foot_locks):
                world_rot[i], world_pos[i] = lock.apply(world_rot[i], world_pos[i], contacts[i], dt)
        if self.batch is None:
            return MatchingOutput(world_pos[0], world_rot[0], self.root_positions[0].copy(),
                                  self.root_directions[0].copy(), int(self.frames[0]), contacts[0].copy(),
                                  bool(searched[0]), bool(transitioned[0]), float(self._adjustment[0]))
        return MatchingOutput(world_pos, world_rot, self.root_positions.copy(), self.root_directions.copy(),
                              self.frames.copy(), contacts.copy(), searched, transitioned, self._adjustment.copy())

    # -- driven by a trajectory request (evaluation) ----------------------------------------
    def start_from(self, pose: PoseState, features: np.ndarray, request: np.ndarray,
                   root_position: np.ndarray, root_direction: np.ndarray, clips=None) -> None:
        """Start from a pose that need not be a database row (e.g. the last frame of a
        held-out clip): the best row for its raw matching ``features`` (D,) with the
        trajectory ``request`` (4T,) starts playing, inertialized from ``pose``
        (root space); the root is put at ``root_position`` facing ``root_direction``
        (a batch: every argument with a leading (B,) dim)."""
        n, j = self.n, self.num_joints
        raw = np.asarray(features, np.float64).reshape(n, -1).copy()
        req = np.asarray(request, np.float64).reshape(n, -1)
        t = self.db.trajectory_start
        raw[:, t:t + req.shape[1]] = req
        ex = Exclusion(clip_end=self.config.exclude_clip_end, clips=clips, mask=self.search_mask)
        idx, _ = self.db.search(self.db.normalise(raw), k=1, exclude=ex)
        self.frames = np.maximum(idx[:, 0], 0)
        self._clip_stop = self.db.ranges[self.db.clip_of(self.frames), 1]
        self.inertializer.reset()
        self.inertializer.transition(_batched(pose, n, j), self._pose(self.frames))
        self.root_positions = np.asarray(root_position, np.float64).reshape(n, 3).copy()
        self.root_directions = np.asarray(root_direction, np.float64).reshape(n, 3).copy()
        self.frames_since_search[:] = 0

    def follow(self, request: np.ndarray, dt: float, clips=None) -> PoseState:
        """Advance one frame toward a trajectory ``request`` (4T,) ((B, 4T)) given in the
        character's root space (the joystick of the retrieval controller), without the
        springs: a search every ``search_every`` frames and at a clip's end, inertialized
        transitions, the root moved by the playing row's own root motion (as the retrieval
        controller's root). ``clips``: database clips never to play (e.g. the evaluated
        clip's own). Returns the inertialized root-space pose; the root is
        ``root_position``/``root_direction``."""
        self.frames_since_search += 1
        self._advance((self.frames + 1 >= self._clip_stop) | (self.frames_since_search >= self.config.search_every),
                      request, clips)
        self._animate_root(dt)
        out = self._rigid(self.inertializer.update(self._pose(self.frames), dt))
        return _first(out) if self.batch is None else out

    def _advance(self, search: np.ndarray, request: np.ndarray | None = None, clips=None) -> np.ndarray:
        """Move every character to its next row to play: where ``search`` (B,), the best
        match when it beats continuing (inertialized, as MM: switch at the current instant,
        the row shown now -> the match, then both advance one frame so the offset decays
        over a real step); at a clip's end with nothing better, hold its last row. Returns
        (B,) whether each transitioned."""
        next_rows = self.frames + 1
        transitioned = np.zeros(self.n, bool)
        due = np.flatnonzero(search)
        if len(due):
            self.frames_since_search[due] = 0
            target, trans = self._search(due, np.minimum(next_rows[due], self._clip_stop[due] - 1), request, clips)
            moved = due[trans]
            if len(moved):
                target = target[trans]
                self.inertializer.transition(self._pose(self.frames[moved]), self._pose(target), moved)
                next_rows[moved] = np.minimum(target + 1, self.db.ranges[self.db.clip_of(target), 1] - 1)
                transitioned[moved] = True
        hold = ~transitioned & (next_rows >= self._clip_stop)
        next_rows[hold] = self._clip_stop[hold] - 1
        self.frames = next_rows
        self._clip_stop = self.db.ranges[self.db.clip_of(self.frames), 1]
        return transitioned

    def _animate_root(self, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Move and turn the roots by the playing rows' own root motion (positions kept on
        the floor, facings set); returns the rows' root velocities (B, 3) in root space,
        their yaw rates (B,) (rad/s), the animated positions before they were put on the
        floor (B, 3), and the new facing angles (B,) (radians)."""
        a, b = self.layout["root_velocity"]
        v_rs = self.db.pose[self.frames, a:b].astype(np.float64)
        a, b = self.layout["root_angular_velocity"]
        yaw_rate = self.db.pose[self.frames, a + 1].astype(np.float64)
        self.root_positions = self.root_positions + yaw_rotate(self.root_directions, v_rs) * dt
        animated = self.root_positions.copy()
        self.root_positions[:, 1] = 0
        ang = angles.yaw(self.root_directions) + yaw_rate * dt
        self.root_directions = _directions(ang)
        return v_rs, yaw_rate, animated, ang

    def _move_root(self, dt: float) -> None:
        """Root motion of the playing rows, then pull toward the simulation and clamp."""
        cfg = self.config
        v_rs, yaw_rate, animated, ang = self._animate_root(dt)
        sim = self.trajectory.sim
        sim_pos = sim.position.reshape(self.n, 3)
        sim_dir = sim.direction.reshape(self.n, 3)
        sim_ang = angles.yaw(sim_dir)
        # pull toward the simulation, at most adjust_speed_ratio x the animation's speed (MM)
        speed = np.linalg.norm(v_rs, axis=-1)
        step = springs.damper(self.root_positions, sim_pos, cfg.adjust_halflife, dt) - self.root_positions
        n = np.linalg.norm(step, axis=-1)
        limit = cfg.adjust_speed_ratio * speed * dt
        over = n > limit
        step[over] *= (limit[over] / n[over])[:, None]
        self.root_positions = self.root_positions + step
        diff = np.angle(np.exp(1j * (sim_ang - ang)))
        turn = diff * (1 - np.exp(-np.log(2) * dt / cfg.adjust_rotation_halflife))
        turn_limit = cfg.adjust_speed_ratio * np.abs(yaw_rate) * dt
        ang = ang + np.clip(turn, -turn_limit, turn_limit)
        # clamp
        off = self.root_positions - sim_pos
        dist = np.linalg.norm(off, axis=-1)
        far = dist > cfg.clamp_distance
        self.root_positions[far] = sim_pos[far] + off[far] * (cfg.clamp_distance / dist[far])[:, None]
        diff = np.angle(np.exp(1j * (ang - sim_ang)))
        wide = np.abs(diff) > cfg.clamp_angle
        ang = np.where(wide, sim_ang + np.sign(diff) * cfg.clamp_angle, ang)
        self.root_directions = _directions(ang)
        self._adjustment = np.linalg.norm((self.root_positions - animated)[:, [0, 2]], axis=-1)


def _directions(ang: np.ndarray) -> np.ndarray:
    """Floor directions (B, 3) of yaw angles (B,)."""
    return np.stack([np.sin(ang), np.zeros_like(ang), np.cos(ang)], -1)
