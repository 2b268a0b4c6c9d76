"""The continuous 6D rotation representation of Zhou et al. (CVPR 2019).

A rotation matrix ``R`` (..., 3, 3) is encoded by its first two **columns**, flattened as
``[c0, c1]``: ``d[..., 0:3] = R[..., :, 0]`` and ``d[..., 3:6] = R[..., :, 1]``. Decoding
runs Gram-Schmidt on the two columns and completes the frame with their cross product, so
any ``d`` whose halves are not parallel decodes to a proper rotation (det = +1). The
decoder ignores the scale of ``c0`` and the part of ``c1`` along ``c0``:
``to_matrix([l * a, b + m * a]) == to_matrix([a, b])`` for ``l > 0``.

Works on NumPy arrays and torch tensors (same kind out, differentiable on torch).
"""
from __future__ import annotations

from kinema.maths.backend import Array, asarray, cat, cross, dot, is_torch, norm, stack

__all__ = ["from_matrix", "to_matrix"]


def from_matrix(m: Array) -> Array:
    """6D vectors (..., 6) ``[R[:, 0], R[:, 1]]`` of rotation matrices (..., 3, 3)."""
    m = asarray(m)
    return cat([m[..., :, 0], m[..., :, 1]], axis=-1)


def _unit(x: Array) -> Array:
    n = norm(x, keepdims=True)
    return x / (n.clamp_min(1e-30) if is_torch(n) else n.clip(1e-30, None))


def to_matrix(d: Array) -> Array:
    """Rotation matrices (..., 3, 3) from 6D vectors (..., 6) by Gram-Schmidt.

    Column 0 is ``d[..., :3]`` normalised, column 1 is ``d[..., 3:]`` minus its component
    along column 0, normalised, and column 2 is their cross product.
    """
    d = asarray(d)
    a1, a2 = d[..., :3], d[..., 3:]
    b1 = _unit(a1)
    b2 = _unit(a2 - dot(b1, a2, keepdims=True) * b1)
    b3 = cross(b1, b2)
    return stack([b1, b2, b3], axis=-1)
