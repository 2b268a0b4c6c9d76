"""Unit quaternions, ordered (w, x, y, z), Hamilton product, on NumPy or torch.

Every function is batched over leading dims: quaternions are ``(..., 4)``, vectors
``(..., 3)``. A rotation of a child in world space is ``mul(q_parent, q_local)``.
"""
from __future__ import annotations

from kinema.maths.backend import Array, asarray, cross, norm, stack, xp

_AXES = {"x": 0, "y": 1, "z": 2}


def normalize(q: Array, eps: float = 1e-12) -> Array:
    """Scale ``q`` (..., 4) to unit length."""
    return q / xp(q).maximum(norm(q, keepdims=True), asarray(eps, like=q)) if xp(q).__name__ == "numpy" \
        else q / norm(q, keepdims=True).clamp_min(eps)


def identity(shape: tuple[int, ...] = (), like: Array | None = None) -> Array:
    """Identity quaternions of shape ``shape + (4,)`` (NumPy float32, or like ``like``)."""
    import numpy as np
    q = np.zeros(tuple(shape) + (4,), np.float32 if like is None else None)
    q[..., 0] = 1
    return q if like is None else asarray(q, like=like)


def mul(a: Array, b: Array) -> Array:
    """Hamilton product ``a * b`` (apply b, then a), broadcasting leading dims."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def inv(q: Array) -> Array:
    """Inverse of a unit quaternion (its conjugate)."""
    return q * asarray([1.0, -1.0, -1.0, -1.0], like=q)


def rotate(q: Array, v: Array) -> Array:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4)."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * cross(u, v)
    return v + w * t + cross(u, t)


def inv_rotate(q: Array, v: Array) -> Array:
    """Rotate vectors by the inverse of ``q``."""
    return rotate(inv(q), v)


def from_axis_angle(axis: Array, angle: Array) -> Array:
    """Quaternion rotating by ``angle`` (..., radians) about unit ``axis`` (..., 3)."""
    m = xp(axis)
    half = asarray(angle, like=axis)[..., None] * 0.5
    return xp(axis).concatenate([m.cos(half), m.sin(half) * axis], -1) if m.__name__ == "numpy" \
        else m.cat([m.cos(half), m.sin(half) * axis], -1)


def _basis_rotation(angle: Array, axis: int) -> Array:
    m = xp(angle)
    half = angle * 0.5
    c, s = m.cos(half), m.sin(half)
    z = s * 0
    parts = [c, z, z, z]
    parts[axis + 1] = s
    return stack(parts, axis=-1)


def from_euler(angles: Array, order: str = "zyx") -> Array:
    """Quaternion from intrinsic Euler angles (..., 3) in radians.

    ``angles[..., i]`` rotates about axis ``order[i]`` and the rotation is
    ``R_order[0] @ R_order[1] @ R_order[2]`` (intrinsic; scipy's ``from_euler(order.upper())``).
    BVH's ``Zrotation Yrotation Xrotation`` is order "zyx".
    """
    order = order.lower()
    if len(order) != 3 or any(a not in _AXES for a in order):
        raise ValueError(f"Euler order must be 3 letters of x, y, z, got {order!r}")
    q = _basis_rotation(angles[..., 0], _AXES[order[0]])
    q = mul(q, _basis_rotation(angles[..., 1], _AXES[order[1]]))
    return mul(q, _basis_rotation(angles[..., 2], _AXES[order[2]]))


def to_matrix(q: Array) -> Array:
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    rows = [
        stack([1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy)], axis=-1),
        stack([2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx)], axis=-1),
        stack([2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy)], axis=-1),
    ]
    return stack(rows, axis=-2)
