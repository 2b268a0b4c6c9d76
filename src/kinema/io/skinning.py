"""Linear-blend skinning and per-vertex influence packing, shared by the importers.

Conventions: a skinned vertex is ``v' = sum_k w_k * (M[j_k] @ IB[j_k]) @ [v, 1]`` where
``M`` are joint world matrices (4x4, column vectors) and ``IB`` inverse bind matrices.
"""
from __future__ import annotations

import numpy as np

from kinema.io.scene_graph import rigid_matrices


def pack_influences(joints: np.ndarray, weights: np.ndarray, min_slots: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Sort each vertex's influences by weight, drop empty slots, renormalise.

    Args:
        joints: (V, K) joint indices.
        weights: (V, K) weights (any non-negative scale).
        min_slots: the returned arrays have at least this many columns.
    Returns:
        (joints (V, K') int32, weights (V, K') float32) with rows summing to 1 (rows
        without any weight get joint 0 with weight 1), K' = max(min_slots, most
        non-zero influences of any vertex).
    """
    joints = np.asarray(joints, np.int64)
    weights = np.clip(np.asarray(weights, np.float64), 0.0, None)
    v = joints.shape[0]
    if v == 0:
        return np.zeros((0, min_slots), np.int32), np.zeros((0, min_slots), np.float32)
    order = np.argsort(-weights, axis=1, kind="stable")
    joints = np.take_along_axis(joints, order, 1)
    weights = np.take_along_axis(weights, order, 1)
    used = max(min_slots, int((weights > 0).sum(1).max()))
    out_j = np.zeros((v, used), np.int64)
    out_w = np.zeros((v, used), np.float64)
    k = min(used, joints.shape[1])
    out_j[:, :k] = joints[:, :k]
    out_w[:, :k] = weights[:, :k]
    out_j[out_w <= 0] = 0
    total = out_w.sum(1)
    empty = total <= 0
    out_w[empty, 0] = 1.0
    total[empty] = 1.0
    out_w /= total[:, None]
    return out_j.astype(np.int32), out_w.astype(np.float32)


def skinning_matrices(global_rot: np.ndarray, global_pos: np.ndarray, inverse_bind: np.ndarray) -> np.ndarray:
    """(..., J, 4, 4) ``M @ IB`` from joint world rotations (..., J, 4), positions (..., J, 3)
    and inverse bind matrices (J, 4, 4)."""
    return rigid_matrices(global_rot, global_pos) @ np.asarray(inverse_bind, np.float64)


def linear_blend(positions: np.ndarray, joints: np.ndarray, weights: np.ndarray,
                 matrices: np.ndarray) -> np.ndarray:
    """Skin vertices with linear blending.

    Args:
        positions: (V, 3) rest vertices.
        joints: (V, K) joint index per influence.
        weights: (V, K) weight per influence (rows sum to 1).
        matrices: (J, 4, 4) skinning matrices (``world @ inverse_bind``).
    Returns:
        (V, 3) float64 skinned positions.
    """
    p = np.asarray(positions, np.float64)
    m = np.asarray(matrices, np.float64)
    w = np.asarray(weights, np.float64)
    blended = np.einsum("vk,vkab->vab", w, m[np.asarray(joints)])       # (V, 4, 4)
    return np.einsum("vab,vb->va", blended[:, :3, :3], p) + blended[:, :3, 3]


def transform_points(m: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Apply a 4x4 matrix (or (V,4,4) per point) to points (V, 3)."""
    m = np.asarray(m, np.float64)
    p = np.asarray(p, np.float64)
    if m.ndim == 2:
        return p @ m[:3, :3].T + m[:3, 3]
    return np.einsum("vab,vb->va", m[:, :3, :3], p) + m[:, :3, 3]


def transform_normals(m: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Transform normals (V, 3) by the inverse transpose of a 4x4 matrix (or (V,4,4)); unit length."""
    m = np.asarray(m, np.float64)
    lin = m[..., :3, :3]
    nt = np.swapaxes(np.linalg.inv(lin), -1, -2)
    out = n @ nt.T if nt.ndim == 2 else np.einsum("vab,vb->va", nt, n)
    return out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
