"""Motions prepared for the browser: world poses per frame (plain and mirrored), the
character's skinning data in the form a browser skins on its GPU, and a root trajectory.

NumPy only (no raylib, no viser): the viewer in :mod:`kinema.serve.viewer` sends these.
Conventions: metres, Y up, quaternions (w, x, y, z).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import kinema.io
from kinema.maths import quat
from kinema.retargeting.binding import character_pose


def bind_world(character) -> tuple[np.ndarray, np.ndarray]:
    """World bind pose of every character joint, from its inverse bind matrices.

    Returns:
        (rotations (J, 4) w,x,y,z, positions (J, 3) metres) such that skinning a mesh with
        these joint transforms leaves its bind-pose vertices where they are.
    """
    bind = np.linalg.inv(np.asarray(character.inverse_bind, np.float64))      # (J, 4, 4) joint -> world
    rot = quat.from_matrix(_orthonormal(bind[:, :3, :3]))
    return quat.normalize(rot), bind[:, :3, 3]


def _orthonormal(m: np.ndarray) -> np.ndarray:
    """Nearest rotation to each (…, 3, 3) matrix (drops scale/shear of a bind matrix)."""
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    flip = np.linalg.det(r) < 0
    u[flip, :, -1] *= -1
    return u @ vt


def dense_weights(joints: np.ndarray, weights: np.ndarray, num_joints: int) -> np.ndarray:
    """(V, K) joint indices and weights -> (V, num_joints) float32 weight matrix."""
    joints = np.asarray(joints, np.int64)
    v = joints.shape[0]
    out = np.zeros((v, num_joints), np.float32)
    np.add.at(out, (np.repeat(np.arange(v), joints.shape[1]), joints.ravel()),
              np.asarray(weights, np.float32).ravel())
    return out


@dataclass
class ServedClip:
    """A motion (optionally skinning a character) ready to stream to a browser.

    Attributes:
        name: label in the clip chooser.
        motion: the :class:`~kinema.motion.Motion`.
        character: skinned :class:`~kinema.io.character.Character` or None (a stick figure).
        color: RGB 0-255 of the character (or the stick figure).
        extras: optional named overlays, each ``(points (F, N, 2, 3), rgb)``: line
            segments per frame drawn with the clip (tracked points, predicted trajectories...).
        match: how the character follows the motion: ``"local"`` (local transforms by joint
            name, :func:`character_pose`) or ``"world"`` (world transforms by joint name through
            a :class:`kinema.retargeting.WorldBinding`: ``character`` becomes the binding's,
            its mirror image where that is the one that fits the motion's skeleton).
    """

    name: str
    motion: object
    character: object | None = None
    color: tuple[int, int, int] = (230, 150, 70)
    extras: dict = field(default_factory=dict)
    match: str = "local"
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._binding = None
        if self.character is not None and self.match == "world":
            from kinema.retargeting import WorldBinding
            self._binding = WorldBinding(self.character, self.motion.skeleton)
            self.character = self._binding.character

    @classmethod
    def load(cls, path: str | Path, character: str | Path | None = None, **kwargs) -> ServedClip:
        """Load a motion file; a GLB/FBX holding a mesh skins itself, else ``character`` (any file
        :func:`kinema.io.load_character` reads, ``character.bin`` too) is skinned when given."""
        path = Path(path)
        motion = kinema.io.load(path)
        ch = kinema.io.load_character(character) if character is not None else None
        if ch is None:
            ch = kinema.io.mesh_character(path)
        if ch is not None:
            from kinema.retargeting import fit
            motion = fit(motion, ch)
        return cls(kwargs.pop("name", path.stem), motion, ch, **kwargs)

    @property
    def num_frames(self) -> int:
        return int(self.motion.num_frames)

    @property
    def fps(self) -> float:
        return float(self.motion.fps)

    def poses(self, mirror: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World (rotations (F, J, 4), positions (F, J, 3), parents (J,)) of the character's
        joints (or the motion's when there is no character), mirrored across x = 0 on request."""
        key = ("pose", bool(mirror))
        if key not in self._cache:
            m = self.motion.mirror() if mirror else self.motion
            if self.character is not None and self.match == "world":
                g_rot, g_pos = m.global_transforms()
                rot, pos = self._binding.pose(g_rot, g_pos)
                parents = np.asarray(self.character.skeleton.parents)
            elif self.character is not None:
                rot, pos = character_pose(self.character, m)
                parents = np.asarray(self.character.skeleton.parents)
            else:
                rot, pos = m.global_rotations(), m.global_positions()
                parents = np.asarray(m.parents)
            self._cache[key] = (np.asarray(rot, np.float32), np.asarray(pos, np.float32), parents)
        return self._cache[key]

    def bones(self, frame: int, mirror: bool = False) -> np.ndarray:
        """(B, 2, 3) parent-child segments of the skeleton at ``frame``."""
        _, pos, parents = self.poses(mirror)
        f = int(np.clip(frame, 0, self.num_frames - 1))
        child = np.nonzero(parents >= 0)[0]
        return np.stack([pos[f, parents[child]], pos[f, child]], axis=1)

    def root_path(self, mirror: bool = False) -> np.ndarray:
        """(F, 3) the motion's root joint projected to the floor (y = 0)."""
        key = ("path", bool(mirror))
        if key not in self._cache:
            m = self.motion.mirror() if mirror else self.motion
            p = m.global_positions()[:, 0].astype(np.float32).copy()
            p[:, 1] = 0.0
            self._cache[key] = p
        return self._cache[key]

    def trajectory(self, frame: int, mirror: bool = False, seconds: float = 1.0) -> np.ndarray:
        """(S, 2, 3) floor segments of the root path from ``seconds`` before to after ``frame``."""
        path = self.root_path(mirror)
        k = max(1, int(round(seconds * self.fps)))
        f = int(np.clip(frame, 0, self.num_frames - 1))
        idx = np.arange(max(0, f - k), min(self.num_frames, f + k + 1), max(1, k // 10))
        if idx.size < 2:
            return np.zeros((0, 2, 3), np.float32)
        pts = path[idx] + np.float32([0, 0.01, 0])
        return np.stack([pts[:-1], pts[1:]], axis=1)


class LiveClip:
    """A clip computed while it plays (a controller steered from the browser's GUI).

    Subclasses implement :meth:`advance` (one frame at ``fps``) and may add GUI controls in
    :meth:`add_gui`. The viewer treats it as a one-frame clip that changes every tick; the
    root's recent path is its trajectory. Mirroring does not apply to live clips.

    Args:
        name: label in the clip chooser. parents: (J,) parents of the joints :meth:`advance`
            returns (the character's when there is one). character: skinned character or None.
        fps: frames per second of :meth:`advance`. trail: root positions kept for the path.
    """

    live = True
    num_frames = 1
    match = "local"

    def __init__(self, name: str, parents, character=None, color=(230, 150, 70), fps: float = 30.0,
                 trail: int = 90) -> None:
        self.name, self.parents, self.character = name, np.asarray(parents), character
        self.color, self.fps, self.trail = color, float(fps), int(trail)
        self.extras: dict = {}
        self._path: list[np.ndarray] = []
        self._rot = self._pos = None

    def advance(self) -> tuple[np.ndarray, np.ndarray]:
        """The next frame's world (rotations (J, 4), positions (J, 3))."""
        raise NotImplementedError

    def add_gui(self, gui) -> None:
        """Add this clip's controls to a viser GUI (called once, when first shown)."""

    def step(self) -> None:
        """Advance one frame and remember the root's path."""
        rot, pos = self.advance()
        self._rot, self._pos = np.asarray(rot, np.float32), np.asarray(pos, np.float32)
        p = self._pos[0].copy()
        p[1] = 0.0
        self._path = (self._path + [p])[-self.trail:]

    def poses(self, mirror: bool = False):
        if self._rot is None:
            self.step()
        return self._rot[None], self._pos[None], self.parents

    def bones(self, frame: int = 0, mirror: bool = False) -> np.ndarray:
        _, pos, parents = self.poses()
        child = np.nonzero(parents >= 0)[0]
        return np.stack([pos[0, parents[child]], pos[0, child]], axis=1)

    def trajectory(self, frame: int = 0, mirror: bool = False, seconds: float = 1.0) -> np.ndarray:
        if len(self._path) < 2:
            return np.zeros((0, 2, 3), np.float32)
        pts = np.array(self._path[::3] + [self._path[-1]], np.float32) + np.float32([0, 0.01, 0])
        return np.stack([pts[:-1], pts[1:]], axis=1)
