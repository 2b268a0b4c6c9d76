"""Compiled (Numba) reader of the MOTION numbers of a BVH file, bit for bit ``np.loadtxt``.

A BVH file's MOTION block is plain decimals (``-12.345678``, ``5.1072e-06``);
``np.loadtxt`` reads it at about 60 MB/s and dominates the load of a small file.
:func:`read_values` reads exactly the decimals it can convert without rounding doubt,
and reports failure on anything else (``nan``, more than 2**53 in the digits, a power of
ten beyond 10**22, other bytes, a wrong count of values per line), so the caller falls
back to ``np.loadtxt`` and its diagnosis for those:

- a decimal ``[+-]digits[.digits][e[+-]digits]`` is the integer ``m`` of all its digits
  times ``10**s`` (``s`` = exponent minus the digits after the point). When
  ``m < 2**53`` and ``|s| <= 22`` both ``m`` and ``10**|s|`` are exact doubles, and one
  IEEE multiplication or division rounds the result correctly (Clinger's fast path),
  which is what ``np.loadtxt`` (CPython's correctly rounded ``PyOS_string_to_double``)
  returns; the sign is applied after, so ``-0.000`` is ``-0.0`` as there.
- lines are split at spaces and tabs and end at ``\\n`` or ``\\r\\n``; blank lines are
  skipped, as ``np.loadtxt`` does. Any other byte (a lone ``\\r``, form feed, letters)
  is a failure, left to ``np.loadtxt``.

Imported lazily by :mod:`kinema.io.bvh_parse` (Numba is one of the heavy imports kept off
``import kinema``).
"""
from __future__ import annotations

import numba
import numpy as np

#: 10**k for k = 0..22, every one an exact double.
POW10 = np.array([float(10 ** k) for k in range(23)])
_EXACT = 1 << 53
#: Magnitudes at or above this are refused (kinema.io.bvh_parse.MAX_ABS_VALUE, repeated here
#: because that module imports this one lazily; a test checks they agree).
_MAX_ABS = 1e30


@numba.njit(cache=True, nogil=True)
def read_values(buf: np.ndarray, start: int, out: np.ndarray, pow10: np.ndarray) -> bool:
    """Fill ``out`` (F, C) float64 from the text ``buf[start:]``; False when it cannot.

    Args:
        buf: (N,) uint8, the file's bytes.
        start: offset of the first MOTION value line in ``buf``.
        out: (F, C) float64, written row by row; undefined when False is returned.
        pow10: (23,) float64, ``10**k`` (:data:`POW10`).
    Returns:
        True when the text holds exactly F non-blank lines of exactly C plain decimals each
        (the values are then in ``out``), else False.
    """
    n = buf.shape[0]
    frames, cols = out.shape[0], out.shape[1]
    i = start
    row = 0
    while i < n:
        col = 0
        while True:                                  # one line
            while i < n and (buf[i] == 32 or buf[i] == 9):
                i += 1
            if i >= n:
                break
            c = buf[i]
            if c == 10:
                i += 1
                break
            if c == 13:
                if i + 1 < n and buf[i + 1] == 10:
                    i += 2
                    break
                return False
            # one plain decimal, read here rather than by a shared scanner (the hot loop:
            # see kinema.io.bvh_hierarchy_kernels._decimal, its twin)
            neg = False
            if c == 45 or c == 43:                   # '-' or '+'
                neg = c == 45
                i += 1
            m = 0
            digits = 0
            frac = 0
            point = False
            while i < n:
                c = buf[i]
                if 48 <= c <= 57:
                    if m >= _EXACT:                  # too many digits for an exact double
                        return False
                    m = m * 10 + (c - 48)
                    digits += 1
                    if point:
                        frac += 1
                elif c == 46 and not point:          # '.'
                    point = True
                else:
                    break
                i += 1
            if digits == 0 or m >= _EXACT:
                return False
            scale = -frac                            # the value is m * 10**scale
            if i < n and (buf[i] == 101 or buf[i] == 69):       # 'e' or 'E'
                i += 1
                eneg = False
                if i < n and (buf[i] == 45 or buf[i] == 43):
                    eneg = buf[i] == 45
                    i += 1
                e = 0
                edigits = 0
                while i < n and 48 <= buf[i] <= 57:
                    if edigits == 4:
                        return False
                    e = e * 10 + (buf[i] - 48)
                    edigits += 1
                    i += 1
                if edigits == 0:
                    return False
                scale += -e if eneg else e
            if scale < -22 or scale > 22:
                return False
            if i < n and not (buf[i] == 32 or buf[i] == 9 or buf[i] == 10 or buf[i] == 13):
                return False                         # e.g. "1e5", "1.2.3", "1,5": left to loadtxt
            if row >= frames or col >= cols:
                return False
            v = m / pow10[-scale] if scale < 0 else m * pow10[scale]
            if not v < _MAX_ABS:                     # refused with its line by the diagnosis
                return False
            out[row, col] = -v if neg else v
            col += 1
        if col == 0:
            continue                                 # a blank line
        if col != cols:
            return False
        row += 1
    return row == frames


#: NumPy's ``np.radians`` factor (its float64 result is ``degrees * DEG2RAD``, one rounding).
DEG2RAD = np.pi / 180.0


@numba.njit(cache=True, nogil=True)
def half_angles(values: np.ndarray, cols: np.ndarray, out: np.ndarray) -> None:
    """Half Euler angles, in radians, for :func:`euler_quaternions`, in place.

    The steps (and bits) of ``quat.from_euler(np.radians(a).astype(np.float32))``: radians
    in float64, rounded to float32, times 0.5 (exact).

    Args:
        values: (F, C) float64 MOTION values (angles in degrees).
        cols: (J, 3) int64 value column of each joint's angles in its Euler order; -1 for an
            axis without a channel (angle 0) and for joints without rotation channels.
        out: (F, J, 3) float32, written.
    """
    frames, joints = out.shape[0], out.shape[1]
    half = np.float32(0.5)
    for f in range(frames):
        for j in range(joints):
            for k in range(3):
                c = cols[j, k]
                out[f, j, k] = np.float32(values[f, c] * DEG2RAD) * half if c >= 0 else np.float32(0.0)


@numba.njit(cache=True, nogil=True)
def euler_quaternions(cos: np.ndarray, sin: np.ndarray, axes: np.ndarray, out: np.ndarray) -> None:
    """Quaternions of intrinsic Euler angles, bit for bit :func:`kinema.maths.quat.from_euler`.

    With ``c_i, s_i`` the cosine and sine of half the angle about axis ``order[i]`` and
    ``e`` = +1 for the cyclic orders (xyz, yzx, zxy), -1 for the others, ``from_euler``'s
    sparse products come to ``w = c0 c1 c2 - e s0 s1 s2``, ``q[order[0]] = s0 c1 c2 +
    e c0 s1 s2``, ``q[order[1]] = c0 s1 c2 - e s0 c1 s2``, ``q[order[2]] = c0 c1 s2 +
    e s0 s1 c2``, each product taken left to right in float32 (the order of the two terms
    of a sum, and a sign moved into a subtraction, change no bit).

    Args:
        cos, sin: (F, J, 3) float32, ``np.cos`` and ``np.sin`` of the half angles (NumPy's
            float32 functions: Numba's differ in the last bit).
        axes: (J, 3) int64 axis (0-2) of each joint's angles in its order; a row of -1 for a
            joint without rotation channels (identity).
        out: (F, J, 4) float32 (w, x, y, z), written.
    """
    frames, joints = out.shape[0], out.shape[1]
    for f in range(frames):
        for j in range(joints):
            a0, a1, a2 = axes[j, 0], axes[j, 1], axes[j, 2]
            if a0 < 0:
                out[f, j, 0], out[f, j, 1], out[f, j, 2], out[f, j, 3] = 1.0, 0.0, 0.0, 0.0
                continue
            c0, c1, c2 = cos[f, j, 0], cos[f, j, 1], cos[f, j, 2]
            s0, s1, s2 = sin[f, j, 0], sin[f, j, 1], sin[f, j, 2]
            if (a1 - a0) % 3 == 1:              # cyclic
                out[f, j, 0] = c0 * c1 * c2 - s0 * s1 * s2
                out[f, j, 1 + a0] = s0 * c1 * c2 + c0 * s1 * s2
                out[f, j, 1 + a1] = c0 * s1 * c2 - s0 * c1 * s2
                out[f, j, 1 + a2] = c0 * c1 * s2 + s0 * s1 * c2
            else:
                out[f, j, 0] = c0 * c1 * c2 + s0 * s1 * s2
                out[f, j, 1 + a0] = s0 * c1 * c2 - c0 * s1 * s2
                out[f, j, 1 + a1] = c0 * s1 * c2 + s0 * c1 * s2
                out[f, j, 1 + a2] = c0 * c1 * s2 - s0 * s1 * c2


@numba.njit(cache=True, nogil=True)
def _bounded(a: np.ndarray, max_abs: float) -> bool:
    """Every value of ``a`` (any shape) finite and at most ``max_abs`` in magnitude."""
    for x in a.ravel():
        if not (np.isfinite(x) and abs(x) <= max_abs):
            return False
    return True


@numba.njit(cache=True, nogil=True)
def motion_in_range(offsets: np.ndarray, positions: np.ndarray, rotations: np.ndarray, max_abs: float,
                    norm_margin: float) -> bool:
    """Whether :func:`kinema.io.validate.check_motion` would pass these arrays unchanged.

    Args:
        offsets: (J, 3) float32 skeleton offsets; positions: (F, J, 3) float32, metres.
        rotations: (F, J, 4) float32 quaternions.
        max_abs: ``Limits.max_abs_position`` (metres).
        norm_margin: float64 quaternion norms must lie within ``1 +- norm_margin``; half
            ``validate.RENORMALISE_ABOVE`` leaves room for any rounding of the norm.
    Returns:
        True when every offset and position is finite and within ``max_abs`` and every
        quaternion is within the margin of unit norm; False says nothing (the full checks
        then run and name the problem).
    """
    if not (_bounded(offsets, max_abs) and _bounded(positions, max_abs)):
        return False
    q = rotations.reshape(-1, 4)
    for i in range(q.shape[0]):
        w, x, y, z = np.float64(q[i, 0]), np.float64(q[i, 1]), np.float64(q[i, 2]), np.float64(q[i, 3])
        if not abs(np.sqrt(w * w + x * x + y * y + z * z) - 1.0) <= norm_margin:
            return False
    return True
