"""A skinned character: skeleton with bind pose, skinned meshes, materials, animation names.

Shared by the importers (glTF, FBX, lafan1 ``character.bin``) and the renderer.
Conventions: metres, Y up, quaternions (w, x, y, z), float32 storage.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kinema.motion import Skeleton, kinematics


@dataclass
class Mesh:
    """One skinned triangle mesh.

    Attributes:
        name: mesh name from the file.
        positions: (V, 3) float32 bind-pose vertex positions, metres, character space.
        normals: (V, 3) float32 unit normals.
        indices: (T, 3) uint32 triangle vertex indices.
        joints: (V, K) int32 indices into the character's skeleton joints (K >= 4).
        weights: (V, K) float32 skinning weights, rows sum to 1 (0 for unused slots).
        uvs: (V, 2) float32 texture coordinates, or None.
        base_color: (4,) float32 RGBA in [0, 1].
        texture: (H, W, 4) uint8 RGBA base-colour texture, or None.
    """

    name: str
    positions: np.ndarray
    normals: np.ndarray
    indices: np.ndarray
    joints: np.ndarray
    weights: np.ndarray
    uvs: np.ndarray | None = None
    base_color: np.ndarray = field(default_factory=lambda: np.array([0.8, 0.8, 0.8, 1.0], np.float32))
    texture: np.ndarray | None = None

    @property
    def num_vertices(self) -> int:
        return int(self.positions.shape[0])


@dataclass
class Character:
    """A skeleton in its bind pose plus the meshes skinned to it.

    Attributes:
        name: character name (file stem by default).
        skeleton: the joints that meshes are skinned to (``skeleton.offsets`` = bind local offsets).
        bind_rotations: (J, 4) float32 local bind rotations (w, x, y, z).
        bind_positions: (J, 3) float32 local bind translations (metres).
        inverse_bind: (J, 4, 4) float32 inverse bind matrices (world -> joint, bind pose).
        meshes: the skinned meshes (may be empty for a skeleton-only file).
        animations: names of the animations the file holds, in file order.
        source: the file it came from.
    """

    name: str
    skeleton: Skeleton
    bind_rotations: np.ndarray
    bind_positions: np.ndarray
    inverse_bind: np.ndarray
    meshes: list[Mesh] = field(default_factory=list)
    animations: list[str] = field(default_factory=list)
    source: Path | None = None

    @property
    def has_mesh(self) -> bool:
        return len(self.meshes) > 0

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) corners (3,) of the box around the bind-pose vertices (metres); the
        joints' box for a skeleton-only character."""
        if self.meshes:
            v = np.concatenate([np.asarray(m.positions, np.float64) for m in self.meshes])
        else:
            _, v = kinematics.forward(self.bind_rotations, self.bind_positions, self.skeleton.parents)
        return v.min(axis=0), v.max(axis=0)
