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
            out[row, col] = -v if neg else v
            col += 1
        if col == 0:
            continue                                 # a blank line
        if col != cols:
            return False
        row += 1
    return row == frames
