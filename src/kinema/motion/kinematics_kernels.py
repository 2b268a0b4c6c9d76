"""Compiled (Numba) forward kinematics for NumPy arrays, bit for bit :mod:`kinema.motion.kinematics`.

:func:`kinema.motion.kinematics.forward` runs one vectorised NumPy step per depth level of
the hierarchy; on a 5,000-frame LaFAN1 take that is about 500 ufunc calls with their
temporaries. Here every pose is one pass over its joints in index order (parents come
first), with the very same float32 (or float64) operations in the same order as
:func:`kinema.maths.quat.mul` and :func:`kinema.maths.quat.rotate`, so the results are
identical to the last bit: each product and sum is rounded to the array's type, sums run
left to right, ``2 * x`` is written ``x + x`` (exact, and it keeps Numba from promoting a
float32 to float64 through a float literal). No ``fastmath``: LLVM may then neither fuse
multiply-adds nor reorder the sums.

Imported lazily by :mod:`kinema.motion.kinematics` (Numba is one of the heavy imports kept
off ``import kinema``).
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _rotate(aw, ax, ay, az, vx, vy, vz):
    """:func:`kinema.maths.quat.rotate` of one vector by one unit quaternion, in its order:
    t = 2 cross(u, v); v + w t + cross(u, t)."""
    cx = ay * vz - az * vy
    cy = az * vx - ax * vz
    cz = ax * vy - ay * vx
    tx, ty, tz = cx + cx, cy + cy, cz + cz
    return (vx + aw * tx + (ay * tz - az * ty),
            vy + aw * ty + (az * tx - ax * tz),
            vz + aw * tz + (ax * ty - ay * tx))


@numba.njit(cache=True, nogil=True)
def forward(local_rot: np.ndarray, local_pos: np.ndarray, parents: np.ndarray, out_rot: np.ndarray,
            out_pos: np.ndarray) -> None:
    """World rotations and positions of poses (N, J) from local ones, in place.

    Args:
        local_rot: (N, J, 4) local rotations (w, x, y, z), C-ordered, float32 or float64.
        local_pos: (N, J, 3) local translations, same dtype.
        parents: (J,) int64 parent indices, -1 for roots, every parent lower than its child.
        out_rot: (N, J, 4) world rotations (written).
        out_pos: (N, J, 3) world positions (written).
    """
    n, joints = local_rot.shape[0], local_rot.shape[1]
    for f in range(n):
        for j in range(joints):
            bw, bx, by, bz = local_rot[f, j, 0], local_rot[f, j, 1], local_rot[f, j, 2], local_rot[f, j, 3]
            vx, vy, vz = local_pos[f, j, 0], local_pos[f, j, 1], local_pos[f, j, 2]
            p = parents[j]
            if p < 0:
                out_rot[f, j, 0], out_rot[f, j, 1], out_rot[f, j, 2], out_rot[f, j, 3] = bw, bx, by, bz
                out_pos[f, j, 0], out_pos[f, j, 1], out_pos[f, j, 2] = vx, vy, vz
                continue
            aw, ax, ay, az = out_rot[f, p, 0], out_rot[f, p, 1], out_rot[f, p, 2], out_rot[f, p, 3]
            rx, ry, rz = _rotate(aw, ax, ay, az, vx, vy, vz)
            out_pos[f, j, 0] = out_pos[f, p, 0] + rx
            out_pos[f, j, 1] = out_pos[f, p, 1] + ry
            out_pos[f, j, 2] = out_pos[f, p, 2] + rz
            # quat.mul(parent, local)
            out_rot[f, j, 0] = aw * bw - ax * bx - ay * by - az * bz
            out_rot[f, j, 1] = aw * bx + ax * bw + ay * bz - az * by
            out_rot[f, j, 2] = aw * by - ax * bz + ay * bw + az * bx
            out_rot[f, j, 3] = aw * bz + ax * by - ay * bx + az * bw


@numba.njit(cache=True, nogil=True)
def positions(global_rot: np.ndarray, given_pos: np.ndarray, parents: np.ndarray, offsets: np.ndarray,
              anchored: np.ndarray, out_pos: np.ndarray) -> None:
    """World positions of poses (N, J) from world rotations and rest offsets, in place:
    :func:`kinema.motion.kinematics.positions_from_rotations` bit for bit (the same
    ``quat.rotate`` operations in its order, as :func:`forward`).

    Args:
        global_rot: (N, J, 4) world rotations (w, x, y, z), C-ordered, float32 or float64.
        given_pos: (N, J, 3) positions, same dtype; kept for roots and anchored joints.
        parents: (J,) int64 parent indices, -1 for roots, every parent lower than its child.
        offsets: (J, 3) rest offsets from the parent, same dtype.
        anchored: (J,) bool, joints whose position is taken from ``given_pos``.
        out_pos: (N, J, 3) world positions (written).
    """
    n, joints = global_rot.shape[0], global_rot.shape[1]
    for f in range(n):
        for j in range(joints):
            p = parents[j]
            if p < 0 or anchored[j]:
                out_pos[f, j, 0], out_pos[f, j, 1], out_pos[f, j, 2] = \
                    given_pos[f, j, 0], given_pos[f, j, 1], given_pos[f, j, 2]
                continue
            aw, ax, ay, az = global_rot[f, p, 0], global_rot[f, p, 1], global_rot[f, p, 2], global_rot[f, p, 3]
            vx, vy, vz = offsets[j, 0], offsets[j, 1], offsets[j, 2]
            rx, ry, rz = _rotate(aw, ax, ay, az, vx, vy, vz)
            out_pos[f, j, 0] = out_pos[f, p, 0] + rx
            out_pos[f, j, 1] = out_pos[f, p, 1] + ry
            out_pos[f, j, 2] = out_pos[f, p, 2] + rz
