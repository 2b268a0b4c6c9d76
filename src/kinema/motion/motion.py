"""Motion: a skeleton animated over frames, in local joint space."""
from __future__ import annotations

import copy as _copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kinema.errors import SkeletonError
from kinema.maths import quat
from kinema.motion import kinematics
from kinema.motion.skeleton import Skeleton


@dataclass(eq=False)
class Motion:
    """Local joint rotations and translations of a skeleton over F frames.

    Attributes:
        skeleton: the joint hierarchy (J joints).
        fps: frames per second.
        rotations: (F, J, 4) float32 local rotations (w, x, y, z).
        positions: (F, J, 3) float32 local translations, metres (the rest offset for
            joints that are not translated by the animation).
        name: clip name (usually the file stem).
        metadata: free-form JSON-serialisable information (source file, format, ...).
    """

    skeleton: Skeleton
    fps: float
    rotations: np.ndarray
    positions: np.ndarray
    name: str = ""
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fps = float(self.fps)
        self.rotations = np.ascontiguousarray(self.rotations, dtype=np.float32)
        self.positions = np.ascontiguousarray(self.positions, dtype=np.float32)
        j = self.skeleton.num_joints
        if self.rotations.ndim != 3 or self.rotations.shape[1:] != (j, 4):
            raise SkeletonError(f"rotations must be (F, {j}, 4), got {self.rotations.shape}")
        if self.positions.shape != self.rotations.shape[:2] + (3,):
            raise SkeletonError(f"positions must be {self.rotations.shape[:2] + (3,)}, got {self.positions.shape}")
        if not self.fps > 0:
            raise SkeletonError(f"fps must be positive, got {self.fps}")

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_global(cls, skeleton: Skeleton, fps: float, global_rotations: np.ndarray,
                    global_positions: np.ndarray, **kwargs) -> Motion:
        """Build a motion from world-space rotations (F, J, 4) and positions (F, J, 3)."""
        rot, pos = kinematics.inverse(np.asarray(global_rotations, np.float64),
                                      np.asarray(global_positions, np.float64), skeleton.parents)
        return cls(skeleton, fps, rot, pos, **kwargs)

    @classmethod
    def rest(cls, skeleton: Skeleton, fps: float = 30.0, frames: int = 1, **kwargs) -> Motion:
        """The rest pose (identity rotations, rest offsets) held for ``frames`` frames."""
        rot = np.broadcast_to(quat.identity((skeleton.num_joints,)), (frames, skeleton.num_joints, 4))
        pos = np.broadcast_to(skeleton.offsets, (frames, skeleton.num_joints, 3))
        return cls(skeleton, fps, rot, pos, **kwargs)

    # -- basic properties ---------------------------------------------------------------
    @property
    def joint_names(self) -> list[str]:
        return self.skeleton.names

    @property
    def parents(self) -> np.ndarray:
        return self.skeleton.parents

    @property
    def num_frames(self) -> int:
        return int(self.rotations.shape[0])

    @property
    def num_joints(self) -> int:
        return self.skeleton.num_joints

    @property
    def duration(self) -> float:
        """Length in seconds: ``num_frames / fps`` (each frame lasts 1/fps)."""
        return self.num_frames / self.fps

    def __len__(self) -> int:
        return self.num_frames

    def __repr__(self) -> str:
        return (f"Motion({self.name!r}, frames={self.num_frames}, joints={self.num_joints}, "
                f"fps={self.fps:g})")

    # -- kinematics ---------------------------------------------------------------------
    def global_transforms(self) -> tuple[np.ndarray, np.ndarray]:
        """World rotations (F, J, 4) and positions (F, J, 3), float32."""
        rot, pos = kinematics.forward(self.rotations, self.positions, self.skeleton.parents)
        return rot, pos

    def global_positions(self) -> np.ndarray:
        """World joint positions (F, J, 3), metres."""
        return self.global_transforms()[1]

    def global_rotations(self) -> np.ndarray:
        """World joint rotations (F, J, 4), (w, x, y, z)."""
        return self.global_transforms()[0]

    def velocities(self) -> np.ndarray:
        """World joint linear velocities (F, J, 3) in m/s (central differences)."""
        pos = self.global_positions().astype(np.float64)
        if self.num_frames < 2:
            return np.zeros_like(pos, dtype=np.float32)
        return (np.gradient(pos, axis=0) * self.fps).astype(np.float32)

    def angular_velocities(self) -> np.ndarray:
        """World joint angular velocities (F, J, 3) in rad/s (axis * rate).

        Central differences of world rotations: ``log(q[t+1] q[t-1]^-1) * fps / 2``,
        one-sided at the ends.
        """
        q = quat.unroll(self.global_rotations().astype(np.float64), axis=0)
        if self.num_frames < 2:
            return np.zeros(q.shape[:-1] + (3,), np.float32)
        ahead = np.concatenate([q[1:], q[-1:]])
        behind = np.concatenate([q[:1], q[:-1]])
        steps = np.full(self.num_frames, 2.0)
        steps[0] = steps[-1] = 1.0
        w = quat.log(quat.abs(quat.mul(ahead, quat.inv(behind)))) * (self.fps / steps)[:, None, None]
        return w.astype(np.float32)

    def bone_lengths(self) -> np.ndarray:
        """(F, J) distance of each joint from its parent per frame (0 for roots), metres."""
        pos = self.global_positions()
        par = self.skeleton.parents
        lengths = np.linalg.norm(pos - pos[:, np.where(par < 0, np.arange(len(par)), par)], axis=-1)
        return lengths

    # -- editing ------------------------------------------------------------------------
    def copy(self) -> Motion:
        return Motion(self.skeleton.copy(), self.fps, self.rotations.copy(), self.positions.copy(),
                      self.name, _copy.deepcopy(self.metadata))

    def __getitem__(self, frames) -> Motion:
        """Frames ``frames`` (an int, slice, or index array) as a new Motion."""
        if isinstance(frames, (int, np.integer)):
            frames = slice(int(frames), int(frames) + 1 if frames != -1 else None)
        return Motion(self.skeleton, self.fps, self.rotations[frames], self.positions[frames],
                      self.name, dict(self.metadata))

    def resample(self, fps: float) -> Motion:
        """The same motion sampled at ``fps`` over the same time span.

        New frame k lies at time k / fps; rotations are slerped and positions linearly
        interpolated between the two source frames around it. Frames falling on source
        frames reproduce them exactly, so 30 -> 60 -> 30 is the identity.
        """
        fps = float(fps)
        if fps == self.fps:
            return self.copy()
        n = int(np.floor((self.num_frames - 1) * fps / self.fps + 1e-6)) + 1
        t = np.arange(n) * (self.fps / fps)             # in source frames
        i0 = np.clip(np.floor(t + 1e-6).astype(np.int64), 0, self.num_frames - 1)
        i1 = np.minimum(i0 + 1, self.num_frames - 1)
        a = np.clip(t - i0, 0.0, 1.0)
        a[np.abs(a) < 1e-6] = 0.0
        rot = quat.unroll(self.rotations.astype(np.float64), axis=0)
        rot = quat.slerp(rot[i0], rot[i1], a[:, None])
        pos = self.positions.astype(np.float64)
        pos = pos[i0] * (1 - a)[:, None, None] + pos[i1] * a[:, None, None]
        return Motion(self.skeleton, fps, quat.normalize(rot), pos, self.name, dict(self.metadata))

    def at_fps(self, fps: float, tolerance: float = 1e-3) -> Motion:
        """This motion itself (no copy) if its rate is within ``tolerance`` frames per
        second of ``fps``, else :meth:`resample` ``(fps)``: the one "resample if needed"
        (``tolerance=0`` resamples any other rate, however close)."""
        return self if abs(float(self.fps) - float(fps)) <= tolerance else self.resample(fps)

    def reorder(self, names: Sequence[str]) -> Motion:
        """The same motion with its joints listed in the order ``names`` (a permutation of
        :attr:`joint_names` in which every parent still precedes its children): files of
        one skeleton sometimes list the joints in different orders."""
        names = [str(n) for n in names]
        if sorted(names) != sorted(self.joint_names):
            raise SkeletonError(f"{self.name!r}: reorder needs a permutation of its joint names")
        perm = np.array([self.skeleton.index(n) for n in names], np.int64)
        where = {n: i for i, n in enumerate(names)}
        parents = [where[self.joint_names[p]] if p >= 0 else -1 for p in self.parents[perm]]
        skeleton = Skeleton(names, np.asarray(parents, np.int64), self.skeleton.offsets[perm])
        return Motion(skeleton, self.fps, self.rotations[:, perm], self.positions[:, perm], self.name,
                      dict(self.metadata))

    def mirror(self, axis: int = 0, mapping: np.ndarray | None = None) -> Motion:
        """The mirror image across the plane normal to ``axis`` (default x: the YZ plane).

        Left and right joints swap (``skeleton.mirror_map()`` unless ``mapping`` is given),
        positions have coordinate ``axis`` negated and rotations become ``M R M``
        (quaternion: the two vector components other than ``axis`` change sign). Mirroring
        twice gives the original motion.
        """
        m = self.skeleton.mirror_map() if mapping is None else np.asarray(mapping)
        sign_p = np.ones(3, np.float32)
        sign_p[axis] = -1
        sign_q = -np.ones(4, np.float32)
        sign_q[0] = 1
        sign_q[axis + 1] = 1
        skeleton = Skeleton(self.skeleton.names, self.skeleton.parents, self.skeleton.offsets[m] * sign_p)
        meta = dict(self.metadata)
        meta["mirrored"] = not meta.get("mirrored", False)
        return Motion(skeleton, self.fps, self.rotations[:, m] * sign_q, self.positions[:, m] * sign_p,
                      self.name, meta)


def concatenate(motions: Sequence[Motion]) -> Motion:
    """Join motions of the same skeleton topology and fps end to end (first one's name)."""
    if not motions:
        raise ValueError("concatenate needs at least one motion")
    first = motions[0]
    for m in motions[1:]:
        if not first.skeleton.same_topology(m.skeleton):
            raise SkeletonError(f"cannot concatenate {m.name!r}: its skeleton differs from {first.name!r}")
        if m.fps != first.fps:
            raise SkeletonError(f"cannot concatenate {m.name!r} at {m.fps} fps with {first.fps} fps; resample first")
    return Motion(first.skeleton, first.fps, np.concatenate([m.rotations for m in motions]),
                  np.concatenate([m.positions for m in motions]), first.name, dict(first.metadata))
