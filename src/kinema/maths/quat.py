"""Unit quaternions on NumPy arrays or torch tensors.

Conventions (the whole of kinema uses them):

- Order **(w, x, y, z)**, scalar first. Unit quaternions; ``q`` and ``-q`` are the same
  rotation. Functions that pick one of the two say so (``abs``, ``from_matrix``: w >= 0).
- Hamilton product, active rotations of column vectors: ``mul(a, b)`` applies ``b`` first,
  then ``a``; ``rotate(q, v) == to_matrix(q) @ v``; a child's world rotation is
  ``mul(q_parent_world, q_local)``. Right-handed: a positive angle about +z turns +x to +y.
- Angles in radians. ``log(q)`` / ``exp(v)`` use the *scaled angle-axis* (rotation vector)
  ``v = angle * axis`` with the **full** rotation angle, not the half angle.
- Euler angles are intrinsic: order "xyz" means ``R = Rx(a0) @ Ry(a1) @ Rz(a2)`` (scipy's
  ``Rotation.from_euler("XYZ", ...)``).
- Shapes: quaternions ``(..., 4)``, vectors ``(..., 3)``, matrices ``(..., 3, 3)``; every
  function broadcasts over the leading dims. NumPy in -> NumPy out, torch in -> torch out
  (dtype and device kept, differentiable; no in-place ops, no NaN gradients at identity).
"""
from __future__ import annotations

import math

import numpy as np

from kinema.errors import EulerOrderError, KinemaError  # noqa: F401 - EulerOrderError re-exported
from kinema.maths import sixd
from kinema.maths.backend import (
    Array,
    asarray,
    cat,
    cross,
    dot,
    eps,
    is_torch,
    moveaxis,
    norm,
    promote,
    stack,
    take_along,
    tiny,
    xp,
)

__all__ = [
    "identity", "normalize", "mul", "inv", "rotate", "inv_rotate", "slerp", "nlerp",
    "log", "exp", "to_axis_angle", "from_axis_angle", "between", "to_matrix", "from_matrix",
    "from_euler", "to_euler", "to_6d", "from_6d", "unroll", "abs", "angle", "EULER_ORDERS",
    "EulerOrderError",
]

_AXES = {"x": 0, "y": 1, "z": 2}
EULER_ORDERS = ("xyz", "xzy", "yxz", "yzx", "zxy", "zyx")
_EVEN_ORDERS = ("xyz", "yzx", "zxy")  # cyclic permutations: right-handed relabelling


def _order(order: str) -> str:
    lowered = order.lower() if isinstance(order, str) else order
    if lowered not in EULER_ORDERS:
        raise EulerOrderError(f"Euler order must be one of {', '.join(EULER_ORDERS)}, got {order!r}")
    return lowered


def _sqrt_or_zero(sq: Array) -> Array:
    """``sqrt(sq)`` with a zero (not NaN) gradient where ``sq == 0``."""
    m = xp(sq)
    pos = sq > 0
    return m.where(pos, m.sqrt(m.where(pos, sq, 1.0)), 0.0)


def normalize(q: Array, eps: float = 1e-12) -> Array:
    """Scale ``q`` (..., 4) to unit length (lengths below ``eps`` are treated as ``eps``)."""
    q = asarray(q)
    n = norm(q, keepdims=True)
    return q / (n.clamp_min(eps) if is_torch(n) else np.maximum(n, eps))


def identity(shape: tuple[int, ...] = (), like: Array | None = None) -> Array:
    """Identity quaternions of shape ``shape + (4,)`` (NumPy float32, or like ``like``)."""
    q = np.zeros(tuple(shape) + (4,), np.float32 if like is None else np.float64)
    q[..., 0] = 1
    return q if like is None else asarray(q, like=like)


def mul(a: Array, b: Array) -> Array:
    """Hamilton product ``a * b`` (apply b, then a), broadcasting leading dims."""
    a, b = promote(a, b)
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
    q = asarray(q)
    return q * asarray([1.0, -1.0, -1.0, -1.0], like=q)


def rotate(q: Array, v: Array) -> Array:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4)."""
    q, v = promote(q, v)
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * cross(u, v)
    return v + w * t + cross(u, t)


def inv_rotate(q: Array, v: Array) -> Array:
    """Rotate vectors ``v`` (..., 3) by the inverse of ``q`` (..., 4)."""
    return rotate(inv(q), v)


def abs(q: Array) -> Array:  # noqa: A001 - the quaternion "absolute value", as in the contract
    """The representative of each rotation with ``w >= 0`` (``q`` or ``-q``)."""
    q = asarray(q)
    return xp(q).where(q[..., :1] < 0, -q, q)


def log(q: Array) -> Array:
    """Rotation vectors (..., 3) of quaternions (..., 4): ``angle * axis``, full angle.

    ``q = (cos(angle / 2), sin(angle / 2) * axis)`` gives ``log(q) = angle * axis`` with
    ``angle = 2 * atan2(|xyz|, w)`` in ``[0, 2 pi]``, so ``exp(log(q)) == q`` exactly,
    sign included: for ``w < 0`` the angle exceeds pi. Use ``log(abs(q))`` for the
    shortest rotation vector (angle in ``[0, pi]``, as scipy's ``as_rotvec``). Near
    identity a series keeps values and gradients exact (the gradient at identity is 2).
    """
    q = asarray(q)
    m = xp(q)
    w, u = q[..., :1], q[..., 1:]
    s2 = dot(u, u, keepdims=True)
    series = (s2 < 1e-8 * w * w) & (w > 0)  # |xyz| / w < 1e-4: series error below 1e-17
    # zero vector part with w <= 0: a rotation by 2 pi, any axis; we pick x. A vector part
    # whose square is subnormal counts as zero: its square root has lost the precision that
    # atan2(s, w) / s needs (|xyz| = 3e-162 gave an angle of 1.1 rad, not 2 pi)
    full_turn = (s2 < tiny(s2)) & ~(w > 0)
    s = m.sqrt(m.where(series | full_turn, 1.0, s2))
    general = 2.0 * m.arctan2(s, w) / s
    ws = m.where(series, w, 1.0)
    small = 2.0 / ws - (2.0 / 3.0) * s2 / (ws * ws * ws)
    v = m.where(series, small, general) * u
    turn = asarray([2.0 * math.pi, 0.0, 0.0], like=q)
    return m.where(full_turn, turn, v)


def exp(v: Array) -> Array:
    """Unit quaternions (..., 4) of rotation vectors ``v = angle * axis`` (..., 3).

    Inverse of :func:`log`: ``exp(v) = (cos(|v| / 2), sin(|v| / 2) * v / |v|)``. A series
    is used for ``|v| < 1e-3``, so ``exp`` is smooth (and differentiable) at zero.
    """
    v = asarray(v)
    m = xp(v)
    t2 = dot(v, v, keepdims=True)
    small = t2 < 1e-6
    t = m.sqrt(m.where(small, 1.0, t2))
    w = m.where(small, 1.0 - t2 / 8.0 + t2 * t2 / 384.0, m.cos(0.5 * t))
    k = m.where(small, 0.5 - t2 / 48.0 + t2 * t2 / 3840.0, m.sin(0.5 * t) / t)
    return cat([w, k * v], axis=-1)


def to_axis_angle(q: Array) -> tuple[Array, Array]:
    """Unit axes (..., 3) and angles (...,) in radians of quaternions (..., 4).

    Consistent with :func:`log`: ``angle = 2 * atan2(|xyz|, w)`` lies in ``[0, 2 pi]``
    (above pi when ``w < 0``) so that ``from_axis_angle(*to_axis_angle(q)) == q``; pass
    ``abs(q)`` for angles in ``[0, pi]``. The axis of a zero rotation is +x.
    """
    q = asarray(q)
    m = xp(q)
    w, u = q[..., 0], q[..., 1:]
    s2 = dot(u, u)
    zero = s2 == 0
    s = m.sqrt(m.where(zero, 1.0, s2))
    axis = m.where(zero[..., None], asarray([1.0, 0.0, 0.0], like=q), u / s[..., None])
    angle = 2.0 * m.arctan2(m.where(zero, 0.0, s), w)
    return axis, angle


def from_axis_angle(axis: Array, angle: Array) -> Array:
    """Quaternions (..., 4) rotating by ``angle`` (..., radians) about unit ``axis`` (..., 3)."""
    axis, angle = promote(axis, angle)
    m = xp(axis)
    half = angle[..., None] * 0.5
    return cat([m.cos(half) + 0.0 * axis[..., :1], m.sin(half) * axis], axis=-1)


def slerp(a: Array, b: Array, t: Array | float) -> Array:
    """Spherical linear interpolation from ``a`` (t = 0) to ``b`` (t = 1), shortest path.

    ``a``, ``b`` (..., 4) unit quaternions, ``t`` scalar or (...,), broadcasting. The
    result turns at constant angular speed along the shorter arc; at ``t = 1`` it is ``b``
    when ``dot(a, b) >= 0`` and ``-b`` (the same rotation) otherwise. Computed as
    ``a * exp(t * log(abs(inv(a) * b)))``, exact and smooth for nearly equal inputs.
    """
    a, b, t = promote(a, b, t)
    r = abs(mul(inv(a), b))
    return mul(a, exp(t[..., None] * log(r)))


def nlerp(a: Array, b: Array, t: Array | float) -> Array:
    """Normalised linear interpolation along the shorter arc (cheap, not constant speed).

    ``a``, ``b`` (..., 4), ``t`` scalar or (...,); ``b`` is negated where ``dot(a, b) < 0``.
    """
    a, b, t = promote(a, b, t)
    b = xp(b).where(dot(a, b, keepdims=True) < 0, -b, b)
    return normalize(a + t[..., None] * (b - a))


def between(u: Array, v: Array) -> Array:
    """Shortest-arc quaternions (..., 4) rotating the directions of ``u`` onto ``v`` (..., 3).

    Inputs need not be unit length. For antiparallel vectors the result is the 180 degree
    turn about an axis perpendicular to ``u``; if either vector is zero, the identity.
    """
    u, v = promote(u, v)
    m = xp(u)
    uu, vv = dot(u, u, keepdims=True), dot(v, v, keepdims=True)
    nonzero = (uu > 0) & (vv > 0)
    u = u / m.sqrt(m.where(uu > 0, uu, 1.0))
    v = v / m.sqrt(m.where(vv > 0, vv, 1.0))
    q = cat([1.0 + dot(u, v, keepdims=True), cross(u, v)], axis=-1)
    # q = 2 cos(a/2) (cos(a/2), sin(a/2) axis) is only at noise level when u and v are
    # antiparallel (or one is zero); then use 180 degrees about an axis perpendicular to u.
    degenerate = dot(q, q, keepdims=True) <= (100.0 * eps(q)) ** 2
    ux, uy, uz = u[..., 0:1], u[..., 1:2], u[..., 2:3]
    zero = 0.0 * ux
    far_from_x = ux * ux < 0.36
    perp = m.where(far_from_x, cat([zero, uz, -uy], -1), cat([-uz, zero, ux], -1))  # u x e_x | u x e_y
    turn = cat([zero, perp], axis=-1)
    ident = cat([zero + 1.0, zero, zero, zero], axis=-1)
    q = m.where(degenerate, m.where(nonzero, turn, ident), q)
    return q / norm(q, keepdims=True)


def to_matrix(q: Array) -> Array:
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4): ``to_matrix(q) @ v == rotate(q, v)``."""
    q = asarray(q)
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


def from_matrix(m: Array) -> Array:
    """Unit quaternions (..., 4) with ``w >= 0`` of rotation matrices (..., 3, 3).

    Shepperd's method, vectorised: of the four expressions ``4 q_k * q`` (k = w, x, y, z)
    it takes, per matrix, the one with the largest ``|q_k|``, so no division by a small
    number happens, 180 degree turns included. Slightly non-orthogonal input gives a nearby
    rotation (the result is normalised).
    """
    m = asarray(m)
    r = xp(m)
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    t0 = 1 + m00 + m11 + m22  # 4 w^2
    t1 = 1 + m00 - m11 - m22  # 4 x^2
    t2 = 1 - m00 + m11 - m22  # 4 y^2
    t3 = 1 - m00 - m11 + m22  # 4 z^2
    a, b, c = m21 - m12, m02 - m20, m10 - m01  # 4 w x, 4 w y, 4 w z
    d, e, f = m10 + m01, m02 + m20, m21 + m12  # 4 x y, 4 x z, 4 y z
    candidates = stack([
        stack([t0, a, b, c], axis=-1),
        stack([a, t1, d, e], axis=-1),
        stack([b, d, t2, f], axis=-1),
        stack([c, e, f, t3], axis=-1),
    ], axis=-2)
    best = r.argmax(stack([t0, t1, t2, t3], axis=-1), -1)
    q = take_along(candidates, best[..., None, None], axis=-2)[..., 0, :]
    return abs(normalize(q))


def from_euler(angles: Array, order: str = "zyx") -> Array:
    """Quaternions (..., 4) from intrinsic Euler angles (..., 3) in radians.

    ``angles[..., i]`` rotates about axis ``order[i]`` and the rotation is
    ``R_order[0] @ R_order[1] @ R_order[2]`` (intrinsic; scipy's ``from_euler(order.upper())``).
    BVH's ``Zrotation Yrotation Xrotation`` is order "zyx". ``order`` is one of
    :data:`EULER_ORDERS` (either case); anything else raises :class:`EulerOrderError`.
    """
    order = _order(order)
    angles = asarray(angles)
    m = xp(angles)
    q = None
    for i in range(3):      # basis rotations kept sparse: only their two non-zero parts
        half = angles[..., i] * 0.5
        basis: list = [m.cos(half), None, None, None]
        basis[1 + _AXES[order[i]]] = m.sin(half)
        q = basis if q is None else _mul_sparse(q, basis)
    return stack(q, axis=-1)


# Hamilton product terms per output component: (sign, index in a, index in b), in the order
# of :func:`mul`.
_MUL_TERMS = (((1, 0, 0), (-1, 1, 1), (-1, 2, 2), (-1, 3, 3)),
              ((1, 0, 1), (1, 1, 0), (1, 2, 3), (-1, 3, 2)),
              ((1, 0, 2), (-1, 1, 3), (1, 2, 0), (1, 3, 1)),
              ((1, 0, 3), (1, 1, 2), (-1, 2, 1), (1, 3, 0)))


def _mul_sparse(a: list, b: list) -> list:
    """:func:`mul` of quaternions given as four components, None for a component known to
    be zero: the products with a zero are skipped, the others summed in :func:`mul`'s
    order, so the result equals ``mul`` bit for bit (adding or subtracting an exact zero
    changes nothing) for finite inputs."""
    out = []
    for terms in _MUL_TERMS:
        acc = None
        for sign, i, j in terms:
            if a[i] is None or b[j] is None:
                continue
            t = a[i] * b[j]
            acc = (t if sign > 0 else -t) if acc is None else (acc + t if sign > 0 else acc - t)
        out.append(acc)
    return out


def _wrap(a: Array) -> Array:
    """Angles in (-2 pi, 2 pi] to (-pi, pi]."""
    m = xp(a)
    a = m.where(a > math.pi, a - 2 * math.pi, a)
    return m.where(a <= -math.pi, a + 2 * math.pi, a)


def to_euler(q: Array, order: str = "zyx") -> Array:
    """Intrinsic Euler angles (..., 3) in radians of quaternions (..., 4); inverse of :func:`from_euler`.

    ``angles[..., 1]`` lies in ``[-pi/2, pi/2]``, the others in ``(-pi, pi]`` (as scipy's
    ``as_euler(order.upper())``). The result is the same for ``q`` and ``-q``. In gimbal
    lock (middle angle +-pi/2) only the sum or difference of the outer angles is defined;
    the third angle is then set to 0, as scipy does, and no NaN appears.

    Method: relabel the axes so the order reads "xyz" (negating the third axis for the odd
    orders, which keeps the frame right-handed), then solve the quaternion product
    ``qx(a) qy(b) qz(c)`` in closed form: ``(w + y, x + z)`` has the angle ``(a + c) / 2``
    and length ``cos(b/2) + sin(b/2)``, ``(w - y, x - z)`` has ``(a - c) / 2`` and length
    ``cos(b/2) - sin(b/2)``. Everything goes through ``atan2``, so the accuracy is uniform.
    """
    order = _order(order)
    q = asarray(q)
    m = xp(q)
    i, j, k = (_AXES[c] for c in order)
    sign = 1.0 if order in _EVEN_ORDERS else -1.0
    w, x, y, z = q[..., 0], q[..., i + 1], q[..., j + 1], sign * q[..., k + 1]
    a1, b1, a2, b2 = w + y, x + z, w - y, x - z
    h1 = _sqrt_or_zero(a1 * a1 + b1 * b1)
    h2 = _sqrt_or_zero(a2 * a2 + b2 * b2)
    tol = 100.0 * eps(q)
    lock_up = h2 <= tol * h1    # middle angle +pi/2: only a + c is defined
    lock_down = h1 <= tol * h2  # middle angle -pi/2: only a - c is defined
    plus = m.arctan2(m.where(lock_down, 0.0, b1), m.where(lock_down, 1.0, a1))  # (a + c) / 2
    minus = m.arctan2(m.where(lock_up, 0.0, b2), m.where(lock_up, 1.0, a2))    # (a - c) / 2
    first = m.where(lock_up, 2.0 * plus, m.where(lock_down, 2.0 * minus, plus + minus))
    third = m.where(lock_up | lock_down, 0.0, plus - minus)
    middle = 2.0 * m.arctan2(h1, h2) - 0.5 * math.pi
    return stack([_wrap(first), middle, sign * _wrap(third) + 0.0], axis=-1)  # + 0.0: no -0.0


def to_6d(q: Array) -> Array:
    """The 6D representation (..., 6) of quaternions: the first two columns of the matrix
    (see :mod:`kinema.maths.sixd`)."""
    return sixd.from_matrix(to_matrix(q))


def from_6d(d: Array) -> Array:
    """Quaternions (..., 4), ``w >= 0``, from 6D vectors (..., 6) (Gram-Schmidt, see :mod:`kinema.maths.sixd`)."""
    return from_matrix(sixd.to_matrix(d))


def unroll(q: Array, axis: int = 0) -> Array:
    """Flip signs along ``axis`` (time) so consecutive quaternions lie in one hemisphere.

    ``q`` (..., 4); ``axis`` indexes the leading dims (negative values count from the last
    leading dim, so -1 is ``q.ndim - 2``). The first sample keeps its sign; afterwards
    ``dot(out[t], out[t - 1]) >= 0``. Rotations are unchanged (each entry is q or -q).
    """
    q = asarray(q)
    if q.ndim < 2:
        return q
    lead = q.ndim - 1
    if not -lead <= axis < lead:
        raise KinemaError(f"unroll axis {axis} out of range for quaternions of shape {tuple(q.shape)}")
    axis = axis % lead
    m = xp(q)
    qt = moveaxis(q, axis, 0)
    flips = dot(qt[1:], qt[:-1]) < 0
    odd = (m.cumsum(flips, 0) % 2) == 1
    rest = m.where(odd[..., None], -qt[1:], qt[1:])
    return moveaxis(cat([qt[:1], rest], axis=0), 0, axis)


def angle(a: Array, b: Array) -> Array:
    """Geodesic angle (...,) in ``[0, pi]`` radians between rotations ``a`` and ``b`` (..., 4).

    Insensitive to the sign of either quaternion. Computed as ``2 atan2(|xyz|, |w|)`` of
    ``inv(a) * b``, accurate for tiny angles; its gradient at ``a == b`` is taken as 0.
    """
    r = mul(inv(a), b)
    m = xp(r)
    s = _sqrt_or_zero(dot(r[..., 1:], r[..., 1:]))
    return 2.0 * m.arctan2(s, m.abs(r[..., 0]))
