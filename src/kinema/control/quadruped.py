"""The MANN dog's motion-matching controller: search restricted to the commanded gait over
:mod:`kinema.matching.quadruped`'s database, inertialized transitions (the biped's
:class:`~kinema.control.inertialize.Inertializer`: offsets of the hips position, the joint
rotations and their velocities decayed by a critically damped spring), a velocity-spring
trajectory and live four-leg foot locking (leg IK).

Everything runs at 30 fps; metres, Y up, quaternions (w, x, y, z).
"""
from __future__ import annotations

import numpy as np

from kinema.control.inertialize import Inertializer, PoseState
from kinema.control.springs import velocity_spring, velocity_spring_predict
from kinema.errors import KinemaError
from kinema.ik.pose import solve_pose
from kinema.matching.quadruped import FPS, FUTURE, GAITS, PAWS, Database
from kinema.maths import angles, quat
from kinema.motion import kinematics


def row_velocities(db: Database) -> tuple[np.ndarray, np.ndarray]:
    """Velocities of every database row toward the next (forward differences at 30 fps;
    zero on a clip's last row), as the inertializer reads them.

    Returns:
        hips (N, 1, 3) m/s: the hips' world velocity (the root's motion included)
        expressed in the row's root space; angular (N, J, 3) rad/s: each joint's local
        rotation rate, the hips' in world terms (the root's yaw rate included), as rotation
        vectors in the parent's (the hips': the root's) frame.
    """
    n = db.num_frames
    nxt = np.where(db.next_ok, np.arange(n) + 1, np.arange(n))
    turn = angles.yaw_quaternion(np.where(db.next_ok, db.yaw_delta.astype(np.float64), 0.0))   # (N, 4)
    step = np.where(db.next_ok[:, None], db.root_delta.astype(np.float64), 0.0)
    hips = db.hips.astype(np.float64)
    vel = (step + quat.rotate(turn, hips[nxt]) - hips) * FPS
    rot = db.rotations.astype(np.float64)
    ahead = rot[nxt]
    ahead[:, 0] = quat.mul(turn, ahead[:, 0])
    ang = quat.log(quat.abs(quat.mul(ahead, quat.inv(rot)))) * FPS
    return vel[:, None], ang


class DogController:
    """Steers the dog: ``step(direction, gait)`` once per frame at 30 fps.

    Args:
        db: the :class:`Database`.
        search_every: frames between searches (also searches at once when the gait changes).
        halflife: inertialization halflife (s) of transitions (the biped's critically damped
            offset spring); the trajectory spring's is twice it.
        foot_lock: lock planted paws (IK on each leg).
    """

    def __init__(self, db: Database, search_every: int = 24, halflife: float = 0.12, foot_lock: bool = True,
                 start_gait: str = "walk") -> None:
        self.db, self.search_every, self.halflife, self.use_lock = db, search_every, halflife, foot_lock
        self.index = int(np.flatnonzero(db.search_mask(start_gait))[0])
        self.position = np.zeros(3)              # root on the floor, world
        self.yaw = 0.0                           # root facing angle about +Y (0: +Z)
        self.velocity = np.zeros(3)
        self.accel = np.zeros(3)
        self.gait: str | None = None
        self.since_search = 0
        self.hips_velocity, self.angular_velocity = row_velocities(db)
        self.shown = self._state(self.index)     # the inertialized root-space pose on screen
        self.inertializer = Inertializer(self.shown, halflife)
        self.searches = 0
        sk = db.skeleton
        self.paws = [sk.index(n) for n in PAWS]
        self.leg_roots = [int(sk.parents[sk.parents[j]]) for j in self.paws]
        self.locks = [None] * 4                  # locked world targets
        self.release = np.zeros(4)

    # ------------------------------------------------------------------ search
    def _query(self, direction: np.ndarray, speed: float) -> np.ndarray:
        """Features of the current pose with the desired trajectory from the velocity spring."""
        db = self.db
        times = np.asarray(FUTURE) / FPS
        goal = direction * speed
        pos, _, _ = velocity_spring_predict(self.position, self.velocity, self.accel, goal, self.halflife * 2, times)
        want_yaw = angles.yaw(direction) if speed > 0 else self.yaw
        dyaw = angles.wrap(want_yaw - self.yaw)
        yaws = self.yaw + dyaw * (1 - 0.5 ** (times / 0.25))
        c, s = np.cos(-self.yaw), np.sin(-self.yaw)
        rel = pos - self.position
        fut = np.stack([c * rel[:, 0] + s * rel[:, 2], c * rel[:, 2] - s * rel[:, 0]], -1)
        fdir = np.stack([np.sin(yaws - self.yaw), np.cos(yaws - self.yaw)], -1)
        raw = db.normaliser.denormalise(db.features[self.index])          # current pose features
        raw[db.feature_set.joystick] = np.concatenate([fut.ravel(), fdir.ravel()])
        return db.normaliser.normalise(raw)

    def _search(self, direction: np.ndarray, gait: str) -> None:
        db = self.db
        q = self._query(direction, db.speeds[gait])
        rows = db.search_mask(gait, bool(db.mirrored[self.index]), self.search_every)
        if not rows.any():
            raise KinemaError(f"the database has no {gait} frames")
        cand = np.nonzero(rows)[0]
        cost = ((db.features[cand] - q) ** 2).sum(1)
        best = int(cand[np.argmin(cost)])
        self.searches += 1
        here = self.index
        if db.valid[here] and db.gait[here] == GAITS.index(gait):
            # stay on the playing clip unless the best frame is clearly better
            if ((db.features[here] - q) ** 2).sum() <= cost.min() * 1.3 + 1e-6:
                best = here
        if best != here and abs(best - here) > 3:
            self._transition(best)
        self.since_search = 0

    def _state(self, row: int) -> PoseState:
        """Root-space pose of database row ``row``: the hips' position (1, 3) and velocity
        (1, 3), every joint's local rotation (J, 4) (the hips' in root space) and rate (J, 3)."""
        db = self.db
        return PoseState(db.hips[row][None].astype(np.float64), self.hips_velocity[row],
                         db.rotations[row].astype(np.float64), self.angular_velocity[row])

    def _transition(self, new: int) -> None:
        """Switch to row ``new``, inertialized: the shown pose keeps its value and velocity,
        the offset to the new row's decays (:class:`~kinema.control.inertialize.Inertializer`)."""
        self.inertializer.transition(self._state(self.index), self._state(new))
        self.index = new

    # ------------------------------------------------------------------ step
    def step(self, direction, gait: str) -> tuple[np.ndarray, np.ndarray]:
        """Advance one frame toward moving along world ``direction`` (x, z) in ``gait``.

        Returns the world pose (rotations (J, 4), positions (J, 3)) after foot locking."""
        if gait not in GAITS:
            raise KinemaError(f"unknown gait {gait!r}; gaits: {', '.join(GAITS)}")
        d = np.array([direction[0], 0.0, direction[1]], np.float64)
        n = np.linalg.norm(d)
        d = d / n if n > 1e-6 else d
        db, dt = self.db, 1.0 / FPS
        # trajectory simulation (critically damped velocity spring)
        x, v, a = velocity_spring(self.position[None], self.velocity[None], self.accel[None],
                                  (d * db.speeds[gait])[None], self.halflife * 2, dt)
        sim_pos, self.velocity, self.accel = x[0], v[0], a[0]
        # play on
        if not db.next_ok[self.index] or not db.valid[self.index]:
            self._search(d, gait)
        elif gait != self.gait or self.since_search >= self.search_every or db.gait[self.index] != GAITS.index(gait):
            self._search(d, gait)
        self.gait = gait
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        step = db.root_delta[self.index]
        self.position = self.position + np.array([c * step[0] + s * step[2], 0.0, c * step[2] - s * step[0]])
        self.yaw += float(db.yaw_delta[self.index])
        self.index += 1
        self.since_search += 1
        # keep the character on the simulated trajectory and facing the commanded way
        self.position += (sim_pos - self.position) * 0.1
        if n > 1e-6:
            err = angles.wrap(angles.yaw(d) - self.yaw)
            self.yaw += 0.06 * err
        self.shown = self.inertializer.update(self._state(self.index), dt)
        return self.pose()

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The world pose shown now (rotations (J, 4), positions (J, 3)), paws locked."""
        db = self.db
        rot = self.shown.rotations.copy()
        ry = angles.yaw_quaternion(self.yaw)
        hips = self.shown.positions[0]
        pos = db.offsets[self.index].astype(np.float64)
        pos[0] = self.position + quat.rotate(ry, hips)
        rot[0] = quat.mul(ry, rot[0])
        g_rot, g_pos = kinematics.forward(rot[None], pos[None], db.skeleton.parents)
        g_rot, g_pos = g_rot[0], g_pos[0]
        if self.use_lock:
            g_rot, g_pos = self._lock(g_rot, g_pos, db.contacts[self.index])
        return g_rot.astype(np.float32), g_pos.astype(np.float32)

    def _lock(self, g_rot: np.ndarray, g_pos: np.ndarray, contact: np.ndarray, release: int = 5,
              max_drift: float = 0.12) -> tuple[np.ndarray, np.ndarray]:
        """Keep planted paws where they landed (within ``max_drift``), blend out over ``release`` frames."""
        for k, j in enumerate(self.paws):
            foot = g_pos[j]
            if contact[k]:
                if self.locks[k] is None:
                    self.locks[k] = foot.copy()
                off = self.locks[k] - foot
                dist = np.linalg.norm(off)
                if dist > max_drift:
                    self.locks[k] = foot + off * (max_drift / dist)
                self.release[k] = release
            elif self.locks[k] is not None:
                self.release[k] -= 1
                if self.release[k] <= 0:
                    self.locks[k] = None
        for k, j in enumerate(self.paws):
            if self.locks[k] is None:
                continue
            w = 1.0 if contact[k] else self.release[k] / release
            w = w * w * (3 - 2 * w)
            target = g_pos[j] + (self.locks[k] - g_pos[j]) * w
            if not contact[k]:                       # releasing: never pull a lifting paw down
                target[1] = max(target[1], g_pos[j][1])
            res = solve_pose(g_rot, g_pos, self.db.skeleton.parents, self.leg_roots[k], {j: target}, max_iterations=8)
            g_rot, g_pos = res.rotations, res.positions
        return g_rot, g_pos
