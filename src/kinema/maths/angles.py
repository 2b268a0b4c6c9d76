"""Angles about the vertical: the yaw of floor directions, wrapping to [-pi, pi) and the
quaternion of a yaw.

Conventions (docs/architecture.md): Y up, a character faces +Z at yaw 0, and a positive yaw
turns +Z toward +X.
"""
from __future__ import annotations

import numpy as np


def yaw(directions: np.ndarray) -> np.ndarray:
    """Yaw (...,) in radians of floor directions (..., 3) (x and z used; need not be unit)."""
    d = np.asarray(directions)
    return np.arctan2(d[..., 0], d[..., 2])


def wrap(angles):
    """``angles`` (radians, any shape) wrapped into [-pi, pi)."""
    return (angles + np.pi) % (2 * np.pi) - np.pi


def yaw_quaternion(angles: np.ndarray | float) -> np.ndarray:
    """Quaternions (..., 4) w,x,y,z turning by ``angles`` (..., radians) about +Y (the dtype of
    ``angles``; a Python float gives float64)."""
    half = np.asarray(angles) / 2
    c = np.cos(half)
    z = np.zeros_like(c)
    return np.stack([c, z, np.sin(half), z], -1)
