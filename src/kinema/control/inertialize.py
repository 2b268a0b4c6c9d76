"""Inertialization: hide a pose discontinuity by decaying the offset between poses.

On a transition from a source pose to a destination pose, the difference (position,
velocity, rotation, angular velocity, per joint) is stored as an offset; every frame the
offset decays toward zero with a critically damped spring (:func:`springs.decay_spring`,
halflife configurable) and is added to the new animation (Spring-It-On; Holden's
Motion-Matching). Right after a transition the output equals the old output exactly
(continuity at dt = 0), then converges to the new animation.

Rotation offsets are applied on the left, ``out = off * in``; the angular-velocity offset
is stored so that the output angular velocity ``off_w + rotate(off, w_in)`` is continuous
too.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kinema.control import springs
from kinema.maths import quat


@dataclass
class PoseState:
    """One pose with velocities, per joint (any leading shape).

    Attributes:
        positions: (..., J, 3) metres.
        velocities: (..., J, 3) m/s.
        rotations: (..., J, 4) unit quaternions w,x,y,z.
        angular_velocities: (..., J, 3) rad/s rotation vectors.
    """

    positions: np.ndarray
    velocities: np.ndarray
    rotations: np.ndarray
    angular_velocities: np.ndarray

    def copy(self) -> PoseState:
        return PoseState(self.positions.copy(), self.velocities.copy(), self.rotations.copy(),
                         self.angular_velocities.copy())


class Inertializer:
    """Offsets of an inertialized pose stream.

    Args:
        halflife: seconds for the offsets to halve (from rest); MM uses 0.1.
        like: a pose whose shapes the offsets take (zero offsets, identity rotations).
    """

    def __init__(self, like: PoseState, halflife: float = 0.1):
        self.halflife = float(halflife)
        self.pos_offset = np.zeros_like(like.positions, dtype=np.float64)
        self.vel_offset = np.zeros_like(like.velocities, dtype=np.float64)
        self.rot_offset = quat.identity(like.rotations.shape[:-1]).astype(np.float64)
        self.ang_offset = np.zeros_like(like.angular_velocities, dtype=np.float64)

    def reset(self) -> None:
        """Drop all offsets (the output becomes the input)."""
        self.pos_offset[...] = 0
        self.vel_offset[...] = 0
        self.rot_offset[...] = quat.identity(self.rot_offset.shape[:-1])
        self.ang_offset[...] = 0

    def transition(self, source: PoseState, destination: PoseState, index: np.ndarray | None = None) -> None:
        """Switch from ``source`` (the animation playing so far, before offsets) to
        ``destination`` (the new animation at the same instant). With ``index`` (an index
        into the offsets' leading dims, e.g. the characters of a batch that transition)
        only those offsets change, and ``source``/``destination`` hold just their poses."""
        sel = (lambda a: a) if index is None else (lambda a: a[index])
        rot_offset, ang_offset = sel(self.rot_offset), sel(self.ang_offset)
        out_rot = quat.mul(rot_offset, source.rotations)
        out_ang = ang_offset + quat.rotate(rot_offset, source.angular_velocities)
        pos = (source.positions + sel(self.pos_offset)) - destination.positions
        vel = (source.velocities + sel(self.vel_offset)) - destination.velocities
        rot = quat.abs(quat.mul(out_rot, quat.inv(destination.rotations)))
        ang = out_ang - quat.rotate(rot, destination.angular_velocities)
        if index is None:
            self.pos_offset, self.vel_offset, self.rot_offset, self.ang_offset = pos, vel, rot, ang
            return
        self.pos_offset[index], self.vel_offset[index], self.rot_offset[index], self.ang_offset[index] = \
            pos, vel, rot, ang

    def update(self, pose: PoseState, dt: float) -> PoseState:
        """Decay the offsets by ``dt`` seconds and apply them to ``pose`` (the current input).

        Returns:
            the output pose (float64 arrays; rotations unit length).
        """
        self.pos_offset, self.vel_offset = springs.decay_spring(self.pos_offset, self.vel_offset,
                                                                self.halflife, dt)
        self.rot_offset, self.ang_offset = springs.quat_decay_spring(self.rot_offset, self.ang_offset,
                                                                     self.halflife, dt)
        return PoseState(
            positions=pose.positions + self.pos_offset,
            velocities=pose.velocities + self.vel_offset,
            rotations=quat.normalize(quat.mul(self.rot_offset, pose.rotations)),
            angular_velocities=self.ang_offset + quat.rotate(self.rot_offset, pose.angular_velocities),
        )
