"""Critically damped springs and dampers, in exact closed form (Holden, "Spring-It-On", 2021).

Every function advances a state by ``dt`` seconds exactly (no integration error), so
``n`` steps of ``dt / n`` equal one step of ``dt`` up to rounding. Springs are described by
their **halflife** (seconds for the distance to the goal to halve, from rest); the
exponential rate is ``y = 2 ln 2 / halflife``. All arguments broadcast (NumPy arrays of
any shape, vectors ``(..., 3)``, quaternions ``(..., 4)`` w,x,y,z); time in seconds.

Functions:
    damper: exponential approach of a value to a goal.
    spring: critically damped spring (x, v) toward a goal position (and goal velocity).
    decay_spring: the same toward zero (offset decay, used by inertialization).
    velocity_spring: the character "controller" spring: position x, velocity v and
        acceleration a, with the velocity springing to a desired velocity.
    velocity_spring_predict: the same evaluated at many future times at once.
    quat_spring / quat_decay_spring: rotations with angular velocity (rad/s vectors).
"""
from __future__ import annotations

import math

import numpy as np

from kinema.maths import quat

LN2 = math.log(2.0)
_MIN_HALFLIFE = 1e-9  # halflife 0 means "snap": exp(-y dt) underflows to 0 for any dt > 0


def halflife_to_damping(halflife: np.ndarray | float) -> np.ndarray | float:
    """Damping ``4 ln2 / halflife`` (1/s) of a critically damped spring (twice the rate y)."""
    return 4.0 * LN2 / np.maximum(halflife, _MIN_HALFLIFE)


def damping_to_halflife(damping: np.ndarray | float) -> np.ndarray | float:
    """Inverse of :func:`halflife_to_damping`."""
    return 4.0 * LN2 / np.maximum(damping, 1e-12)


def _rate(halflife: np.ndarray | float) -> np.ndarray | float:
    """Exponential rate y = damping / 2 = 2 ln2 / halflife."""
    return 2.0 * LN2 / np.maximum(halflife, _MIN_HALFLIFE)


def _col(h: np.ndarray | float, x: np.ndarray) -> np.ndarray | float:
    """Per-item parameters (...,) broadcast against vectors (..., C) when shapes need it."""
    h = np.asarray(h)
    if h.ndim and np.ndim(x) == h.ndim + 1:
        return h[..., None]
    return h


def damper(x: np.ndarray, goal: np.ndarray, halflife: np.ndarray | float, dt: float) -> np.ndarray:
    """Exact exponential damper: ``lerp(x, goal, 1 - 2^(-dt / halflife))``."""
    t = 1.0 - np.exp(-LN2 * dt / np.maximum(halflife, _MIN_HALFLIFE))
    return x + (goal - x) * t


def spring(x: np.ndarray, v: np.ndarray, goal: np.ndarray, halflife: np.ndarray | float, dt: float,
           goal_velocity: np.ndarray | float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Critically damped spring toward ``goal``, exact.

    With y = 2 ln2 / halflife, j0 = x - goal, j1 = v + j0 y, e = exp(-y dt):
    ``x' = e (j0 + j1 dt) + goal``, ``v' = e (v - j1 y dt)``. With ``goal_velocity`` the
    goal is at ``goal`` now and moves at that constant velocity: the offset to the moving
    goal and its rate decay as above, so ``x' = goal + goal_velocity dt + offset'``.

    Returns:
        (x', v') with the broadcast shape of the inputs.
    """
    gv = np.asarray(goal_velocity)
    off, off_v = decay_spring(x - goal, v - gv, halflife, dt)
    return goal + gv * dt + off, gv + off_v


def decay_spring(x: np.ndarray, v: np.ndarray, halflife: np.ndarray | float, dt: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Critically damped decay of an offset ``x`` (with velocity ``v``) toward zero, exact."""
    y = _col(_rate(halflife), x)
    j1 = v + x * y
    e = np.exp(-y * dt)
    return e * (x + j1 * dt), e * (v - j1 * y * dt)


def velocity_spring(x: np.ndarray, v: np.ndarray, a: np.ndarray, goal_velocity: np.ndarray,
                    halflife: np.ndarray | float, dt: float | np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The "controller" spring: velocity critically damped toward ``goal_velocity``.

    With j0 = v - v_goal, j1 = a + j0 y, e = exp(-y dt):
    ``x' = e (-j1/y^2 - (j0 + j1 dt)/y) + j1/y^2 + j0/y + v_goal dt + x``,
    ``v' = e (j0 + j1 dt) + v_goal``, ``a' = e (a - j1 y dt)``.
    ``dt`` may be an array of times (broadcast against the state) for predictions.
    """
    y = _col(_rate(halflife), x)
    j0 = v - goal_velocity
    j1 = a + j0 * y
    e = np.exp(-y * dt)
    x_new = e * (-j1 / (y * y) - (j0 + j1 * dt) / y) + j1 / (y * y) + j0 / y + goal_velocity * dt + x
    v_new = e * (j0 + j1 * dt) + goal_velocity
    a_new = e * (a - j1 * y * dt)
    return x_new, v_new, a_new


def velocity_spring_predict(x: np.ndarray, v: np.ndarray, a: np.ndarray, goal_velocity: np.ndarray,
                            halflife: float, times: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`velocity_spring` from one state (..., C) at several future ``times`` (T,).

    Returns:
        positions, velocities, accelerations of shape (T, ..., C).
    """
    t = np.asarray(times, np.float64).reshape((-1,) + (1,) * np.ndim(x))
    return velocity_spring(np.asarray(x)[None], np.asarray(v)[None], np.asarray(a)[None],
                           np.asarray(goal_velocity)[None], halflife, t)


def quat_spring(q: np.ndarray, w: np.ndarray, goal: np.ndarray, halflife: np.ndarray | float, dt: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """Critically damped rotation spring toward ``goal`` (..., 4); ``w`` angular velocity (..., 3).

    The offset ``log(abs(q * goal^-1))`` (a rotation vector, shortest arc) follows
    :func:`decay_spring`, then is applied on top of the goal.
    """
    j0 = quat.log(quat.abs(quat.mul(q, quat.inv(goal))))
    off, w_new = decay_spring(j0, w, halflife, dt)
    return quat.mul(quat.exp(off), goal), w_new


def quat_decay_spring(q: np.ndarray, w: np.ndarray, halflife: np.ndarray | float, dt: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Critically damped decay of a rotation offset ``q`` (..., 4) toward identity."""
    off, w_new = decay_spring(quat.log(quat.abs(q)), w, halflife, dt)
    return quat.exp(off), w_new
