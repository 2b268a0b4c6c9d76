"""Compiled (Numba) parts of :class:`kinema.matching.search.SearchIndex`.

Layouts (all float32, flat, built by ``SearchIndex``; D = feature count):

* ``leaf_rows`` (L * D * P,): leaf ``l`` holds tree rows ``l * S .. l * S + S - 1`` (S =
  leaf size) column by column: value ``j`` of lane ``s`` at ``(l * D + j) * P + s``. P is S
  rounded up to a multiple of :data:`LANES`; lanes past S (and rows past the end of the
  data) are +inf with ``row_index`` -1. These are the caller's features (not rotated), so the
  cost of a row is computed here exactly as :func:`kinema.matching.search.brute_force`
  computes it: ``sum_j (x_j - q_j)^2`` in float32, one rounding per product and per
  addition, left to right over j.
* ``boxes``: the [lo, hi] bounding box, in the principal-axes frame (``mean``, ``basis``),
  of every stored tree node. Level ``v`` starts at ``level_off[v]``; its nodes come in
  groups (group ``g`` = the children of node ``g`` of level v - 1; level 0 is one group),
  each group ``2 * D * level_lanes[v]`` floats: lo of dimension ``j`` for child ``c`` at
  ``(j * F) + c``, then hi likewise (F = ``level_lanes[v]``, the fanout rounded up to a
  multiple of LANES; padding children are empty boxes lo = +inf, hi = -inf).

Why column-major lanes: the inner loops run over LANES independent rows (or children)
with j outside, so the compiler vectorises across rows without reassociating any sum:
the costs stay bit-identical to NumPy's sequential float32 sums and no ``fastmath`` is
needed (none is used in this module: LLVM could otherwise fuse multiply-adds or reorder
the sums). No array views or array-valued calls in the hot loops (each costs an atomic
reference count in Numba); scratch arrays are allocated once per call.

Exactness: the boxes bound float32 rotations of the rows, so a box's distance is compared
with an inflated k-th cost (:func:`_limit`) that covers the rotations' rounding (measured
per index and per query) and float32 summation error: no box that could hold a row tying
or beating the k-th cost is skipped, and every row's cost is the exact brute-force one.
"""
from __future__ import annotations

import contextlib

import numba
import numba.core.config
import numpy as np
from llvmlite import ir
from numba import types as nt
from numba.extending import intrinsic

LANES = 8  # rows or children costed together: one 256-bit float32 vector
NO_ROW = np.int64(1) << 62  # sorts after every real row of an empty result slot


@numba.njit(cache=True, nogil=True)
def segment_spread(x: np.ndarray, size: int, samples: int = 256) -> np.ndarray:
    """Per-column quartile spread (S, D) of consecutive row segments of ``size`` rows of ``x``
    (N, D) (the last one partial): upper minus lower quartile, estimated from at most
    ``samples`` evenly strided rows per segment (it only picks split axes)."""
    n, dims = x.shape
    segs = -(-n // size)
    out = np.empty((segs, dims), np.float32)
    buf = np.empty(min(size, samples), np.float32)
    for g in range(segs):
        lo = g * size
        hi = min(lo + size, n)
        stride = -(-(hi - lo) // samples)
        m = -(-(hi - lo) // stride)
        a, b = m // 4, m - 1 - m // 4
        for j in range(dims):
            for i in range(m):
                buf[i] = x[lo + i * stride, j]
            _select(buf, 0, m, a)
            _select(buf, a, m, b)
            out[g, j] = buf[b] - buf[a]
    return out


@numba.njit(cache=True, nogil=True)
def _select(buf: np.ndarray, lo: int, hi: int, kth: int) -> None:
    """Reorder ``buf[lo:hi]`` so that ``buf[kth]`` holds the value a sort would put there,
    smaller-or-equal values before it and greater-or-equal after (quickselect)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        a, b, c = buf[lo], buf[mid], buf[hi - 1]
        pivot = max(min(a, b), min(max(a, b), c))  # median of three
        i, j = lo, hi - 1
        while i <= j:
            while buf[i] < pivot:
                i += 1
            while buf[j] > pivot:
                j -= 1
            if i <= j:
                buf[i], buf[j] = buf[j], buf[i]
                i += 1
                j -= 1
        if kth <= j:
            hi = j + 1
        elif kth >= i:
            lo = i
        else:
            return


@numba.njit(cache=True, nogil=True)
def rotate_rows(f: np.ndarray, mean: np.ndarray, basis: np.ndarray, out: np.ndarray) -> tuple[bool, float]:
    """``out`` (N, D) float32 = (f - mean) @ basis for float32 rows ``f`` (N, D), each row in
    float64 (no full-size float64 temporary). Returns (all rows finite, the largest
    Euclidean distance between a float32 rotated row and its float64 rotation plus a bound
    of the float64 arithmetic's own rounding)."""
    n, dims = f.shape
    c = np.empty(dims, np.float64)
    y = np.empty(dims, np.float64)
    worst = 0.0
    for i in range(n):
        big = 0.0
        for j in range(dims):
            v = f[i, j]
            if not np.isfinite(v):
                return False, 0.0
            c[j] = np.float64(v) - mean[j]
            big = max(big, abs(c[j]))
        for a in range(dims):
            y[a] = 0.0
        for j in range(dims):  # j outside: each sum over j runs in order, vectorised across a
            cj = c[j]
            for a in range(dims):
                y[a] += cj * basis[j, a]
        e = 0.0
        for a in range(dims):
            out[i, a] = np.float32(y[a])
            d = y[a] - np.float64(out[i, a])
            e += d * d
        worst = max(worst, np.sqrt(e) + 1e-9 * (1.0 + big))
    return True, worst


def sorting_network(size: int) -> np.ndarray:
    """(K, 2) int64 compare-exchange pairs (i < j) of Batcher's odd-even merge sort over
    ``size`` inputs rounded up to a power of two: applied in order (smaller value to i),
    they sort any input."""
    n = 1
    while n < max(2, size):
        n *= 2
    pairs = []
    p = 1
    while p < n:
        k = p
        while k >= 1:
            for j in range(k % p, n - k, 2 * k):
                for i in range(min(k, n - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return np.asarray(pairs, np.int64).reshape(-1, 2)


@numba.njit(cache=True, nogil=True)
def _network_width(net: np.ndarray, samples: int) -> int:
    """Rows the network sorts (its largest index + 1), at least ``samples``."""
    width = samples
    for k in range(net.shape[0]):
        width = max(width, net[k, 1] + 1)
    return width


@numba.njit(cache=True, nogil=True)
def _widest_quartiles(smat: np.ndarray, cnt: int, net: np.ndarray) -> int:
    """The column of largest quartile spread (upper minus lower quartile; the first of
    equals) of the first ``cnt`` rows of ``smat`` (W, D): the rows past ``cnt`` are set to
    +inf and the sorting network ``net`` sorts every column at once (so the quartiles are
    the values a quickselect per column finds)."""
    width, dims = smat.shape
    for i in range(cnt, width):
        for j in range(dims):
            smat[i, j] = np.inf
    for k in range(net.shape[0]):
        a, b = net[k, 0], net[k, 1]
        for j in range(dims):  # across columns: vectorised
            x, y = smat[a, j], smat[b, j]
            smat[a, j] = x if x < y else y
            smat[b, j] = y if x < y else x
    qa, qb = cnt // 4, cnt - 1 - cnt // 4
    axis = 0
    best = np.float32(-1.0)
    for j in range(dims):
        spread = smat[qb, j] - smat[qa, j]
        if spread > best:
            best = spread
            axis = j
    return axis


@numba.njit(cache=True, nogil=True)
def _split_level(src, dst, ps, pd, lo, hi, span, samples, keys, smat, net):
    """One tree level over rows [lo, hi) (a whole number of nodes of ``span`` rows, the
    last one possibly partial): each node's rows stream from ``src``/``ps`` to
    ``dst``/``pd``, split at its median (see :func:`build_tree`)."""
    dims = src.shape[1]
    half = span >> 1
    for s in range(lo, hi, span):
        e = min(s + span, hi)
        m = e - s
        if m <= half:  # nothing for the right child: the rows move as they are
            for i in range(s, e):
                for j in range(dims):
                    dst[i, j] = src[i, j]
                pd[i] = ps[i]
            continue
        stride = -(-m // samples)
        cnt = -(-m // stride)
        for i in range(cnt):
            for j in range(dims):
                smat[i, j] = src[s + i * stride, j]
        axis = _widest_quartiles(smat, cnt, net)
        for i in range(m):
            keys[i] = src[s + i, axis]
        _select(keys, 0, m, half - 1)
        pivot = keys[half - 1]
        below = 0  # after the select every value < pivot sits before position half - 1
        for i in range(half - 1):
            if keys[i] < pivot:
                below += 1
        ties_left = half - below
        left, right = s, s + half
        for i in range(s, e):
            v = src[i, axis]
            if v < pivot or (v == pivot and ties_left > 0):
                if v == pivot:
                    ties_left -= 1
                w = left
                left += 1
            else:
                w = right
                right += 1
            for j in range(dims):
                dst[w, j] = src[i, j]
            pd[w] = ps[i]


@numba.njit(cache=True, nogil=True)
def _split_level_index(src, base, cur, nxt, m, span, samples, keys, smat, net):
    """:func:`_split_level` for the rows ``src[base + cur[0:m]]`` of one cache block, moving
    only their block-local indices (``cur`` to ``nxt``): the same sampled axes, medians and
    stable partition, so the same order as streaming the rows themselves."""
    dims = src.shape[1]
    half = span >> 1
    for s in range(0, m, span):
        e = min(s + span, m)
        cnt_node = e - s
        if cnt_node <= half:
            for i in range(s, e):
                nxt[i] = cur[i]
            continue
        stride = -(-cnt_node // samples)
        cnt = -(-cnt_node // stride)
        for i in range(cnt):
            r = base + cur[s + i * stride]
            for j in range(dims):
                smat[i, j] = src[r, j]
        axis = _widest_quartiles(smat, cnt, net)
        for i in range(cnt_node):
            keys[i] = src[base + cur[s + i], axis]
        _select(keys, 0, cnt_node, half - 1)
        pivot = keys[half - 1]
        below = 0
        for i in range(half - 1):
            if keys[i] < pivot:
                below += 1
        ties_left = half - below
        left, right = s, s + half
        for i in range(s, e):
            r = cur[i]
            v = src[base + r, axis]
            if v < pivot or (v == pivot and ties_left > 0):
                if v == pivot:
                    ties_left -= 1
                nxt[left] = r
                left += 1
            else:
                nxt[right] = r
                right += 1


@numba.njit(cache=True, nogil=True)
def _finish_block(src, ps, lo, hi, levels, leaf_size, samples, ia, ib, keys, smat, net, perm, box_lo, box_hi):
    """The last ``levels`` levels of the rows [lo, hi) of ``src`` (one cache block, ``lo`` a
    multiple of its span) by index, then the block's part of the result: ``perm[lo:hi]``
    (original row numbers in tree order, from ``ps``) and the exact [lo, hi] box of every
    leaf (its rows' per-column min and max), read through the indices while in cache."""
    dims = src.shape[1]
    m = hi - lo
    cur, nxt = ia, ib
    for i in range(m):
        cur[i] = i
    for v in range(levels):
        _split_level_index(src, lo, cur, nxt, m, (1 << (levels - v)) * leaf_size, samples, keys, smat, net)
        cur, nxt = nxt, cur
    for i in range(m):
        perm[lo + i] = ps[lo + cur[i]]
    for s in range(0, m, leaf_size):
        leaf = (lo + s) // leaf_size
        e = min(s + leaf_size, m)
        for j in range(dims):
            box_lo[leaf, j] = np.inf
            box_hi[leaf, j] = -np.inf
        for i in range(s, e):
            r = lo + cur[i]
            for j in range(dims):
                x = src[r, j]
                if x < box_lo[leaf, j]:
                    box_lo[leaf, j] = x
                if x > box_hi[leaf, j]:
                    box_hi[leaf, j] = x


# Rows per block finished depth-first in build_tree: 4096 x 27 float32 rows (~0.4 MB) and
# their indices stay in the core's L2 cache while the block's remaining levels run.
_BLOCK_ROWS = 4096


@numba.njit(cache=True, nogil=True)
def build_tree(a: np.ndarray, b: np.ndarray, pa: np.ndarray, pb: np.ndarray, depth: int, leaf_size: int,
               samples: int, net: np.ndarray, box_lo: np.ndarray, box_hi: np.ndarray) -> int:
    """Order rows into a complete binary tree of median splits over leaf blocks; leaf boxes.

    ``a`` (N, D) rotated rows and ``pa`` (N,) their original row numbers; ``b``/``pb`` are
    scratch of the same shape. Levels whose nodes are larger than about
    :data:`_BLOCK_ROWS` rows stream the rows from one pair to the other (a stable
    partition per node around its median), so no sort and no gather is needed; then each
    block of rows runs all its remaining levels on block-local indices while it is in cache
    and writes its part of the order and the box (per-column min and max, ``box_lo`` and
    ``box_hi``, (leaves, D)) of each of its leaves. Returns 0 when the order (original row
    numbers in tree order) is in ``pa``, 1 when in ``pb``.

    Node i at depth d covers leaves [i * 2^(depth-d), (i+1) * 2^(depth-d)) (clipped to the
    data), so leaf j is rows [j * leaf_size, (j+1) * leaf_size) of the order: a full node
    sends its ``span / 2`` rows of smallest value along its split axis to the left child,
    the rest to the right; ties at the median are split by position. The split axis is the
    one of largest quartile spread (upper minus lower quartile, from at most ``samples``
    evenly strided rows of the node): outlying rows do not pick the axis, and on the biped
    benchmark a query needs ~30% fewer leaves than with the widest axis. The quartiles of
    all D columns come from one sorting network ``net`` (:func:`sorting_network` of at
    least ``samples`` inputs) run on the sampled rows, vectorised across the columns (a
    quickselect per column made the split axes most of the build's time).
    """
    n, dims = a.shape
    keys = np.empty(n, np.float32)
    smat = np.empty((_network_width(net, samples), dims), np.float32)
    src, dst, ps, pd = a, b, pa, pb
    flips = 0
    d = 0
    while d < depth and (1 << (depth - d)) * leaf_size > _BLOCK_ROWS:
        _split_level(src, dst, ps, pd, 0, n, (1 << (depth - d)) * leaf_size, samples, keys, smat, net)
        src, dst = dst, src
        ps, pd = pd, ps
        flips ^= 1
        d += 1
    block = (1 << (depth - d)) * leaf_size
    ia = np.empty(min(block, n), np.int64)
    ib = np.empty(min(block, n), np.int64)
    for lo in range(0, n, block):
        _finish_block(src, ps, lo, min(lo + block, n), depth - d, leaf_size, samples, ia, ib, keys, smat, net, pd,
                      box_lo, box_hi)
    return flips ^ 1  # the order went to pd


@numba.njit(cache=True, nogil=True)
def fill_leaves(f: np.ndarray, perm: np.ndarray, leaf_size: int, lanes: int, out: np.ndarray,
                row_index: np.ndarray) -> None:
    """Write rows ``f[perm]`` (the caller's float32 features in tree order) into the
    column-major leaf layout ``out`` (see the module docstring); empty lanes +inf, -1."""
    n, dims = f.shape
    num_leaves = row_index.shape[0] // lanes
    for leaf in range(num_leaves):
        for s in range(lanes):
            r = leaf * leaf_size + s
            base = leaf * dims * lanes + s
            if s < leaf_size and r < n:
                src = perm[r]
                row_index[leaf * lanes + s] = src
                for j in range(dims):
                    out[base + j * lanes] = f[src, j]
            else:
                row_index[leaf * lanes + s] = -1
                for j in range(dims):
                    out[base + j * lanes] = np.inf


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Ask the CPU to start loading the cache line of ``arr[idx]`` (LLVM ``prefetch``, read,
    high locality): a search knows which leaves and boxes it visits next (the top of its
    stack) long before it reads them, and on an index larger than the cache those loads,
    not the arithmetic, are most of a query's time."""
    if not isinstance(arr, nt.Array):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], ir.FunctionType(
            ir.VoidType(), [i8p, i32, i32, i32]))
        builder.call(fn, [builder.bitcast(builder.gep(data, [args[1]]), i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()
    return nt.void(arr, idx), codegen


@numba.njit(cache=True, nogil=True)
def _limit(tau: np.float32, rel: float, err: float) -> np.float32:
    """Largest float32 box distance (principal-axes frame) at which a box may still hold a
    row that ties or beats the exact k-th cost ``tau``.

    A row's exact cost ``tau`` is within ``rel`` of its real squared distance r^2 (float32
    summation), the rotated float32 row and query lie within ``err`` (Euclidean) of their
    exact rotations, so the row's box is at real distance at most r + err, and its float32
    box distance at most that squared times (1 + rel).
    """
    if tau == np.inf:
        return np.float32(np.inf)
    r = (np.sqrt(np.float64(tau)) * (1.0 + rel) + err) ** 2 * (1.0 + rel)
    return np.float32(r)


@numba.njit(cache=True, nogil=True, inline="always")
def _allowed_row(orig, qi, mask, clip_end, clip_stop, clip_of_row, cur_row, around, clips):
    """Exclusion rules of ``search._Rules`` for one original row and query ``qi``."""
    if mask.shape[0] > 0 and not mask[orig]:
        return False
    if clip_end > 0 and orig >= clip_stop[orig] - clip_end:
        return False
    c = clip_of_row[orig]
    if cur_row >= 0 and c == clip_of_row[cur_row] and abs(orig - cur_row) <= around:
        return False
    ci = qi if clips.shape[0] > 1 else 0
    for m in range(clips.shape[1]):
        if c == clips[ci, m]:
            return False
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _cost8(rows, base, stride, q, dims):
    """Exact float32 costs of the LANES rows (lanes) at ``rows[base + j * stride + c]`` to
    ``q``: one rounding per product and per addition, j in order. Unrolled into LANES
    scalar chains on purpose: the compiler packs them into one vector per step (a loop
    over lanes is not vectorised: too short for the widest vectors, and it may alias)."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    for j in range(dims):
        qj = q[j]
        p = np.uint64(base + j * stride)  # unsigned: no negative-index wrap to block the vectoriser
        d0 = rows[p + np.uint64(0)] - qj
        d1 = rows[p + np.uint64(1)] - qj
        d2 = rows[p + np.uint64(2)] - qj
        d3 = rows[p + np.uint64(3)] - qj
        d4 = rows[p + np.uint64(4)] - qj
        d5 = rows[p + np.uint64(5)] - qj
        d6 = rows[p + np.uint64(6)] - qj
        d7 = rows[p + np.uint64(7)] - qj
        a0 += d0 * d0
        a1 += d1 * d1
        a2 += d2 * d2
        a3 += d3 * d3
        a4 += d4 * d4
        a5 += d5 * d5
        a6 += d6 * d6
        a7 += d7 * d7
    return a0, a1, a2, a3, a4, a5, a6, a7


@numba.njit(cache=True, nogil=True, inline="always")
def _bound8(boxes, base, stride, hi_off, qr, dims):
    """Squared float32 distances of ``qr`` to the LANES boxes (lanes) whose lo of dimension j
    is ``boxes[base + j * stride + c]`` and hi ``hi_off`` further (unrolled like :func:`_cost8`)."""
    zero = np.float32(0.0)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
    for j in range(dims):
        qj = qr[j]
        p = np.uint64(base + j * stride)  # unsigned: no negative-index wrap to block the vectoriser
        ph = np.uint64(base + hi_off + j * stride)
        g0 = max(max(boxes[p + np.uint64(0)] - qj, qj - boxes[ph + np.uint64(0)]), zero)
        g1 = max(max(boxes[p + np.uint64(1)] - qj, qj - boxes[ph + np.uint64(1)]), zero)
        g2 = max(max(boxes[p + np.uint64(2)] - qj, qj - boxes[ph + np.uint64(2)]), zero)
        g3 = max(max(boxes[p + np.uint64(3)] - qj, qj - boxes[ph + np.uint64(3)]), zero)
        g4 = max(max(boxes[p + np.uint64(4)] - qj, qj - boxes[ph + np.uint64(4)]), zero)
        g5 = max(max(boxes[p + np.uint64(5)] - qj, qj - boxes[ph + np.uint64(5)]), zero)
        g6 = max(max(boxes[p + np.uint64(6)] - qj, qj - boxes[ph + np.uint64(6)]), zero)
        g7 = max(max(boxes[p + np.uint64(7)] - qj, qj - boxes[ph + np.uint64(7)]), zero)
        a0 += g0 * g0
        a1 += g1 * g1
        a2 += g2 * g2
        a3 += g3 * g3
        a4 += g4 * g4
        a5 += g5 * g5
        a6 += g6 * g6
        a7 += g7 * g7
    return a0, a1, a2, a3, a4, a5, a6, a7


@numba.njit(cache=True, nogil=True, inline="always")
def _group_bounds(boxes, base, lanes, dims, qr, out):
    """Squared float32 distance of query ``qr`` (principal-axes frame) to each of the
    ``lanes`` boxes of the group at ``boxes[base:]`` (see the module docstring), in ``out``."""
    hi_off = dims * lanes
    for blk in range(0, lanes, LANES):
        (out[blk], out[blk + 1], out[blk + 2], out[blk + 3], out[blk + 4], out[blk + 5], out[blk + 6],
         out[blk + 7]) = _bound8(boxes, base + blk, lanes, hi_off, qr, dims)


def _knn(qs, order, start, stop, k, mask, clip_end, cur, cur0, around, clips, out_idx, out_cost, mean, basis, boxes,
         level_off, level_lanes, fanouts, leaf_rows, row_index, leaf_lanes, rel, row_err, clip_stop,
         clip_of_row) -> int:
    """Exact k nearest rows for queries ``order[start:stop]`` of ``qs`` (Q, D) float32.

    Depth-first branch and bound, nearer child first; a node is skipped when its box lies
    beyond :func:`_limit` of the query's current k-th cost. Leaf rows are costed exactly
    and ranked by (cost, original row), so the k kept are brute force's, ties included.
    Exclusions are tested per row (excluded rows never tighten the bound); ``cur`` (Q,)
    the current row per query (or empty: ``cur0`` for all; -1 none), ``around`` < 0
    disables it; ``clips`` (1 or Q, M) whole clips to skip.

    Writes ``out_idx`` (Q, k) original rows (-1 past the allowed rows) and ``out_cost``
    (Q, k) costs (inf there). Returns -1 if a query is not finite (nothing written for it
    or after it), else 0.
    """
    dims = qs.shape[1]
    num_levels = level_off.shape[0]
    last = num_levels - 1
    num_leaves = row_index.shape[0] // leaf_lanes
    n_top = level_lanes[0]
    max_f = 0
    for v in range(num_levels):
        max_f = max(max_f, level_lanes[v])
    cap_stack = n_top + num_levels * max_f + 1
    st_level = np.empty(cap_stack, np.int64)
    st_node = np.empty(cap_stack, np.int64)
    st_lb = np.empty(cap_stack, np.float32)
    lbs = np.empty(max(max_f, leaf_lanes), np.float32)
    srt = np.empty(max_f, np.int64)
    cen = np.empty(dims, np.float64)
    yq = np.empty(dims, np.float64)
    qr = np.empty(dims, np.float32)
    q = np.empty(dims, np.float32)
    bc = np.empty(k, np.float32)
    br = np.empty(k, np.int64)
    for pos in range(start, stop):
        qi = order[pos]
        # the query in the principal-axes frame (float64, then float32), with its rounding
        big = 0.0
        for j in range(dims):
            q[j] = qs[qi, j]
            if not np.isfinite(q[j]):
                return -1
            cen[j] = np.float64(q[j]) - mean[j]
            big = max(big, abs(cen[j]))
        for a in range(dims):
            yq[a] = 0.0
        for j in range(dims):  # j outside: the sums over j vectorise across a, in order
            cj = cen[j]
            for a in range(dims):
                yq[a] += cj * basis[j, a]
        e2 = 0.0
        for a in range(dims):
            qr[a] = np.float32(yq[a])
            dd = yq[a] - np.float64(qr[a])
            e2 += dd * dd
        err = 2.5 * (row_err + np.sqrt(e2) + 1e-9 * (1.0 + big))
        cur_row = cur[qi] if cur.shape[0] > 0 else cur0
        if around < 0:
            cur_row = -1
        for j in range(k):
            bc[j] = np.inf
            br[j] = NO_ROW
        lim = np.float32(np.inf)
        # the top level: one group, pushed farthest first so the nearest is popped first
        _group_bounds(boxes, level_off[0], n_top, dims, qr, lbs)
        n = 0
        for c in range(n_top):
            lb = lbs[c]
            if lb == np.inf:
                continue
            j = n
            while j > 0 and lbs[srt[j - 1]] < lb:
                srt[j] = srt[j - 1]
                j -= 1
            srt[j] = c
            n += 1
        sp = 0
        for j in range(n):
            st_lb[sp] = lbs[srt[j]]
            st_node[sp] = srt[j]
            st_level[sp] = 0
            sp += 1
        while sp > 0:
            sp -= 1
            if st_lb[sp] > lim:
                continue
            lvl = st_level[sp]
            node = st_node[sp]
            if lvl == last:  # a leaf: exact costs of its rows, LANES at a time
                if node >= num_leaves:
                    continue
                for blk in range(0, leaf_lanes, LANES):
                    base = (node * dims) * leaf_lanes + blk
                    (lbs[0], lbs[1], lbs[2], lbs[3], lbs[4], lbs[5], lbs[6],
                     lbs[7]) = _cost8(leaf_rows, base, leaf_lanes, q, dims)
                    for c in range(LANES):
                        cost = lbs[c]
                        if cost > bc[k - 1]:
                            continue
                        orig = row_index[node * leaf_lanes + blk + c]
                        if orig < 0 or (cost == bc[k - 1] and orig > br[k - 1]):
                            continue
                        if not _allowed_row(orig, qi, mask, clip_end, clip_stop, clip_of_row, cur_row, around,
                                            clips):
                            continue
                        j = k - 1
                        while j > 0 and (bc[j - 1] > cost or (bc[j - 1] == cost and br[j - 1] > orig)):
                            bc[j] = bc[j - 1]
                            br[j] = br[j - 1]
                            j -= 1
                        bc[j] = cost
                        br[j] = orig
                        lim = _limit(bc[k - 1], rel, err)
            else:  # bound the children, push those in reach, nearest last
                f = fanouts[lvl]
                lanes = level_lanes[lvl + 1]
                _group_bounds(boxes, level_off[lvl + 1] + node * (2 * dims * lanes), lanes, dims, qr, lbs)
                n = 0
                for c in range(f):
                    lb = lbs[c]
                    if lb <= lim:
                        j = n
                        while j > 0 and lbs[srt[j - 1]] < lb:
                            srt[j] = srt[j - 1]
                            j -= 1
                        srt[j] = c
                        n += 1
                for j in range(n):
                    st_level[sp] = lvl + 1
                    st_node[sp] = node * f + srt[j]
                    st_lb[sp] = lbs[srt[j]]
                    sp += 1
                # start loading what those children will read, in the order they are taken
                if lvl + 1 == last:
                    for j in range(n - 1, -1, -1):
                        child = node * f + srt[j]
                        if child < num_leaves:
                            base = child * dims * leaf_lanes
                            for t in range(0, dims * leaf_lanes, 16):  # 16 floats: one 64-byte line
                                _prefetch(leaf_rows, base + t)
                else:
                    size = 2 * dims * level_lanes[lvl + 2]
                    for j in range(n - 1, -1, -1):
                        base = level_off[lvl + 2] + (node * f + srt[j]) * size
                        for t in range(0, size, 16):
                            _prefetch(boxes, base + t)
        for j in range(k):
            if br[j] == NO_ROW:
                out_idx[qi, j] = -1
                out_cost[qi, j] = np.inf
            else:
                out_idx[qi, j] = br[j]
                out_cost[qi, j] = bc[j]
    return 0


def _tree_order(qs, mean, basis, boxes, level_off, level_lanes, fanouts) -> np.ndarray:
    """Order (Q,) in which to run a batch: by the last internal node a greedy descent
    (nearest box per level) reaches, so consecutive queries share cached nodes and rows."""
    nq, dims = qs.shape
    num_levels = level_off.shape[0]
    max_f = 0
    for v in range(num_levels):
        max_f = max(max_f, level_lanes[v])
    lbs = np.empty(max_f, np.float32)
    qr = np.empty(dims, np.float32)
    key = np.zeros(nq, np.int64)
    for qi in range(nq):
        for a in range(dims):
            y = 0.0
            for j in range(dims):
                y += (np.float64(qs[qi, j]) - mean[j]) * basis[j, a]
            qr[a] = np.float32(y)
        _group_bounds(boxes, level_off[0], level_lanes[0], dims, qr, lbs)
        node = 0
        for c in range(level_lanes[0]):
            if lbs[c] < lbs[node]:
                node = c
        for lvl in range(num_levels - 2):
            f = fanouts[lvl]
            lanes = level_lanes[lvl + 1]
            _group_bounds(boxes, level_off[lvl + 1] + node * (2 * dims * lanes), lanes, dims, qr, lbs)
            c_best = 0
            for c in range(f):
                if lbs[c] < lbs[c_best]:
                    c_best = c
            node = node * f + c_best
        key[qi] = node
    return np.argsort(key, kind="mergesort")


@contextlib.contextmanager
def _slp_vectorize():
    """Numba leaves LLVM's SLP (straight-line) vectoriser off by default; the unrolled lanes
    of :func:`_cost8` and :func:`_bound8` need it to become vector instructions (about 20x
    faster leaf costs here). It is switched on only while this module's search kernels
    compile (eagerly, at import, or loaded from Numba's cache), and restored after."""
    old = numba.core.config.SLP_VECTORIZE
    numba.core.config.SLP_VECTORIZE = 1
    try:
        yield
    finally:
        numba.core.config.SLP_VECTORIZE = old


_f32_1d, _f32_2d = nt.float32[::1], nt.float32[:, ::1]
_f64_1d, _f64_2d = nt.float64[::1], nt.float64[:, ::1]
_i64_1d, _i64_2d = nt.int64[::1], nt.int64[:, ::1]
_i64, _f64 = nt.int64, nt.float64

with _slp_vectorize():
    # explicit signatures: compiled here, inside the switch (and never re-specialised
    # later without it); search.py passes exactly these types
    knn = numba.njit(nt.int64(_f32_2d, _i64_1d, _i64, _i64, _i64,  # queries, which ones, k
                              nt.boolean[::1], _i64, _i64_1d, _i64, _i64, _i64_2d,  # exclusions
                              _i64_2d, _f32_2d,  # outputs
                              _f64_1d, _f64_2d, _f32_1d, _i64_1d, _i64_1d, _i64_1d, _f32_1d, _i64_1d, _i64, _f64,
                              _f64, _i64_1d, _i64_1d),  # the index (SearchIndex._tree)
                     cache=True, nogil=True)(_knn)
    tree_order = numba.njit(_i64_1d(_f32_2d, _f64_1d, _f64_2d, _f32_1d, _i64_1d, _i64_1d, _i64_1d),
                            cache=True, nogil=True)(_tree_order)
