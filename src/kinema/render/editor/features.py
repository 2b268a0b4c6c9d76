"""Every :mod:`kinema.features` quantity of one clip, computed once for all its frames.

The motion editor draws these per frame by indexing: the ground-projected root and its
facing, the past/future root trajectory (a :class:`~kinema.features.TimeSeries`),
trajectories of a few joints (feet, hands), joint velocities, foot contacts and local
phases. :func:`feature_setup` picks the rules for a skeleton (the LaFAN1 and Bandai-Namco
presets of :class:`~kinema.features.FeatureSpec` when the joint names match, otherwise
guessed from names and the hierarchy); :meth:`ClipFeatures.compute` evaluates them with
vectorised calls over the whole clip (no loop over frames).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from kinema.errors import KinemaError
from kinema.features.contacts import contacts as contact_labels
from kinema.features.contacts import local_phases
from kinema.features.dataset import FeatureSpec
from kinema.features.root import (
    Root,
    RootConfig,
    compute_root,
    finite_difference,
    from_root_space,
    resolve_joint,
    vectors_from_root_space,
)
from kinema.features.trajectory import JointTrajectory, RootTrajectory, TimeSeries, joint_trajectory, root_trajectory

_FOOT = re.compile(r"foot|toe|ankle", re.I)
_ANKLE = re.compile(r"foot|ankle", re.I)
_HAND = re.compile(r"hand|wrist", re.I)
_SKIP = re.compile(r"end|site|index|thumb|middle|ring|pinky|finger", re.I)


@dataclass(frozen=True)
class FeatureSetup:
    """Which features the editor shows for one skeleton.

    Attributes:
        root: the root rule.
        contact_joints: joint indices with contact labels and local phases.
        contact_height: metres, one per contact joint; None entries are measured per clip
            (the joint's 5th-percentile height plus 5 cm).
        contact_speed: m/s.
        contact_filter: median filter length, frames.
        trajectory_joints: joint indices whose past/future trajectories are drawn.
        series: samples of the root trajectory.
        joint_series: samples of the joint trajectories.
        preset: "lafan1", "bandai" or "guess" (where the rules came from).
    """

    root: RootConfig
    contact_joints: tuple[int, ...]
    contact_height: tuple[float | None, ...]
    contact_speed: float = 0.5
    contact_filter: int = 5
    trajectory_joints: tuple[int, ...] = ()
    series: TimeSeries = TimeSeries(1.0, 1.0, 13)
    joint_series: TimeSeries = TimeSeries(0.5, 0.5, 11)
    preset: str = "guess"


def _preset_fits(spec: FeatureSpec, skeleton) -> bool:
    r = spec.root
    names = [r.position_joint, r.left_hip, r.right_hip, r.left_shoulder, r.right_shoulder, *spec.contact_joints]
    return all(n is None or n in skeleton.names for n in names)


def feature_setup(skeleton, fps: float) -> FeatureSetup:
    """The editor's feature rules for ``skeleton`` (names matched against the presets)."""
    names = list(skeleton.names)
    for preset, spec in (("lafan1", FeatureSpec.lafan1()), ("bandai", FeatureSpec.bandai())):
        if _preset_fits(spec, skeleton):
            contacts = tuple(skeleton.index(n) for n in spec.contact_joints)
            heights = spec.contact_height
            heights = tuple(heights) if isinstance(heights, tuple) else (heights,) * len(contacts)
            hands = [j for j, n in enumerate(names) if _HAND.search(n) and not _SKIP.search(n)]
            ankles = [j for j in contacts if _ANKLE.search(names[j])]
            return FeatureSetup(spec.root, contacts, heights, spec.contact_speed, spec.contact_filter,
                                tuple(ankles + hands), preset=preset)
    window = max(5, int(round(fps)) | 1)            # about a second, odd
    root = RootConfig.guess(skeleton, smoothing="savgol", window=window, order=3)
    parents = np.asarray(skeleton.parents)
    leaves = set(range(len(names))) - set(parents[parents >= 0].tolist())
    feet = [j for j, n in enumerate(names) if _FOOT.search(n) and not _SKIP.search(n)]
    if not feet:   # nothing named like a foot: the two leaves furthest down the hierarchy
        depth = np.zeros(len(names), int)
        for j in range(1, len(names)):
            depth[j] = depth[parents[j]] + 1 if parents[j] >= 0 else 0
        feet = sorted(sorted(leaves, key=lambda j: -depth[j])[:2])
    hands = [j for j, n in enumerate(names) if _HAND.search(n) and not _SKIP.search(n)]
    ankles = [j for j in feet if _ANKLE.search(names[j])] or feet
    return FeatureSetup(root, tuple(feet), (None,) * len(feet), 0.5, 5, tuple(dict.fromkeys(ankles + hands)),
                        preset="guess")


@dataclass(eq=False)
class ClipFeatures:
    """Features of every frame of one motion (world space where drawn, root space as the
    feature functions return them).

    Attributes:
        fps: frame rate.
        positions: (F, J, 3) world joint positions, metres.
        velocities: (F, J, 3) world joint velocities, m/s.
        root: the per-frame :class:`~kinema.features.Root`.
        root_velocities: (F, 3) m/s; ``root_speed`` (F,) their length.
        offsets: (S,) frame offsets of the root trajectory samples (negative: past).
        trajectory: root-space :class:`~kinema.features.RootTrajectory` (F, S, 3).
        trajectory_positions, trajectory_directions: (F, S, 3) the same in world space.
        joints: (K,) trajectory joints; ``joint_offsets`` (T,) their sample offsets.
        joint_trajectory: root-space :class:`~kinema.features.JointTrajectory` (F, T, K, ...).
        joint_trajectory_positions: (F, T, K, 3) world space.
        joint_trajectory_axes: (F, T, K, 2, 3) the two 6D columns (the joint's local x and
            y axes) in world space.
        contact_joints: (C,) joints with contacts; ``contacts`` (F, C) bool, ``phases``
            (F, C) local phases in [0, 1).
    """

    fps: float
    positions: np.ndarray
    velocities: np.ndarray
    root: Root
    root_velocities: np.ndarray
    root_speed: np.ndarray
    offsets: np.ndarray
    trajectory: RootTrajectory
    trajectory_positions: np.ndarray
    trajectory_directions: np.ndarray
    joints: np.ndarray
    joint_offsets: np.ndarray
    joint_trajectory: JointTrajectory
    joint_trajectory_positions: np.ndarray
    joint_trajectory_axes: np.ndarray
    contact_joints: np.ndarray
    contacts: np.ndarray
    phases: np.ndarray

    @property
    def num_frames(self) -> int:
        return int(self.positions.shape[0])

    @classmethod
    def compute(cls, motion, setup: FeatureSetup | None = None) -> ClipFeatures:
        """All features of ``motion`` (a :class:`kinema.motion.Motion`), vectorised over frames."""
        setup = setup or feature_setup(motion.skeleton, motion.fps)
        fps = float(motion.fps)
        gr, gp = motion.global_transforms()
        gp = np.asarray(gp, np.float32)
        try:
            root = compute_root(gp, gr, motion.skeleton, setup.root)
        except KinemaError as exc:
            raise KinemaError(f"{motion.name or 'motion'}: cannot place the root: {exc}") from None
        vel = finite_difference(gp, fps)
        root_vel = root.velocities(fps)
        traj = root_trajectory(root, setup.series, fps, velocities=root_vel)
        joints = np.asarray([resolve_joint(motion.skeleton, j) for j in setup.trajectory_joints], np.int64)
        jt = joint_trajectory(gp, gr, root, setup.joint_series, fps, joints=joints, velocities=vel)
        cj = np.asarray(setup.contact_joints, np.int64)
        if cj.size:
            heights = np.array([np.percentile(gp[:, j, 1], 5) + 0.05 if h is None else h
                                for j, h in zip(cj, setup.contact_height)], np.float64)
            contacts = contact_labels(gp, fps, cj, heights, setup.contact_speed, setup.contact_filter,
                                      velocities=vel)
            phases = local_phases(contacts)
        else:
            contacts = np.zeros((gp.shape[0], 0), bool)
            phases = np.zeros((gp.shape[0], 0), np.float32)
        return cls(fps=fps, positions=gp, velocities=vel, root=root, root_velocities=root_vel,
                   root_speed=np.linalg.norm(root_vel, axis=-1), offsets=setup.series.offsets(fps),
                   trajectory=traj, trajectory_positions=from_root_space(root, traj.positions),
                   trajectory_directions=vectors_from_root_space(root, traj.directions),
                   joints=joints, joint_offsets=setup.joint_series.offsets(fps), joint_trajectory=jt,
                   joint_trajectory_positions=from_root_space(root, jt.positions),
                   joint_trajectory_axes=vectors_from_root_space(root, jt.rotations.reshape(jt.rotations.shape[:-1]
                                                                                            + (2, 3))),
                   contact_joints=cj, contacts=contacts, phases=phases)
