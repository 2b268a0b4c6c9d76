"""Compiled (Numba) parts of :class:`kinema.matching.search.SearchIndex`.

Everything here runs in float32 on the index's rotated, padded copy of the features:
``leaf_rows`` (L, S, P) rows of each leaf, ``boxes`` (B, 2, P) the [lo, hi] box of every
stored tree node (levels one after another, ``level_off`` (V + 1,) where each level starts;
the children of node ``n`` of level ``v`` are nodes ``n * fanouts[v] + c`` of level v + 1,
the last level's nodes are the leaves). P is the feature width rounded up to a multiple of
8 (zero padding), so every inner loop runs over contiguous, SIMD-friendly float32.

Kernels are written for the machine: no array views or array-valued calls in the hot loops
(each costs an atomic reference count in Numba), output buffers are passed in and never
grow (a full buffer stops the kernel, the caller grows it and resumes), and sums over the
feature axis may be reassociated (``fastmath`` reassoc/contract only: no NaN/inf shortcuts,
padding rows are +inf). The rounding this allows is bounded in :func:`_limit`.
"""
from __future__ import annotations

import numba
import numpy as np

_FAST = {"reassoc", "contract"}


@numba.njit(cache=True, nogil=True)
def rotate_queries(q: np.ndarray, mean: np.ndarray, basis: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Queries (Q, D) float32 -> rotated float32 (Q, width) (zero padded) and the Euclidean
    distance (Q,) float64 between each rotated query and its exact (float64) rotation,
    plus a generous bound of the float64 rotation's own rounding."""
    nq, dims = q.shape
    out = np.zeros((nq, width), np.float32)
    err = np.empty(nq, np.float64)
    c = np.empty(dims, np.float64)
    for i in range(nq):
        big = 0.0
        for j in range(dims):
            c[j] = np.float64(q[i, j]) - mean[j]
            big = max(big, abs(c[j]))
        e = 0.0
        for a in range(dims):
            y = 0.0
            for j in range(dims):
                y += c[j] * basis[j, a]
            out[i, a] = np.float32(y)
            d = y - np.float64(out[i, a])
            e += d * d
        err[i] = np.sqrt(e) + 1e-9 * (1.0 + big)
    return out, err


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
def _limit(tau: np.float32, rel: float, err: float) -> np.float32:
    """Largest float32 cost (rotated copy) a row may have and still tie or beat brute
    force's k-th cost, given ``tau``, the k-th best float32 cost found so far.

    With ``err`` >= 2.5 x the Euclidean rounding of rows and query (rotated float32 copies vs
    exact) and ``rel`` several times the float32 summation error over the features, every
    row whose brute-force float32 cost is <= the k-th one costs at most this here, and every
    node box containing such a row has a lower bound at most this.
    """
    if tau == np.inf:
        return np.float32(np.inf)
    r = (np.sqrt(np.float64(tau)) * (1.0 + rel) + err) ** 2 * (1.0 + rel)
    return np.float32(r)


@numba.njit(cache=True, nogil=True)
def _allowed_row(orig, qi, mask, clip_end, clip_stop, clip_of_row, cur, cur_clip, around, clips):
    """Exclusion rules of ``search._Rules`` for one original row and query."""
    if mask.shape[0] > 0 and not mask[orig]:
        return False
    if clip_end > 0 and orig >= clip_stop[orig] - clip_end:
        return False
    c = clip_of_row[orig]
    if cur.shape[0] > 0 and c == cur_clip[qi] and abs(orig - cur[qi]) <= around:
        return False
    for m in range(clips.shape[1]):
        if c == clips[qi, m]:
            return False
    return True


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def tree_order(qr: np.ndarray, boxes: np.ndarray, level_off: np.ndarray, fanouts: np.ndarray) -> np.ndarray:
    """Order (Q,) in which to run a batch: by the last internal node a greedy descent
    (nearest box per level) reaches, so consecutive queries share cached nodes and rows."""
    nq, width = qr.shape
    num_levels = level_off.shape[0] - 1
    n_top = level_off[1] - level_off[0]
    key = np.zeros(nq, np.int64)
    for qi in range(nq):
        node = 0
        best = np.float32(np.inf)
        for c in range(n_top):
            lb = np.float32(0.0)
            for j in range(width):
                g = max(boxes[c, 0, j] - qr[qi, j], qr[qi, j] - boxes[c, 1, j], np.float32(0.0))
                lb += g * g
            if lb < best:
                best = lb
                node = c
        for lvl in range(num_levels - 2):
            f = fanouts[lvl]
            base = level_off[lvl + 1] + node * f
            best = np.float32(np.inf)
            nxt = node * f
            for c in range(f):
                lb = np.float32(0.0)
                for j in range(width):
                    g = max(boxes[base + c, 0, j] - qr[qi, j], qr[qi, j] - boxes[base + c, 1, j], np.float32(0.0))
                    lb += g * g
                if lb < best:
                    best = lb
                    nxt = node * f + c
            node = nxt
        key[qi] = node
    return np.argsort(key, kind="mergesort")


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def knn(qr, qerr, k, order, start, boxes, level_off, fanouts, leaf_rows, row_index, rel, row_err,
        mask, clip_end, clip_stop, clip_of_row, cur, cur_clip, around, clips, out_q, out_row, out_cost):
    """Depth-first, nearest-child-first branch and bound for queries ``order[start:]``.

    Writes, per query, every allowed row whose float32 cost (rotated copy) is within
    :func:`_limit` of the query's k-th best: ``out_q`` query index, ``out_row`` original
    row, ``out_cost`` that approximate cost. Returns (candidates written, position in
    ``order`` where it stopped): it stops early when the buffers are full (that query's
    candidates are dropped; the caller grows the buffers when no query fitted and resumes
    from there).
    """
    nq, width = qr.shape
    num_leaves, size, _ = leaf_rows.shape
    num_levels = level_off.shape[0] - 1
    last = num_levels - 1
    n_top = level_off[1] - level_off[0]
    max_f = n_top
    for v in range(num_levels - 1):
        max_f = max(max_f, fanouts[v])
    cap_stack = n_top + num_levels * max_f + 1
    st_level = np.empty(cap_stack, np.int64)
    st_node = np.empty(cap_stack, np.int64)
    st_lb = np.empty(cap_stack, np.float32)
    tmp_lb = np.empty(max_f, np.float32)
    tmp_node = np.empty(max_f, np.int64)
    top_lb = np.empty(n_top, np.float32)
    top_ord = np.empty(n_top, np.int64)
    q = np.empty(width, np.float32)
    best = np.empty(k, np.float32)
    cap = out_q.shape[0]
    n_out = 0
    for pos in range(start, order.shape[0]):
        qi = order[pos]
        for j in range(width):
            q[j] = qr[qi, j]
        err = 2.5 * (row_err + qerr[qi])
        for j in range(k):
            best[j] = np.inf
        lim = np.float32(np.inf)
        first = n_out
        # the top level, pushed farthest first so the nearest is popped first
        for c in range(n_top):
            lb = np.float32(0.0)
            for j in range(width):
                g = max(boxes[c, 0, j] - q[j], q[j] - boxes[c, 1, j], np.float32(0.0))
                lb += g * g
            top_lb[c] = lb
            j = c
            while j > 0 and top_lb[top_ord[j - 1]] > lb:
                top_ord[j] = top_ord[j - 1]
                j -= 1
            top_ord[j] = c
        sp = 0
        for j in range(n_top - 1, -1, -1):
            st_lb[sp] = top_lb[top_ord[j]]
            st_node[sp] = top_ord[j]
            st_level[sp] = 0
            sp += 1
        full = False
        while sp > 0:
            sp -= 1
            if st_lb[sp] > lim:
                continue
            lvl = st_level[sp]
            node = st_node[sp]
            if lvl == last:  # a leaf: cost its rows
                if node >= num_leaves:
                    continue
                for s in range(size):
                    cost = np.float32(0.0)
                    for j in range(width):
                        d = leaf_rows[node, s, j] - q[j]
                        cost += d * d
                    if cost > lim:
                        continue
                    orig = row_index[node, s]
                    if orig < 0 or not _allowed_row(orig, qi, mask, clip_end, clip_stop, clip_of_row, cur,
                                                    cur_clip, around, clips):
                        continue
                    if n_out == cap:
                        full = True
                        break
                    out_q[n_out] = qi
                    out_row[n_out] = orig
                    out_cost[n_out] = cost
                    n_out += 1
                    if cost < best[k - 1]:
                        j = k - 1
                        while j > 0 and best[j - 1] > cost:
                            best[j] = best[j - 1]
                            j -= 1
                        best[j] = cost
                        lim = _limit(best[k - 1], rel, err)
                if full:
                    break
            else:  # bound the children, push those in reach, nearest last
                f = fanouts[lvl]
                base = level_off[lvl + 1] + node * f
                n = 0
                for c in range(f):
                    lb = np.float32(0.0)
                    for j in range(width):
                        g = max(boxes[base + c, 0, j] - q[j], q[j] - boxes[base + c, 1, j], np.float32(0.0))
                        lb += g * g
                    if lb <= lim:
                        j = n
                        while j > 0 and tmp_lb[j - 1] < lb:
                            tmp_lb[j] = tmp_lb[j - 1]
                            tmp_node[j] = tmp_node[j - 1]
                            j -= 1
                        tmp_lb[j] = lb
                        tmp_node[j] = node * f + c
                        n += 1
                for j in range(n):
                    st_level[sp] = lvl + 1
                    st_node[sp] = tmp_node[j]
                    st_lb[sp] = tmp_lb[j]
                    sp += 1
        if full:
            return first, pos
        # keep this query's candidates within its final limit
        w = first
        for j in range(first, n_out):
            if out_cost[j] <= lim:
                out_q[w] = out_q[j]
                out_row[w] = out_row[j]
                out_cost[w] = out_cost[j]
                w += 1
        n_out = w
    return n_out, order.shape[0]
