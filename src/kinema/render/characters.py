"""Skinned characters on the GPU: mesh upload and per-frame bone matrices.

The vertex shader blends 4 bone matrices per vertex (linear-blend skinning); the CPU only
computes one ``(J, 4, 4)`` skinning matrix array per character per frame:
``skin[j] = world[j] @ inverse_bind[j]``.
"""
from __future__ import annotations

import numpy as np

from kinema.errors import KinemaError
from kinema.io.character import Character
from kinema.maths import quat
from kinema.motion import kinematics
from kinema.render import gl

MAX_BONES = 256


def world_matrices(global_rotations, global_positions) -> np.ndarray:
    """(..., J, 4, 4) rigid matrices from world rotations (..., J, 4) w,x,y,z and positions (..., J, 3)."""
    r = np.asarray(global_rotations, np.float64)
    p = np.asarray(global_positions, np.float64)
    m = np.zeros(r.shape[:-1] + (4, 4))
    m[..., :3, :3] = quat.to_matrix(r)
    m[..., :3, 3] = p
    m[..., 3, 3] = 1.0
    return m


def skinning_matrices(character: Character, global_rotations, global_positions) -> np.ndarray:
    """(J, 4, 4) float32 bone matrices ``world @ inverse_bind`` for one pose of ``character``.

    Args:
        global_rotations: (J, 4) world joint rotations (w, x, y, z).
        global_positions: (J, 3) world joint positions, metres.
    """
    w = world_matrices(global_rotations, global_positions)
    if w.shape[-3] != character.inverse_bind.shape[0]:
        raise KinemaError(f"character {character.name!r} has {character.inverse_bind.shape[0]} joints, "
                          f"pose has {w.shape[-3]}")
    return (w @ character.inverse_bind.astype(np.float64)).astype(np.float32)


def top4_influences(joints: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 4 largest influences per vertex, renormalised: ((V, 4) float32 indices, (V, 4) weights)."""
    j = np.asarray(joints)
    w = np.asarray(weights, np.float64)
    if w.shape[1] < 4:
        pad = 4 - w.shape[1]
        j = np.concatenate([j, np.zeros((j.shape[0], pad), j.dtype)], 1)
        w = np.concatenate([w, np.zeros((w.shape[0], pad))], 1)
    order = np.argsort(-w, axis=1)[:, :4]
    j4 = np.take_along_axis(j, order, 1)
    w4 = np.take_along_axis(w, order, 1)
    s = w4.sum(1, keepdims=True)
    w4 = np.where(s > 1e-9, w4 / np.where(s > 1e-9, s, 1.0), np.array([1.0, 0, 0, 0]))
    return j4.astype(np.float32), w4.astype(np.float32)


SHADOW_LOD_CELL = 0.02  # metres: vertex clustering cell of the shadow-casting mesh


def cluster_triangles(positions: np.ndarray, indices: np.ndarray, cell: float) -> np.ndarray:
    """Vertex-clustering simplification: (T', 3) triangles over the original vertices.

    Vertices in the same ``cell``-sized grid cell collapse onto one representative (the
    first), triangles that become degenerate or repeated are dropped. Used for casting
    shadows, where the silhouette matters at shadow-texel size.
    """
    key = np.floor(np.asarray(positions, np.float64) / cell).astype(np.int64)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    rep = first[inverse.ravel()]
    t = rep[np.asarray(indices)]
    keep = (t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 0] != t[:, 2])
    t = t[keep]
    _, uniq = np.unique(np.sort(t, axis=1), axis=0, return_index=True)
    return t[np.sort(uniq)]


def orient_triangles(positions: np.ndarray, normals: np.ndarray, indices: np.ndarray,
                     agreement: float = 0.95) -> tuple[np.ndarray, bool]:
    """Make triangles counter-clockwise seen from the side their vertex normals point to.

    Returns (indices (T, 3), cullable): when at least ``agreement`` of the triangles agree
    with their normals (after flipping the whole mesh if most were clockwise), back faces
    can be culled; otherwise the mesh is drawn double-sided.
    """
    p = positions[indices]                                       # (T, 3, 3)
    face = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    avg = normals[indices].sum(axis=1)
    ok = np.einsum("ij,ij->i", face, avg)
    valid = np.abs(ok) > 0
    if not valid.any():
        return indices, False
    ccw = (ok[valid] > 0).mean()
    if ccw < 0.5:
        indices, ccw = indices[:, ::-1].copy(), 1.0 - ccw
    return indices, bool(ccw >= agreement)


class GpuMesh:
    """One mesh of a character uploaded to the GPU (VAO, optional texture)."""

    def __init__(self, mesh) -> None:
        j4, w4 = top4_influences(mesh.joints, mesh.weights)
        pos = np.asarray(mesh.positions, np.float32)
        nrm = np.asarray(mesh.normals, np.float32)
        uv = np.zeros((pos.shape[0], 2), np.float32) if mesh.uvs is None else np.asarray(mesh.uvs, np.float32)
        idx = np.asarray(mesh.indices).reshape(-1, 3)
        idx, self.cull = orient_triangles(pos, nrm, idx)
        attrs = {gl.ATTR_POSITION: pos, gl.ATTR_NORMAL: nrm, gl.ATTR_TEXCOORD: uv,
                 gl.ATTR_BONE_INDICES: j4, gl.ATTR_BONE_WEIGHTS: w4}
        if pos.shape[0] <= 65535:
            self.vao = gl.VertexArray(attrs, indices=idx.astype(np.uint16))
            lod = cluster_triangles(pos, idx, SHADOW_LOD_CELL)
            # shadows from a simplified triangle list over the same vertices (same silhouette
            # at shadow-map resolution, a fraction of the triangles to rasterise)
            self.shadow_vao = self.vao.with_indices(lod) if len(lod) < 0.8 * len(idx) else self.vao
        else:  # rlgl draws 16-bit indices: expand large meshes to a triangle soup
            flat = idx.ravel()
            self.vao = gl.VertexArray({k: v[flat] for k, v in attrs.items()})
            self.shadow_vao = self.vao
        self.base_color = np.asarray(mesh.base_color, np.float32).reshape(4)
        self.texture = 0 if mesh.texture is None else gl.load_texture_rgba(mesh.texture)
        self.num_triangles = idx.shape[0]

    def unload(self) -> None:
        if self.shadow_vao is not self.vao:
            self.shadow_vao.unload()
        self.vao.unload()
        if self.texture:
            import pyray as rl
            rl.rl_unload_texture(self.texture)
            self.texture = 0


class CharacterModel:
    """A :class:`~kinema.io.character.Character` ready to draw many times per frame.

    Create it through :meth:`kinema.render.Renderer.load_character` (needs an open renderer).
    """

    def __init__(self, character: Character) -> None:
        if not character.has_mesh:
            raise KinemaError(f"character {character.name!r} has no mesh to draw (use draw_body for skeletons)")
        nj = character.inverse_bind.shape[0]
        if nj > MAX_BONES:
            raise KinemaError(f"character {character.name!r} has {nj} joints; the skinning shader takes {MAX_BONES}")
        self.character = character
        self.meshes = [GpuMesh(m) for m in character.meshes]
        allv = np.concatenate([np.asarray(m.positions, np.float64) for m in character.meshes])
        lo, hi = allv.min(axis=0), allv.max(axis=0)
        self.bind_centre = (lo + hi) / 2            # bind-space bounding sphere
        self.radius = float(np.linalg.norm(hi - lo) / 2)

    def world_centre(self, bones: np.ndarray) -> np.ndarray:
        """Approximate posed centre: the bind centre carried by every bone, averaged."""
        c = np.append(self.bind_centre, 1.0)
        return (np.asarray(bones, np.float64) @ c)[:, :3].mean(axis=0)

    @property
    def num_joints(self) -> int:
        return int(self.character.inverse_bind.shape[0])

    def bind_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World (rotations (J, 4), positions (J, 3)) of the bind pose (from the inverse bind matrices)."""
        m = np.linalg.inv(self.character.inverse_bind.astype(np.float64))
        return quat.from_matrix(m[:, :3, :3]), m[:, :3, 3]

    def unload(self) -> None:
        for m in self.meshes:
            m.unload()
        self.meshes = []


def pose_from_motion(character: Character, motion, frames) -> tuple[np.ndarray, np.ndarray]:
    """World pose of ``character`` driven by ``motion`` at ``frames``, matching joints by name.

    Joints the motion has take its local rotation and translation; the others keep the
    character's bind local transform. Root translation comes from the motion.

    Args:
        frames: a frame index or an array of them.

    Returns:
        (global rotations (..., J, 4), global positions (..., J, 3)) for the character's joints.
    """

    names = character.skeleton.names
    index = {n: i for i, n in enumerate(motion.skeleton.names)}
    src = np.array([index.get(n, -1) for n in names])
    if not (src >= 0).any():
        raise KinemaError(f"motion {motion.name!r} shares no joint names with character {character.name!r}")
    f = np.asarray(frames)
    rot = np.broadcast_to(character.bind_rotations.astype(np.float64), f.shape + (len(names), 4)).copy()
    pos = np.broadcast_to(character.bind_positions.astype(np.float64), f.shape + (len(names), 3)).copy()
    have = src >= 0
    rot[..., have, :] = motion.rotations[f][..., src[have], :]
    pos[..., have, :] = motion.positions[f][..., src[have], :]
    return kinematics.forward(rot, pos, character.skeleton.parents)


_MIRROR_X = np.diag([-1.0, 1.0, 1.0, 1.0])


def mirrored_skinning(character, skinning: np.ndarray) -> np.ndarray:
    """Skinning matrices (J, 4, 4) that draw the mirror image (across x = 0) of
    ``character`` skinned with ``skinning`` (J, 4, 4): joint j takes its twin's matrix
    conjugated by the reflection, ``M S[twin(j)] M``.

    Skinning ``Motion.mirror()`` directly would be wrong: its rotations ``M R M`` are only
    meaningful for joint frames that are mirror images of each other, which bind poses
    rarely are. Conjugating keeps every matrix a proper rigid transform (no flipped
    triangles) and is exact for a left/right symmetric mesh and bind pose."""
    twin = character.skeleton.mirror_map()
    return (_MIRROR_X @ np.asarray(skinning, np.float64)[twin] @ _MIRROR_X).astype(np.float32)
