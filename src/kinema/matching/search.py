"""Exact k-nearest-neighbour search in a motion-matching feature space.

Cost is the squared Euclidean distance between a query and a database row (both already
normalised). :class:`SearchIndex` returns exactly what :func:`brute_force` returns (same
rows, same costs, ties broken by the lower row index) but visits only a small part of
the database:

* **Tree.** Rows are reordered by recursive median splits (along the widest axis of a
  PCA-rotated copy of the features) into a complete binary tree whose leaves are blocks
  of ``leaf_size`` consecutive rows. Every ``log2(fanout)``-th level is kept, each node
  with the axis-aligned bounding box (in the rotated space) of its rows. The squared
  distance from a query to a box is a lower bound of the cost of every row inside it
  (the rotation preserves distances; a small relative slack absorbs float rounding).
* **Compiled branch and bound** (Numba, one core). Per query, a depth-first descent that
  visits the nearer child first; a node is skipped when its box lies farther than the
  query's current k-th best allowed cost (with a small slack). Rows are first checked in
  the rotated space (a float32 copy, its rounding bounded) with early exit over the
  leading axes, then costed exactly in float64 in the original space. Exclusions are
  tested per row, so excluded rows never tighten the bound.
* **Exact final costs.** The kernel returns every allowed row within a small margin of
  the k-th best float64 cost (the margin is far above float32 rounding); their costs are
  recomputed with the same float32 kernel as :func:`brute_force` and the k best kept
  (ties by row index), so the result is bit-identical to brute force.

Queries of a batch run one after another inside one compiled call (no Python per query).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numba
import numpy as np

from kinema.errors import KinemaError

# Pruning keeps a node unless lower_bound > tau * (1 + _REL_SLACK) + _ABS_SLACK. The bound is
# computed in a rotated frame (boxes stored in float32, rounded outwards), the costs in the
# original frame: the slack covers their rounding differences (orders of magnitude above
# the float error, far below any distance that matters for pruning).
_REL_SLACK = 1e-4
_ABS_SLACK = 1e-6


@dataclass(frozen=True)
class Exclusion:
    """Rows a search must not return.

    Attributes:
        current: database row of the frame playing now, per query ``(Q,)`` or one int for
            all; ``-1`` (or None) means none. Together with ``around``.
        around: skip rows of the current row's clip with ``|row - current| <= around``
            (0 skips only the current row itself; negative disables).
        clip_end: skip the last ``clip_end`` rows of every clip (their future runs out).
        clips: whole clips to skip: a sequence of clip ids for every query, or ``(Q, M)``
            ints per query (pad with -1), e.g. a training query's own clip and its mirror.
        mask: ``(N,)`` bool, False where a row may never be returned.
    """

    current: int | np.ndarray | None = None
    around: int = 0
    clip_end: int = 0
    clips: Sequence[int] | np.ndarray | None = None
    mask: np.ndarray | None = None


class _Rules:
    """An :class:`Exclusion` resolved against one database and one batch of queries."""

    def __init__(self, exclude: Exclusion | None, num_queries: int, clip_of_row: np.ndarray,
                 clip_stop_of_row: np.ndarray, num_rows: int):
        e = exclude or Exclusion()
        self.clip_of_row = clip_of_row
        self.mask = None
        if e.mask is not None:
            mask = np.asarray(e.mask)
            if mask.shape != (num_rows,) or mask.dtype != bool:
                raise KinemaError(f"exclusion mask must be bool of shape ({num_rows},), got {mask.dtype} {mask.shape}")
            self.mask = mask
        self.clip_stop_of_row = clip_stop_of_row
        self.clip_end = max(0, int(e.clip_end))
        self.current = None
        if e.current is not None and e.around >= 0:
            cur = np.asarray(e.current, np.int64)
            if cur.ndim > 1 or (cur.ndim == 1 and len(cur) != num_queries):
                raise KinemaError(f"exclusion current must be one int or (Q={num_queries},), got {cur.shape}")
            cur = np.array(np.broadcast_to(cur, (num_queries,)))  # own contiguous copy
            top = cur.max(initial=-1)
            if top >= num_rows:
                raise KinemaError(f"exclusion current row out of range (database has {num_rows} rows)")
            if top >= 0:
                self.current = cur
                self.around = int(e.around)
                self.current_clip = clip_of_row[np.maximum(cur, 0)]
                self.current_clip[cur < 0] = -1
        self.clips = None
        if e.clips is not None:
            clips = np.asarray(e.clips, np.int64)
            if clips.ndim == 1:
                clips = np.broadcast_to(clips[None, :], (num_queries, clips.shape[0]))
            if clips.ndim != 2 or clips.shape[0] != num_queries:
                raise KinemaError(f"exclusion clips must be (M,) or (Q={num_queries}, M), got {clips.shape}")
            if clips.shape[1]:
                self.clips = clips

    def allowed(self, rows: np.ndarray, qid: np.ndarray | None) -> np.ndarray:
        """Bool per candidate: may ``rows`` (original indices) be returned to queries ``qid``?

        ``qid`` None means a single query (index 0), broadcast over ``rows``.
        """
        ok = np.ones(rows.shape, bool)
        if self.mask is not None:
            ok &= self.mask[rows]
        if self.clip_end:
            ok &= rows < self.clip_stop_of_row[rows] - self.clip_end
        if self.current is not None or self.clips is not None:
            crow = self.clip_of_row[rows]
            if self.current is not None:
                cur = self.current[0] if qid is None else self.current[qid]
                cclip = self.current_clip[0] if qid is None else self.current_clip[qid]
                ok &= ~((np.abs(rows - cur) <= self.around) & (crow == cclip))
            if self.clips is not None:
                cl = self.clips[0] if qid is None else self.clips[qid]
                ok &= ~np.any(crow[..., None] == cl, axis=-1)
        return ok


def _ranges_arrays(ranges: np.ndarray | None, num_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Clip id and clip stop of every row from ``ranges`` (C, 2) [start, stop)."""
    if ranges is None:
        ranges = np.array([[0, num_rows]])
    ranges = np.asarray(ranges, np.int64)
    if ranges.ndim != 2 or ranges.shape[1] != 2 or ranges.shape[0] == 0:
        raise KinemaError(f"ranges must be (C, 2) [start, stop) rows, got shape {ranges.shape}")
    if ranges[0, 0] != 0 or ranges[-1, 1] != num_rows or np.any(ranges[1:, 0] != ranges[:-1, 1]) \
            or np.any(ranges[:, 1] <= ranges[:, 0]):
        raise KinemaError(f"ranges must tile [0, {num_rows}) contiguously with non-empty clips")
    lengths = ranges[:, 1] - ranges[:, 0]
    clip_of_row = np.repeat(np.arange(len(ranges), dtype=np.int64), lengths)
    clip_stop_of_row = np.repeat(ranges[:, 1], lengths)
    return clip_of_row, clip_stop_of_row


def _plain(a: np.ndarray, dtype: type) -> np.ndarray:
    """``a`` as a C-contiguous, writable array of ``dtype`` (copied only when needed)."""
    return np.require(a, dtype, ("C", "W"))


def _check_queries(queries: np.ndarray, dims: int) -> tuple[np.ndarray, bool]:
    q = np.asarray(queries, np.float32)
    single = q.ndim == 1
    q = np.atleast_2d(q)
    if q.ndim != 2 or q.shape[1] != dims:
        raise KinemaError(f"queries must be (Q, {dims}) or ({dims},), got {np.shape(queries)}")
    if not np.all(np.isfinite(q)):
        raise KinemaError("queries contain NaN or infinity")
    return np.ascontiguousarray(q), single


def _sqdist(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Squared distances (...,) float32 between rows (..., D) and q broadcastable to them.

    The one cost kernel used by both the index and brute force (same elementwise
    differences, same per-row reduction), so their costs are identical.
    """
    d = rows - q
    return np.einsum("...k,...k->...", d, d)


def _finish(qid: np.ndarray, rows: np.ndarray, cost: np.ndarray, num_queries: int, k: int,
            single: bool) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (by cost, then row) per query from flat candidates; pads with -1 / inf."""
    if num_queries == 1:  # one query: no grouping needed
        order = np.lexsort((rows, cost))[:k]
        idx = np.full(k, -1, np.int64)
        costs = np.full(k, np.inf, np.float32)
        idx[:len(order)] = rows[order]
        costs[:len(order)] = cost[order]
        return (idx, costs) if single else (idx[None], costs[None])
    order = np.lexsort((rows, cost, qid))
    qid, rows, cost = qid[order], rows[order], cost[order]
    starts = np.searchsorted(qid, np.arange(num_queries))
    rank = np.arange(len(qid)) - starts[qid]
    keep = rank < k
    idx = np.full((num_queries, k), -1, np.int64)
    costs = np.full((num_queries, k), np.inf, np.float32)
    idx[qid[keep], rank[keep]] = rows[keep]
    costs[qid[keep], rank[keep]] = cost[keep]
    if single:
        return idx[0], costs[0]
    return idx, costs


def brute_force(features: np.ndarray, queries: np.ndarray, k: int = 4, exclude: Exclusion | None = None,
                ranges: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Reference exact search: every row's cost, exclusions applied, k smallest kept.

    Args:
        features: (N, D) float32 database features.
        queries: (Q, D) or (D,) queries in the same space.
        k: neighbours per query.
        exclude: rows not to return (see :class:`Exclusion`).
        ranges: (C, 2) [start, stop) rows of each clip (default: one clip).

    Returns:
        indices (Q, k) int64 (or (k,) for one query), -1 where fewer than k rows are
        allowed; costs (Q, k) float32 squared distances, inf for missing rows. Sorted by
        cost, ties by row index.
    """
    features = np.ascontiguousarray(features, np.float32)
    q, single = _check_queries(queries, features.shape[1])
    clip_of_row, clip_stop = _ranges_arrays(ranges, len(features))
    rules = _Rules(exclude, len(q), clip_of_row, clip_stop, len(features))
    all_rows = np.arange(len(features))
    qids, rows, costs = [], [], []
    for i in range(len(q)):
        cost = _sqdist(features, q[i])
        ok = rules.allowed(all_rows, np.full(len(features), i))
        r = np.flatnonzero(ok)
        c = cost[r]
        if len(r) > k:
            sel = np.argpartition(c, k - 1)[:k]
            kth = c[sel].max()
            sel = np.flatnonzero(c <= kth)  # keep every tie of the k-th cost
            r, c = r[sel], c[sel]
        qids.append(np.full(len(r), i))
        rows.append(r)
        costs.append(c)
    return _finish(np.concatenate(qids), np.concatenate(rows), np.concatenate(costs), len(q), k, single)


def _boxes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """float64 boxes [lo, hi] (n, D) -> float32 (n, 2, D) [centre, half-width] that contain them.

    Empty boxes (lo > hi) get half-width -inf, so every distance to them is infinite.
    """
    empty = np.any(lo > hi, axis=1)
    lo = np.where(empty[:, None], 0.0, lo)
    hi = np.where(empty[:, None], 0.0, hi)
    centre64 = 0.5 * (lo + hi)
    centre = centre64.astype(np.float32)
    half = 0.5 * (hi - lo) + np.abs(centre64 - centre.astype(np.float64))
    half32 = half.astype(np.float32)
    half32 = np.where(half32.astype(np.float64) < half, np.nextafter(half32, np.float32(np.inf)), half32)
    half32[empty] = -np.inf
    return np.ascontiguousarray(np.stack([centre, half32], axis=1))


def _segment_min_max(x: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-column min and max (S, D) of consecutive row segments of ``size`` (last partial)."""
    full = len(x) // size
    body = x[:full * size].reshape(full, size, x.shape[1])
    lo, hi = body.min(axis=1), body.max(axis=1)
    if full * size < len(x):
        tail = x[full * size:]
        lo = np.concatenate([lo, tail.min(axis=0, keepdims=True)])
        hi = np.concatenate([hi, tail.max(axis=0, keepdims=True)])
    return lo, hi


# Candidate margin: the kernel keeps every allowed row whose float64 cost is within this of
# the k-th best float64 cost; the final float32 costs (the brute-force kernel) differ from
# float64 by at most ~(D + 3) * 2^-24 relative, far inside the margin, so every row that
# brute force returns is among the candidates.
_CAND_REL = 2e-5
_CAND_ABS = 1e-20
# Distance sums are checked against the limit after every _BLOCK axes.
_BLOCK = 8


@numba.njit(cache=True, nogil=True)
def _allowed_row(orig, qi, mask, clip_end, clip_stop, clip_of_row, cur, cur_clip, around, clips):
    """Exclusion rules of :class:`_Rules` for one original row and query (see ``allowed``)."""
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


@numba.njit(cache=True, nogil=True)
def _child_bounds(box_data, off, f, qr, limit, acc):
    """Squared float64 distances from rotated query qr (D,) to the ``f`` boxes of one group.

    The group at ``off`` holds centres (D, f) then half-widths (D, f), so the inner loop
    runs over boxes (independent sums, SIMD). Stops early (partial sums, all > ``limit``)
    once every box is past ``limit``: the leading axes carry the most variance.
    """
    dims = qr.shape[0]
    for c in range(f):
        acc[c] = 0.0
    j = 0
    while j < dims:
        e = min(j + _BLOCK, dims)
        for jj in range(j, e):
            qj = qr[jj]
            centre = off + jj * f
            half = off + (dims + jj) * f
            for c in range(f):
                g = max(abs(np.float64(box_data[centre + c]) - qj) - np.float64(box_data[half + c]), 0.0)
                acc[c] += g * g
        j = e
        if j < dims:
            done = True
            for c in range(f):
                if acc[c] <= limit:
                    done = False
                    break
            if done:
                return


@numba.njit(cache=True, nogil=True)
def _knn_kernel(q, qr, k, box_data, level_start, fanouts, rows, rows_rot_t, rot_error, row_index, num_leaves,
                mask, clip_end, clip_stop, clip_of_row, cur, cur_clip, around, clips):
    """Depth-first, nearest-child-first branch and bound per query (float64 costs).

    Returns (qid, pos) of candidate rows (tree positions ``leaf * S + slot``): every
    allowed row whose cost is within the candidate margin of the query's k-th best cost.
    """
    nq, dims = q.shape
    num_levels = level_start.shape[0] - 1
    last = num_levels - 1
    size = rows.shape[1]
    n_top = fanouts[num_levels]  # the top level is one group of n_top boxes
    max_f = n_top
    for li in range(num_levels):
        max_f = max(max_f, fanouts[li])
    cap_stack = n_top + num_levels * max_f + 1
    st_level = np.empty(cap_stack, np.int64)
    st_node = np.empty(cap_stack, np.int64)
    st_lb = np.empty(cap_stack, np.float64)
    acc = np.empty(max_f, np.float64)
    tmp_lb = np.empty(max_f, np.float64)
    tmp_node = np.empty(max_f, np.int64)
    pre = np.empty(size, np.float64)
    cap = 64 * nq + 64
    out_q = np.empty(cap, np.int64)
    out_pos = np.empty(cap, np.int64)
    out_cost = np.empty(cap, np.float64)
    n_out = 0
    best = np.empty(k, np.float64)
    # Batches run in tree order (by the leaf a greedy descent reaches): consecutive
    # queries then share cached nodes and rows.
    key = np.zeros(nq, np.int64)
    if nq > 1:
        for qi in range(nq):
            _child_bounds(box_data, level_start[0], n_top, qr[qi], np.inf, acc)
            node = np.argmin(acc[:n_top])
            for lvl in range(last):
                f = fanouts[lvl]
                _child_bounds(box_data, level_start[lvl + 1] + node * 2 * dims * f, f, qr[qi], np.inf, acc)
                node = node * f + np.argmin(acc[:f])
            key[qi] = node
    for qi in np.argsort(key, kind="mergesort"):
        qrow = qr[qi]
        for j in range(k):
            best[j] = np.inf
        first = n_out
        sp = 0
        # push the top level, farthest first (the nearest is popped first)
        _child_bounds(box_data, level_start[0], n_top, qrow, np.inf, acc)
        order = np.argsort(acc[:n_top])
        for j in range(n_top - 1, -1, -1):
            st_level[sp] = 0
            st_node[sp] = order[j]
            st_lb[sp] = acc[order[j]]
            sp += 1
        while sp > 0:
            sp -= 1
            lvl = st_level[sp]
            node = st_node[sp]
            tau = best[k - 1]
            if st_lb[sp] > tau * (1.0 + _REL_SLACK) + _ABS_SLACK:
                continue
            if lvl == last:
                if node >= num_leaves:
                    continue
                limit = tau * (1.0 + _CAND_REL) + _CAND_ABS
                # rotated rows are within rot_error of the exact ones: a row whose rotated
                # distance exceeds sqrt(limit) + rot_error costs more than limit
                rot_limit = (np.sqrt(limit) + rot_error) ** 2 * (1.0 + 1e-9)
                for s in range(size):
                    pre[s] = 0.0
                j = 0
                while j < dims:  # partial sums only grow: stop once every row is past
                    e = min(j + _BLOCK, dims)
                    for jj in range(j, e):
                        qj = qrow[jj]
                        for s in range(size):
                            diff = np.float64(rows_rot_t[node, jj, s]) - qj
                            pre[s] += diff * diff
                    j = e
                    if j < dims:
                        done = True
                        for s in range(size):
                            if pre[s] <= rot_limit:
                                done = False
                                break
                        if done:
                            break
                for s in range(size):
                    if pre[s] > rot_limit:
                        continue
                    orig = row_index[node, s]
                    if orig < 0:
                        continue
                    cost = 0.0
                    for jj in range(dims):
                        diff = np.float64(rows[node, s, jj]) - np.float64(q[qi, jj])
                        cost += diff * diff
                    if cost > limit:
                        continue
                    if not _allowed_row(orig, qi, mask, clip_end, clip_stop, clip_of_row, cur, cur_clip,
                                        around, clips):
                        continue
                    if n_out == cap:
                        cap *= 2
                        grown_q = np.empty(cap, np.int64)
                        grown_pos = np.empty(cap, np.int64)
                        grown_cost = np.empty(cap, np.float64)
                        grown_q[:n_out] = out_q[:n_out]
                        grown_pos[:n_out] = out_pos[:n_out]
                        grown_cost[:n_out] = out_cost[:n_out]
                        out_q, out_pos, out_cost = grown_q, grown_pos, grown_cost
                    out_q[n_out] = qi
                    out_pos[n_out] = node * size + s
                    out_cost[n_out] = cost
                    n_out += 1
                    if cost < best[k - 1]:
                        j = k - 1
                        while j > 0 and best[j - 1] > cost:
                            best[j] = best[j - 1]
                            j -= 1
                        best[j] = cost
                        limit = best[k - 1] * (1.0 + _CAND_REL) + _CAND_ABS
                        rot_limit = (np.sqrt(limit) + rot_error) ** 2 * (1.0 + 1e-9)
            else:
                f = fanouts[lvl]
                limit = tau * (1.0 + _REL_SLACK) + _ABS_SLACK
                _child_bounds(box_data, level_start[lvl + 1] + node * 2 * dims * f, f, qrow, limit, acc)
                n = 0
                for c in range(f):
                    lb = acc[c]
                    if lb <= limit:
                        # insertion sort, descending: push order = farthest first
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
        # keep this query's candidates within the margin of its final k-th cost
        limit = best[k - 1] * (1.0 + _CAND_REL) + _CAND_ABS
        w = first
        for j in range(first, n_out):
            if out_cost[j] <= limit:
                out_q[w] = out_q[j]
                out_pos[w] = out_pos[j]
                out_cost[w] = out_cost[j]
                w += 1
        n_out = w
    return out_q[:n_out], out_pos[:n_out]


class SearchIndex:
    """Exact k-nearest search over fixed features with a box tree (see module docstring).

    Args:
        features: (N, D) float32 normalised features (copied, reordered into tree order).
        ranges: (C, 2) [start, stop) rows of each clip (default: one clip); needed for
            clip-aware exclusions.
        leaf_size: rows per leaf block (power of two).
        fanout: children per stored node (power of two).
        top_nodes: the first stored level has at least this many nodes (fewer for tiny data).
        rotate: align the boxes with the principal axes of the features (tighter boxes).
    """

    def __init__(self, features: np.ndarray, ranges: np.ndarray | None = None, leaf_size: int = 16,
                 fanout: int = 8, top_nodes: int = 64, rotate: bool = True):
        f = np.ascontiguousarray(features, np.float32)
        if f.ndim != 2 or len(f) == 0:
            raise KinemaError(f"features must be a non-empty (N, D) array, got shape {np.shape(features)}")
        if not np.all(np.isfinite(f)):
            raise KinemaError("features contain NaN or infinity")
        for name, v in (("leaf_size", leaf_size), ("fanout", fanout)):
            if v < 2 or v & (v - 1):
                raise KinemaError(f"{name} must be a power of two >= 2, got {v}")
        self.num_rows, self.dims = f.shape
        self.leaf_size = leaf_size
        self.clip_of_row, self.clip_stop_of_row = _ranges_arrays(ranges, self.num_rows)

        # Rotation into principal axes, in float64 so the boxes stay accurate.
        f64 = f.astype(np.float64)
        self.mean = f64.mean(axis=0)
        self.basis = np.eye(self.dims)
        centred = f64 - self.mean
        del f64
        if rotate and self.num_rows > 1:
            _, vecs = np.linalg.eigh(centred.T @ centred)  # principal axes
            self.basis = vecs[:, ::-1].copy()
        y = centred @ self.basis
        del centred

        num_leaves = -(-self.num_rows // leaf_size)
        depth = max(0, int(np.ceil(np.log2(num_leaves))))
        perm = self._build_order(y, depth)
        self.num_leaves = num_leaves
        self.perm = perm  # tree position -> original row
        rows = np.full((num_leaves * leaf_size, self.dims), np.inf, np.float32)  # padding never wins
        rows[:self.num_rows] = f[perm]
        self.rows = rows.reshape(num_leaves, leaf_size, self.dims)
        row_index = np.full(num_leaves * leaf_size, -1, np.int64)
        row_index[:self.num_rows] = perm
        self.row_index = row_index.reshape(num_leaves, leaf_size)

        # Leaf boxes (rotated space).
        yp = y[perm]
        del y
        # Rotated float32 copy of the rows: a cheap prefilter (leading axes first). Rounding
        # moves each row by at most rot_error (Euclidean), accounted for in the kernel.
        rows_rot = np.full((num_leaves * leaf_size, self.dims), np.inf, np.float32)
        rows_rot[:self.num_rows] = yp
        self.rows_rot_t = np.ascontiguousarray(rows_rot.reshape(num_leaves, leaf_size, self.dims).transpose(0, 2, 1))
        self.rot_error = float(np.sqrt(self.dims) * (np.abs(yp).max() * (2.0 ** -24 + 1e-12) + 1e-12))
        n_full = 1 << depth  # complete tree: missing leaves are empty boxes
        lo = np.full((n_full, self.dims), np.inf)
        hi = np.full((n_full, self.dims), -np.inf)
        lo[:num_leaves], hi[:num_leaves] = _segment_min_max(yp, leaf_size)
        del yp

        # Stored levels: every log2(fanout)-th depth from the leaves up, top >= top_nodes.
        shift = int(np.log2(fanout))
        keep = list(range(depth, -1, -shift))
        while len(keep) > 1 and (1 << keep[-1]) < top_nodes:
            keep.pop()
        levels: list[np.ndarray] = []  # top first, (n_i, 2, D) boxes
        cur_depth = depth
        for d in keep:
            while cur_depth > d:
                lo = np.minimum(lo[0::2], lo[1::2])
                hi = np.maximum(hi[0::2], hi[1::2])
                cur_depth -= 1
            levels.append(_boxes(lo, hi))
        levels.reverse()
        depths = keep[::-1]
        # fanouts[i]: children per level-i node at level i + 1 (1 for the leaves)
        self.fanouts = [1 << (depths[i + 1] - depths[i]) for i in range(len(depths) - 1)] + [1]
        # Flat box data for the compiled search: the children of each node (the top level
        # as one group) stored together as centres (D, f) then half-widths (D, f).
        groups = [len(levels[0])] + self.fanouts[:-1]
        data = [lv.reshape(-1, g, 2, self.dims).transpose(0, 2, 3, 1).ravel() for lv, g in zip(levels, groups)]
        self.box_data = np.concatenate(data)
        self.level_start = np.concatenate([[0], np.cumsum([len(d) for d in data])]).astype(np.int64)
        # fanouts, then the size of the top level
        self.fanout_array = np.asarray(self.fanouts + [len(levels[0])], np.int64)
        self.rows_flat = self.rows.reshape(-1, self.dims)  # tree position -> row

    def _build_order(self, y: np.ndarray, depth: int) -> np.ndarray:
        """Row order of a complete binary tree of median splits over leaf blocks.

        Node i at depth d covers leaves [i * 2^(depth-d), (i+1) * 2^(depth-d)) (clipped to
        the data), so leaf j is rows [j * leaf_size, (j+1) * leaf_size) of the order; full
        nodes split at the median of their widest axis.
        """
        n = len(y)
        order = np.arange(n)
        yo = y.astype(np.float32)  # the split choice needs no more precision
        for d in range(depth):
            nodes = 1 << d
            span = (1 << (depth - d)) * self.leaf_size
            bounds = np.minimum(np.arange(nodes + 1) * span, n)
            counts = np.diff(bounds)
            used = counts > 0
            s = bounds[:-1][used]
            lo, hi = _segment_min_max(yo, span)
            axis = np.argmax(hi - lo, axis=1)
            node_of = np.repeat(np.arange(len(s)), counts[used])
            a = axis[node_of]
            lo_a = lo[np.arange(len(s)), axis].astype(np.float64)
            width = (hi[np.arange(len(s)), axis].astype(np.float64) - lo_a) * (1 + 1e-6) + 1e-30
            # one global sort: node id + position within the node's range on its axis
            key = node_of + (yo[np.arange(n), a] - lo_a[node_of]) / width[node_of]
            step = np.argsort(key)
            order = order[step]
            yo = yo[step]
        return order

    def search(self, queries: np.ndarray, k: int = 4, exclude: Exclusion | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """The k rows nearest to each query, exactly as :func:`brute_force` finds them.

        Args:
            queries: (Q, D) or (D,) float features.
            k: neighbours per query.
            exclude: rows not to return (see :class:`Exclusion`).

        Returns:
            indices (Q, k) int64 original rows (or (k,) for one query), -1 where fewer than
            k rows are allowed; costs (Q, k) float32, inf where missing; sorted by cost,
            ties by row index.
        """
        if k < 1:
            raise KinemaError(f"k must be >= 1, got {k}")
        q, single = _check_queries(queries, self.dims)
        nq = len(q)
        r = _Rules(exclude, nq, self.clip_of_row, self.clip_stop_of_row, self.num_rows)
        qr = np.einsum("qd,de->qe", q.astype(np.float64) - self.mean, self.basis)  # no BLAS threads
        has_cur = r.current is not None
        # one compiled signature: every array C-contiguous and writable
        qid, pos = _knn_kernel(
            _plain(q, np.float32), qr, int(k), self.box_data, self.level_start, self.fanout_array, self.rows,
            self.rows_rot_t, self.rot_error, self.row_index, int(self.num_leaves),
            _plain(r.mask if r.mask is not None else np.zeros(0, bool), np.bool_), int(r.clip_end),
            self.clip_stop_of_row, self.clip_of_row,
            _plain(r.current if has_cur else np.zeros(0), np.int64),
            _plain(r.current_clip if has_cur else np.zeros(0), np.int64),
            int(r.around) if has_cur else 0,
            _plain(r.clips if r.clips is not None else np.zeros((nq, 0)), np.int64))
        # final costs with the brute-force kernel (float32), so both agree bit for bit
        cost = _sqdist(self.rows_flat.take(pos, axis=0), q[0] if nq == 1 else q.take(qid, axis=0))
        return _finish(qid, self.row_index.ravel().take(pos), cost, nq, k, single)

    @property
    def nbytes(self) -> int:
        """Memory held by the index (reordered rows, boxes, maps), in bytes."""
        arrays = [self.rows, self.row_index, self.perm, self.clip_of_row, self.clip_stop_of_row,
                  self.box_data, self.level_start, self.fanout_array, self.rows_rot_t]
        return int(sum(a.nbytes for a in arrays))

