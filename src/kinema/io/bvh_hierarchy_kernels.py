"""Compiled (Numba) reading of a well-formed BVH HIERARCHY block, or a refusal.

The statement-by-statement parser of :mod:`kinema.io.bvh_parse` costs about a
microsecond per statement in Python, which is most of the fixed cost of loading a small
file. :func:`hierarchy` reads the same block from the file's bytes in one compiled pass,
but only when it is the plain case: printable ASCII, spaces, tabs and line ends; braces
standing as their own tokens; one-word joint names; OFFSET numbers that are plain
decimals read exactly (as :mod:`kinema.io.bvh_kernels` reads MOTION values, the bits of
Python's ``float``). On anything else (a syntax error, a name of several words, a byte
order mark, ``1_0``, ``nan``) it returns -1 and the Python parser reads the block, so
every result and every error message is that parser's: this pass only ever gives the
answer the parser would give, faster.

Imported lazily by :mod:`kinema.io.bvh_parse` (Numba is one of the heavy imports kept off
``import kinema``).
"""
from __future__ import annotations

import numba
import numpy as np

#: Upper-case keywords, as bytes.
_HIERARCHY = np.frombuffer(b"HIERARCHY", np.uint8)
_ROOT = np.frombuffer(b"ROOT", np.uint8)
_JOINT = np.frombuffer(b"JOINT", np.uint8)
_END = np.frombuffer(b"END", np.uint8)
_OFFSET = np.frombuffer(b"OFFSET", np.uint8)
_CHANNELS = np.frombuffer(b"CHANNELS", np.uint8)
_POSITION = np.frombuffer(b"POSITION", np.uint8)
_ROTATION = np.frombuffer(b"ROTATION", np.uint8)
#: Values at or above this magnitude are refused (:data:`kinema.io.bvh_parse.MAX_ABS_VALUE`).
MAX_ABS_VALUE = 1e30
#: Channel codes of :func:`hierarchy`: a joint's layout is sum((code + 1) * 7**k) over its
#: channels k, codes 0-2 for X/Y/Z position and 3-5 for X/Y/Z rotation.
LAYOUT_BASE = 7
_EXACT = 1 << 53
_OPEN, _CLOSE = 123, 125            # '{', '}'


@numba.njit(cache=True, nogil=True)
def _keyword(buf: np.ndarray, s: int, e: int, word: np.ndarray) -> bool:
    """Whether ``buf[s:e]`` is ``word`` (upper-case ASCII) in any case."""
    if e - s != word.shape[0]:
        return False
    for k in range(e - s):
        c = buf[s + k]
        if 97 <= c <= 122:
            c -= 32
        if c != word[k]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _decimal(buf: np.ndarray, s: int, e: int, pow10: np.ndarray) -> tuple[bool, float]:
    """(True, value) when ``buf[s:e]`` is all of a plain decimal
    ``[+-]digits[.digits][e[+-]digits]`` below :data:`MAX_ABS_VALUE` that is exactly
    ``m * 10**s`` with ``m < 2**53`` and ``|s| <= 22`` (one correctly rounded operation,
    Python's ``float`` bits), else (False, 0.0).

    The same grammar and arithmetic as the value loop of
    :func:`kinema.io.bvh_kernels.read_values`, kept as two copies on purpose: with one
    scanner shared by both, the MOTION loop ran 9-10% slower on the LaFAN1 takes inlined
    and 38% slower as a call (5.0 -> 5.4 / 6.9 ms on walk4_subject1); a change to one
    must go into the other (tests/io/test_bvh_compiled.py and test_bvh_values.py check each
    against Python's reading)."""
    i = s
    neg = False
    if i < e and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    m = 0
    digits = 0
    frac = 0
    point = False
    while i < e:
        c = buf[i]
        if 48 <= c <= 57:
            if m >= _EXACT:
                return False, 0.0
            m = m * 10 + (c - 48)
            digits += 1
            if point:
                frac += 1
        elif c == 46 and not point:
            point = True
        else:
            break
        i += 1
    if digits == 0 or m >= _EXACT:
        return False, 0.0
    scale = -frac
    if i < e and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < e and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        x = 0
        edigits = 0
        while i < e and 48 <= buf[i] <= 57:
            if edigits == 4:
                return False, 0.0
            x = x * 10 + (buf[i] - 48)
            edigits += 1
            i += 1
        if edigits == 0:
            return False, 0.0
        scale += -x if eneg else x
    if i != e or scale < -22 or scale > 22:
        return False, 0.0
    v = m / pow10[-scale] if scale < 0 else m * pow10[scale]
    if not v < MAX_ABS_VALUE:
        return False, 0.0
    return True, -v if neg else v


@numba.njit(cache=True, nogil=True)
def _channel_code(buf: np.ndarray, s: int, e: int) -> int:
    """Code (0-5, see :data:`LAYOUT_BASE`) of the channel name ``buf[s:e]`` in any case, or -1."""
    if e - s != 9:
        return -1
    c = buf[s] | 32                     # lower case
    if c < 120 or c > 122:              # 'x'..'z'
        return -1
    if _keyword(buf, s + 1, e, _POSITION):
        return c - 120
    if _keyword(buf, s + 1, e, _ROTATION):
        return c - 120 + 3
    return -1


_WORD, _SPACE, _NEWLINE, _BRACE, _BAD = 0, 1, 2, 3, 4


def _byte_classes() -> np.ndarray:
    """(256,) uint8 class of each byte for :func:`_tokens`."""
    classes = np.full(256, _BAD, np.uint8)
    classes[33:127] = _WORD
    classes[[32, 9, 13]] = _SPACE
    classes[10] = _NEWLINE
    classes[[_OPEN, _CLOSE]] = _BRACE
    return classes


_CLASSES = _byte_classes()


@numba.njit(cache=True, nogil=True)
def _tokens(buf: np.ndarray, end: int):
    """(starts, stops, lines, count) of the whitespace-separated tokens of ``buf[:end]``, or
    count -1 when a byte is not printable ASCII, a space, a tab or a line end, or a brace
    touches another character."""
    starts = np.empty(end // 2 + 1, np.int64)
    stops = np.empty_like(starts)
    lines = np.empty_like(starts)
    n = 0
    line = 0
    i = 0
    while i < end:
        k = _CLASSES[buf[i]]
        if k == _NEWLINE:
            line += 1
            i += 1
            continue
        if k == _SPACE:
            i += 1
            continue
        if k == _BAD:
            return starts, stops, lines, -1
        s = i
        i += 1
        while k == _WORD and i < end and _CLASSES[buf[i]] == _WORD:
            i += 1
        if i < end and _CLASSES[buf[i]] != _SPACE and _CLASSES[buf[i]] != _NEWLINE:
            return starts, stops, lines, -1      # a brace touching a word or a brace, a bad byte
        starts[n], stops[n], lines[n] = s, i, line
        n += 1
    return starts, stops, lines, n


@numba.njit(cache=True, nogil=True)
def hierarchy(buf: np.ndarray, end: int, pow10: np.ndarray, ints: np.ndarray, floats: np.ndarray) -> tuple[int, int]:
    """Read the HIERARCHY block ``buf[:end]`` when it is the plain case (see the module).

    Args:
        buf: (N,) uint8, the file's bytes; ``end`` the offset of its MOTION line.
        pow10: (23,) float64, ``10**k`` (:data:`kinema.io.bvh_kernels.POW10`).
        ints: (6, K) int64 output; K bounds the joints and the End Sites (the count of
            '{'). Rows per joint: parent (-1 for the root), channel layout (see
            :data:`LAYOUT_BASE`), start and stop of its name in ``buf``; per End Site: its
            joint, and how many joints were read before it.
        floats: (2, K, 3) float64 output: each joint's OFFSET, each End Site's OFFSET (file units).
    Returns:
        (joints, End Sites) read, or (-1, -1) when the Python parser must read the block.
    """
    parents, layouts, name_start, name_stop, site_joint, site_at = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
    offsets, site_off = floats[0], floats[1]
    starts, stops, lines, ntok = _tokens(buf, end)
    cap = parents.shape[0]
    if ntok < 1 or not _keyword(buf, starts[0], stops[0], _HIERARCHY) or \
            (ntok > 1 and lines[1] == lines[0] and buf[starts[1]] != _OPEN and buf[starts[1]] != _CLOSE):
        return -1, -1
    has_off = np.zeros(cap, np.bool_)
    has_chan = np.zeros(cap, np.bool_)
    site_has_off = np.zeros(cap, np.bool_)
    stack = np.empty(cap + 1, np.int64)          # joint index, or -2 for an End Site
    depth = 0
    pending = -3                                 # -3: none; else a joint index, or -2
    nj = 0
    ns = 0
    closed = False
    t = 1
    while t < ntok:
        s0 = starts[t]
        head = buf[s0]
        brace = stops[t] - s0 == 1 and (head == _OPEN or head == _CLOSE)
        u = t + 1                                # the statement is tokens t..u-1
        if not brace:
            while u < ntok and lines[u] == lines[t] and not (
                    stops[u] - starts[u] == 1 and (buf[starts[u]] == _OPEN or buf[starts[u]] == _CLOSE)):
                u += 1
        if closed or (pending != -3 and not (brace and head == _OPEN)):
            return -1, -1
        if brace and head == _OPEN:
            if pending == -3:
                return -1, -1
            stack[depth] = pending
            depth += 1
            pending = -3
        elif brace:
            if depth == 0:
                return -1, -1
            depth -= 1
            j = stack[depth]
            if (j < 0 and not site_has_off[ns - 1]) or (j >= 0 and not (has_off[j] and has_chan[j])):
                return -1, -1
            closed = depth == 0
        elif _keyword(buf, s0, stops[t], _ROOT) or _keyword(buf, s0, stops[t], _JOINT):
            root = stops[t] - s0 == 4
            if (root and (depth > 0 or nj > 0)) or (not root and depth == 0) or \
                    (depth > 0 and stack[depth - 1] < 0) or u - t != 2 or nj >= cap:
                return -1, -1
            name_start[nj], name_stop[nj] = starts[t + 1], stops[t + 1]
            parents[nj] = stack[depth - 1] if depth > 0 else -1
            pending = nj
            nj += 1
        elif _keyword(buf, s0, stops[t], _END):
            if depth == 0 or stack[depth - 1] < 0 or ns >= cap:
                return -1, -1
            site_joint[ns], site_at[ns] = stack[depth - 1], nj
            ns += 1
            pending = -2
        elif _keyword(buf, s0, stops[t], _OFFSET):
            if depth == 0 or u - t != 4:
                return -1, -1
            j = stack[depth - 1]
            out = site_off[ns - 1] if j < 0 else offsets[j]
            if (j < 0 and site_has_off[ns - 1]) or (j >= 0 and has_off[j]):
                return -1, -1
            for k in range(3):
                ok, v = _decimal(buf, starts[t + 1 + k], stops[t + 1 + k], pow10)
                if not ok:
                    return -1, -1
                out[k] = v
            if j < 0:
                site_has_off[ns - 1] = True
            else:
                has_off[j] = True
        elif _keyword(buf, s0, stops[t], _CHANNELS):
            if depth == 0 or stack[depth - 1] < 0 or u - t < 2:
                return -1, -1
            j = stack[depth - 1]
            if has_chan[j]:
                return -1, -1
            count = 0
            for k in range(starts[t + 1], stops[t + 1]):
                c = buf[k]
                if c < 48 or c > 57:
                    return -1, -1
                count = count * 10 + (c - 48)
                if count > 6:
                    return -1, -1
            if u - t - 2 != count:
                return -1, -1
            layout = 0
            seen = 0                              # bit per channel code
            weight = 1
            for k in range(t + 2, u):
                code = _channel_code(buf, starts[k], stops[k])
                if code < 0 or seen & (1 << code):
                    return -1, -1
                seen |= 1 << code
                layout += (code + 1) * weight
                weight *= LAYOUT_BASE
            layouts[j] = layout
            has_chan[j] = True
        else:
            return -1, -1
        t = u
    if pending != -3 or depth > 0 or nj == 0:
        return -1, -1
    return nj, ns
