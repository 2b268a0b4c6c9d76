"""Matching features, declared once.

A :class:`FeatureGroup` is one group of matching-feature columns: its name, width, weight
and the one function that computes it from :class:`FeatureInputs` (root-space joint
positions and velocities and the joystick's trajectory). A database builds those inputs
from a clip (its rows) and a controller from a pose vector and a trajectory request (its
query), so rows and queries agree by construction. A :class:`FeatureSet` is the ordered
groups of a database: its column layout, the joystick's columns and the feature matrix all
come from it.

:func:`biped_features` declares the motion-matching database's groups from a
:class:`~kinema.matching.config.DatabaseConfig` (Holden's Motion-Matching features: foot
positions and velocities, hip velocity, future root positions and facing directions; the
config's optional ``pose_joints`` group before the trajectory). Each group's weight is one
``*_weight`` field of the config, the fingerprinted part; the layout itself is not hashed,
so a database keeps its fingerprint as long as its groups compute the same columns.
``kinema.matching.quadruped`` declares the dog's groups with the same types.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kinema.matching.config import DatabaseConfig


@dataclass(frozen=True)
class FeatureInputs:
    """What every feature group reads, for database rows and runtime queries alike.

    Attributes:
        joint_names: the skeleton's joint names (J,), to find a group's joints by name.
        positions: (..., J, 3) joint positions in the frame's root space, metres.
        velocities: (..., J, 3) joint velocities in the frame's root space, m/s.
        trajectory: (..., 4 T) the joystick: future root positions (x, z) at the T samples,
            then future facing directions (x, z), in the frame's root space.
    """

    joint_names: Sequence[str]
    positions: np.ndarray
    velocities: np.ndarray
    trajectory: np.ndarray
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {n: i for i, n in enumerate(self.joint_names)})

    def joints(self, names: Sequence[str]) -> list[int]:
        """Indices of joints ``names``; KeyError names a missing one."""
        try:
            return [self._index[n] for n in names]
        except KeyError as e:
            raise KeyError(f"no joint {e.args[0]!r}") from None

    def position(self, *names: str) -> np.ndarray:
        """(..., 3 n) root-space positions of joints ``names``, joint after joint."""
        return _flat(self.positions[..., self.joints(names), :])

    def velocity(self, *names: str) -> np.ndarray:
        """(..., 3 n) root-space velocities of joints ``names``, joint after joint."""
        return _flat(self.velocities[..., self.joints(names), :])


def _flat(a: np.ndarray) -> np.ndarray:
    """(..., n, 3) -> (..., 3 n)."""
    return a.reshape(a.shape[:-2] + (a.shape[-2] * a.shape[-1],))


@dataclass(frozen=True)
class FeatureGroup:
    """One matching feature group.

    Attributes:
        name: the group's name (in the layout and the saved database's metadata).
        width: its columns.
        weight: its share of the squared-distance cost after normalisation.
        compute: ``compute(inputs) -> (..., width)``, for rows and queries alike.
        joystick: part of the controller's trajectory request (replaced by the joystick at
            run time, not read from the playing pose).
    """

    name: str
    width: int
    weight: float
    compute: Callable[[FeatureInputs], np.ndarray]
    joystick: bool = False


@dataclass(frozen=True)
class FeatureSet:
    """The ordered feature groups of a database: layout, joystick columns and features."""

    groups: tuple[FeatureGroup, ...]

    @property
    def layout(self) -> list[tuple[str, int, int, float]]:
        """Groups as (name, start, stop, weight), in column order."""
        out, start = [], 0
        for g in self.groups:
            out.append((g.name, start, start + g.width, float(g.weight)))
            start += g.width
        return out

    @property
    def width(self) -> int:
        """Total feature columns D."""
        return sum(g.width for g in self.groups)

    @property
    def joystick(self) -> slice:
        """The columns of the joystick groups (they stand together)."""
        cols = [(a, b) for g, (_n, a, b, _w) in zip(self.groups, self.layout) if g.joystick]
        if not cols:
            return slice(self.width, self.width)
        if any(cols[i][1] != cols[i + 1][0] for i in range(len(cols) - 1)):
            raise ValueError("the joystick groups of a feature set must stand together")
        return slice(cols[0][0], cols[-1][1])

    def compute(self, inputs: FeatureInputs, dtype=np.float32) -> np.ndarray:
        """Raw (unnormalised) features (..., D) of ``inputs``, group after group."""
        parts = []
        for g in self.groups:
            v = np.asarray(g.compute(inputs))
            if v.shape[-1] != g.width:
                raise ValueError(f"feature group {g.name!r} computed {v.shape[-1]} columns, declared {g.width}")
            parts.append(v)
        return np.concatenate(parts, axis=-1).astype(dtype, copy=False)


def trajectory_groups(samples: int, position_weight: float, direction_weight: float
                      ) -> tuple[FeatureGroup, FeatureGroup]:
    """The joystick's two groups over ``samples`` future samples: root positions (x, z)
    and facing directions (x, z), each ``2 * samples`` wide."""
    t = 2 * samples
    return (FeatureGroup("trajectory_position", t, position_weight, lambda x: x.trajectory[..., :t], joystick=True),
            FeatureGroup("trajectory_direction", t, direction_weight, lambda x: x.trajectory[..., t:2 * t],
                         joystick=True))


def biped_features(config: DatabaseConfig) -> FeatureSet:
    """The motion-matching database's groups for ``config`` (widths for 3 trajectory samples):

    ``left_foot_position`` / ``right_foot_position`` (3 each, ``foot_position_weight``),
    ``left_foot_velocity`` / ``right_foot_velocity`` (3 each, ``foot_velocity_weight``),
    ``hip_velocity`` (3, ``hip_velocity_weight``), with ``pose_joints`` their
    ``pose_joint_positions`` (3 per joint, ``pose_joint_weight``), then
    ``trajectory_position`` and ``trajectory_direction`` (6 each, the joystick).
    """
    c = config
    groups = [
        FeatureGroup("left_foot_position", 3, c.foot_position_weight, lambda x: x.position(c.left_foot)),
        FeatureGroup("right_foot_position", 3, c.foot_position_weight, lambda x: x.position(c.right_foot)),
        FeatureGroup("left_foot_velocity", 3, c.foot_velocity_weight, lambda x: x.velocity(c.left_foot)),
        FeatureGroup("right_foot_velocity", 3, c.foot_velocity_weight, lambda x: x.velocity(c.right_foot)),
        FeatureGroup("hip_velocity", 3, c.hip_velocity_weight, lambda x: x.velocity(c.hips)),
    ]
    if c.pose_joints:
        groups.append(FeatureGroup("pose_joint_positions", 3 * len(c.pose_joints), c.pose_joint_weight,
                                   lambda x: x.position(*c.pose_joints)))
    groups += trajectory_groups(len(c.trajectory_frames), c.trajectory_position_weight, c.trajectory_direction_weight)
    return FeatureSet(tuple(groups))
