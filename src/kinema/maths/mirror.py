"""Mirroring of positions and rotations across a coordinate plane.

``M = diag(...)`` with -1 at ``axis`` (default 0, x: the YZ plane). A position ``p``
mirrors to ``M p``; a rotation ``R`` mirrors to ``M R M`` (the rotation seen in the
mirror: ``M R M (M p) = M (R p)``). For a unit quaternion ``(w, x, y, z)`` this is
``(w, -M [x, y, z])``: the scalar and the component on ``axis`` stay, the two others are
negated; e.g. for axis 0, ``(w, x, y, z) -> (w, x, -y, -z)``. Mirroring twice is the
identity. Swapping left and right joints is the motion layer's job
(``kinema.motion``), not this module's.
"""
from __future__ import annotations

from kinema.errors import KinemaError
from kinema.maths.backend import Array, asarray

__all__ = ["positions", "rotations"]


def _check(axis: int) -> int:
    if axis not in (0, 1, 2):
        raise KinemaError(f"mirror axis must be 0, 1 or 2 (x, y, z), got {axis!r}")
    return axis


def positions(p: Array, axis: int = 0) -> Array:
    """Positions (..., 3) mirrored across the plane normal to ``axis``: ``M p``."""
    p = asarray(p)
    sign = [1.0, 1.0, 1.0]
    sign[_check(axis)] = -1.0
    return p * asarray(sign, like=p)


def rotations(q: Array, axis: int = 0) -> Array:
    """Quaternions (..., 4) of the mirrored rotations ``M R M``: ``(w, -M xyz)``."""
    q = asarray(q)
    sign = [1.0, -1.0, -1.0, -1.0]
    sign[_check(axis) + 1] = 1.0
    return q * asarray(sign, like=q)
