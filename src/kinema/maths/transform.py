"""Homogeneous 4x4 transforms ``[[R, t], [0, 0, 0, 1]]`` on NumPy arrays or torch tensors.

Matrices are ``(..., 4, 4)`` acting on column vectors: ``apply(m, p) = R @ p + t``.
``compose(a, b)`` applies ``b`` first, then ``a`` (like :func:`kinema.maths.quat.mul`).
Rotations in and out are unit quaternions (w, x, y, z). Leading dims broadcast.
"""
from __future__ import annotations

from kinema.maths import quat
from kinema.maths.backend import Array, asarray, cat, matmul_vec, promote, transpose, xp

__all__ = ["from_rotation_translation", "to_rotation_translation", "inverse", "compose", "apply"]


def from_rotation_translation(q: Array, t: Array) -> Array:
    """4x4 matrices (..., 4, 4) of rotations ``q`` (..., 4) followed by translations ``t`` (..., 3)."""
    q, t = promote(q, t)
    r = quat.to_matrix(q)
    lead = xp(r).broadcast_shapes(tuple(r.shape[:-2]), tuple(t.shape[:-1]))
    r = xp(r).broadcast_to(r, tuple(lead) + (3, 3))
    t = xp(t).broadcast_to(t, tuple(lead) + (3,))
    top = cat([r, t[..., None]], axis=-1)  # (..., 3, 4)
    bottom = asarray([0.0, 0.0, 0.0, 1.0], like=top) + 0.0 * top[..., :1, :]
    return cat([top, bottom], axis=-2)


def to_rotation_translation(m: Array) -> tuple[Array, Array]:
    """Quaternions (..., 4) with ``w >= 0`` and translations (..., 3) of rigid 4x4 matrices."""
    m = asarray(m)
    return quat.from_matrix(m[..., :3, :3]), m[..., :3, 3]


def inverse(m: Array, rigid: bool = True) -> Array:
    """Inverse of 4x4 transforms (..., 4, 4).

    ``rigid=True`` (default) assumes a rotation block and inverts exactly and cheaply as
    ``[[R^T, -R^T t], [0, 1]]``; ``rigid=False`` inverts any affine 3x3 block (scale, shear).
    """
    m = asarray(m)
    r, t = m[..., :3, :3], m[..., :3, 3]
    ri = transpose(r) if rigid else xp(m).linalg.inv(r)
    top = cat([ri, -matmul_vec(ri, t)[..., None]], axis=-1)
    return cat([top, m[..., 3:, :]], axis=-2)


def compose(a: Array, b: Array) -> Array:
    """The transform ``a @ b`` (..., 4, 4): apply ``b``, then ``a``."""
    a, b = promote(a, b)
    return a @ b


def apply(m: Array, points: Array) -> Array:
    """Transform points (..., 3) by 4x4 matrices (..., 4, 4): ``R @ p + t``."""
    m, points = promote(m, points)
    return matmul_vec(m[..., :3, :3], points) + m[..., :3, 3]
