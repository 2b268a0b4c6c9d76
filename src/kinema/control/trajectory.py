"""Gamepad / keyboard stick -> desired velocity and facing -> predicted future trajectory.

The character's "simulation" object (position, velocity, acceleration on the floor; a yaw
rotation with angular velocity) follows the desired velocity and facing through
critically damped springs (:mod:`kinema.control.springs`, exact closed forms), as in
Holden's Motion-Matching controller. Its future at the feature sample times (default
+20, +40, +60 frames at 60 Hz) is predicted in closed form with the input held.

Conventions: metres, seconds, Y up; a facing direction is a unit floor vector; yaw
``a`` maps +Z to ``(sin a, 0, cos a)``; the character's left is +X when it faces +Z.
Sticks are ``(x, y)`` with +x right and +y **forward/up** (flip a gamepad's "left_y",
which is +1 when pushed down).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from kinema.control import springs
from kinema.maths import angles, quat

_UP = np.array([0.0, 1.0, 0.0])


@dataclass(frozen=True)
class ControlConfig:
    """How sticks map to motion.

    Attributes:
        dead_zone: stick magnitudes below this read as zero.
        run_speeds / walk_speeds: (forward, sideways, backward) m/s, relative to the facing.
        position_halflife: halflife (s) of the velocity spring (MM: 0.27).
        rotation_halflife: halflife (s) of the facing spring (MM: 0.27).
        gait_halflife: halflife (s) of the run <-> walk blend (MM: 0.1).
        times: prediction times in seconds (MM: 20, 40, 60 frames at 60 Hz).
        camera_relative: stick directions relative to the camera (else to the character).
    """

    dead_zone: float = 0.2
    run_speeds: tuple[float, float, float] = (4.0, 3.0, 2.5)
    walk_speeds: tuple[float, float, float] = (1.75, 1.5, 1.25)
    position_halflife: float = 0.27
    rotation_halflife: float = 0.27
    gait_halflife: float = 0.1
    times: tuple[float, ...] = (20 / 60, 40 / 60, 60 / 60)
    camera_relative: bool = True


def read_stick(x: float, y: float, dead_zone: float = 0.2) -> np.ndarray:
    """Stick (x, y) -> (2,) with a dead zone and a squared magnitude response (MM):
    zero below ``dead_zone``, else ``direction * min(1, |stick|)^2``."""
    s = np.array([x, y], np.float64)
    m = float(np.hypot(*s))
    if m < dead_zone:
        return np.zeros(2)
    return s / m * min(1.0, m) ** 2


def yaw_direction(yaw: float) -> np.ndarray:
    """Unit floor direction (3,) of a yaw angle (radians)."""
    return np.array([np.sin(yaw), 0.0, np.cos(yaw)])


def _direction_yaw(d: np.ndarray) -> np.ndarray:
    """Yaw (...) float64 of floor directions (..., 3) (float32 directions: the float32
    angle, widened)."""
    d = np.asarray(d)
    return angles.yaw(d).astype(np.float64)


def stick_to_world(stick: np.ndarray, frame_yaw: float | np.ndarray) -> np.ndarray:
    """Sticks (..., 2) read in frames facing ``frame_yaw`` (...) as world floor vectors
    (..., 3): +y is the frame's forward, +x its right (-X for a frame facing +Z)."""
    stick = np.asarray(stick)
    lx, lz = -stick[..., 0], stick[..., 1]
    c, s = np.cos(frame_yaw), np.sin(frame_yaw)
    return _floor(c * lx + s * lz, c * lz - s * lx)


def _floor(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Floor vectors (..., 3) from their x and z (...)."""
    x, z = np.broadcast_arrays(x, z)
    return np.stack([x, np.zeros_like(x), z], -1)


def desired_velocity(stick_world: np.ndarray, facing: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    """World floor velocities (..., 3) for world stick vectors (..., 3), scaled
    anisotropically by the (forward, sideways, backward) ``speeds`` (..., 3) in the
    characters' facing frames (facings (..., 3))."""
    yaw = _direction_yaw(facing)
    c, s = np.cos(yaw), np.sin(yaw)
    lx = c * stick_world[..., 0] - s * stick_world[..., 2]       # into the facing frame
    lz = s * stick_world[..., 0] + c * stick_world[..., 2]
    lx = lx * speeds[..., 1]
    lz = lz * np.where(lz > 0, speeds[..., 0], speeds[..., 2])
    return _floor(c * lx + s * lz, c * lz - s * lx)


@dataclass
class Simulation:
    """The simulated character root(s), advanced by springs: one character, or a batch with
    leading dims (...) on every field (see :class:`TrajectoryController`).

    Attributes:
        position, velocity, acceleration: (..., 3) floor vectors (y = 0).
        rotation: (..., 4) yaw quaternion; angular_velocity: (..., 3) rad/s.
        gait: 0 running .. 1 walking (springy), with its rate ``gait_velocity`` (floats for
            one character, (...) arrays for a batch).
        desired_rotation: (..., 4) the facing goal kept while the stick is released.
    """

    position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    acceleration: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rotation: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))
    angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    gait: float | np.ndarray = 0.0
    gait_velocity: float | np.ndarray = 0.0
    desired_rotation: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))

    @property
    def direction(self) -> np.ndarray:
        """Facing (..., 3): the rotation applied to +Z."""
        return quat.rotate(self.rotation, np.broadcast_to([0.0, 0.0, 1.0], self.position.shape))

    def at(self, i: int) -> Simulation:
        """Character ``i`` of a batched simulation, with one character's shapes (copies)."""
        parts = {f.name: np.array(getattr(self, f.name)[i]) for f in fields(self)}
        return Simulation(**{k: float(v) if v.ndim == 0 else v for k, v in parts.items()})


@dataclass
class Prediction:
    """Predicted simulation at future times (of one character, or of a batch (...)).

    Attributes:
        times: (T,) seconds ahead; positions (..., T, 3); directions (..., T, 3) unit floor
        vectors; velocities (..., T, 3) m/s.
    """

    times: np.ndarray
    positions: np.ndarray
    directions: np.ndarray
    velocities: np.ndarray

    def features(self, root_position: np.ndarray, root_direction: np.ndarray) -> np.ndarray:
        """Trajectory matching features (..., 4T): positions (x, z) relative to the roots
        (..., 3), then directions (x, z), both in the roots' space (the database layout)."""
        yaw = _direction_yaw(root_direction)
        c, s = np.cos(yaw)[..., None], np.sin(yaw)[..., None]
        lead = self.positions.shape[:-2]

        def local(v):
            return np.stack([c * v[..., 0] - s * v[..., 2], s * v[..., 0] + c * v[..., 2]], axis=-1).reshape(lead + (-1,))
        rel = self.positions - np.asarray(root_position)[..., None, :]
        return np.concatenate([local(rel), local(self.directions)], -1)


class TrajectoryController:
    """Sticks -> springs -> the simulated root and its predicted future, for one character
    or, with ``batch``, for B characters stepped at once (every argument and state field
    gains a leading (B,) dim; one character runs the same array code without it).

    Args:
        config: speeds, halflives, prediction times.
        position: start position (3,) (or (B, 3)) and ``yaw`` start facing (radians, or (B,)).
        batch: number of characters (None: one, with unbatched shapes).
    """

    def __init__(self, config: ControlConfig | None = None, position=(0.0, 0.0, 0.0), yaw: float | np.ndarray = 0.0,
                 batch: int | None = None):
        self.config = config or ControlConfig()
        lead = () if batch is None else (int(batch),)
        pos = np.broadcast_to(np.asarray(position, np.float64) * [1, 0, 1], lead + (3,)).copy()
        rot = np.broadcast_to(angles.yaw_quaternion(yaw), lead + (4,)).copy()
        zero = np.zeros(lead + (3,))
        self.sim = Simulation(position=pos, velocity=zero.copy(), acceleration=zero.copy(), rotation=rot,
                              angular_velocity=zero.copy(), gait=0.0 if batch is None else np.zeros(lead),
                              gait_velocity=0.0 if batch is None else np.zeros(lead), desired_rotation=rot.copy())
        self.desired_velocity = zero.copy()

    def targets(self, stick: np.ndarray, camera_yaw: float | np.ndarray = 0.0, facing_stick: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """Desired world velocity (..., 3) and desired rotation (..., 4) for (dead-zoned)
        sticks (..., 2)."""
        cfg, sim = self.config, self.sim
        direction = sim.direction
        frame_yaw = camera_yaw if cfg.camera_relative else _direction_yaw(direction)
        world = stick_to_world(np.asarray(stick, np.float64), frame_yaw)
        gait = np.asarray(sim.gait)[..., None]
        speeds = (1 - gait) * np.array(cfg.run_speeds) + gait * np.array(cfg.walk_speeds)
        vel = desired_velocity(world, direction, speeds)
        moving = (np.sqrt((world * world).sum(-1)) > 0.01)[..., None]
        rot = np.where(moving, angles.yaw_quaternion(_direction_yaw(vel)), sim.desired_rotation)
        if facing_stick is not None:   # strafe: face the right stick
            fs = np.asarray(facing_stick, np.float64)
            strafe = (np.hypot(fs[..., 0], fs[..., 1]) > 0.01)[..., None]
            rot = np.where(strafe, angles.yaw_quaternion(_direction_yaw(stick_to_world(fs, frame_yaw))), rot)
        return vel, rot

    def update(self, stick: np.ndarray, dt: float, walk: bool | np.ndarray = False,
               camera_yaw: float | np.ndarray = 0.0, facing_stick: np.ndarray | None = None) -> Simulation:
        """Advance the simulation by ``dt`` seconds with the sticks (..., 2) (already
        dead-zoned, e.g. by :func:`read_stick`) held; ``walk`` a bool (or (...)); returns
        the new state."""
        sim, cfg = self.sim, self.config
        g, gv = springs.spring(np.asarray(sim.gait, np.float64), np.asarray(sim.gait_velocity, np.float64),
                               np.asarray(walk, np.float64), cfg.gait_halflife, dt)
        sim.gait, sim.gait_velocity = (float(g), float(gv)) if np.ndim(g) == 0 else (g, gv)
        vel, rot = self.targets(stick, camera_yaw, facing_stick)
        self.desired_velocity = vel
        sim.desired_rotation = rot
        sim.position, sim.velocity, sim.acceleration = springs.velocity_spring(
            sim.position, sim.velocity, sim.acceleration, vel, cfg.position_halflife, dt)
        sim.rotation, sim.angular_velocity = springs.quat_spring(
            sim.rotation, sim.angular_velocity, rot, cfg.rotation_halflife, dt)
        sim.rotation = quat.normalize(sim.rotation)
        return sim

    def predict(self, times: np.ndarray | None = None) -> Prediction:
        """The simulation at future ``times`` (s; default config.times), input held:
        positions from the velocity spring and facing from the rotation spring, both in
        closed form from the current state; shapes (..., T, 3)."""
        cfg, sim = self.config, self.sim
        t = np.asarray(cfg.times if times is None else times, np.float64)
        pos, vel, _ = springs.velocity_spring_predict(sim.position, sim.velocity, sim.acceleration,
                                                      self.desired_velocity, cfg.position_halflife, t)
        tt = t.reshape((-1,) + (1,) * sim.rotation.ndim)
        rots, _ = springs.quat_spring(sim.rotation[None], sim.angular_velocity[None], sim.desired_rotation[None],
                                      cfg.rotation_halflife, tt)
        dirs = quat.rotate(rots, np.broadcast_to([0.0, 0.0, 1.0], rots.shape[:-1] + (3,)))
        dirs[..., 1] = 0
        dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
        return Prediction(t, *(np.moveaxis(a, 0, -2) for a in (pos, dirs, vel)))
