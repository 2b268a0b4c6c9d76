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
* **Upper bound.** A greedy beam descent (the ``beam`` best nodes per level) evaluates
  the rows of the most promising leaves, skipping leaves that the exclusions remove
  entirely, and takes the k-th smallest allowed cost as a bound ``tau`` per query.
* **Branch and bound.** Level by level, every (query, node) pair whose box lies farther
  than ``tau`` is dropped; the rows of the surviving leaves are evaluated exactly in the
  original feature space and the k best allowed ones are kept. Every row with cost
  ``<= tau`` lies in a surviving leaf, so the result is the brute-force result.

All steps are vectorised over queries and nodes with NumPy (no Python loop over rows or
nodes), so a batch of queries costs little more than one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kinema.errors import KinemaError

# Pruning keeps a node unless lower_bound > tau * (1 + _REL_SLACK) + _ABS_SLACK. The bound is
# computed in a rotated frame and in float32, the costs in the original frame: the slack
# covers their rounding differences (orders of magnitude above float32 error, far below
# any distance that matters for pruning).
_REL_SLACK = 1e-4
_ABS_SLACK = 1e-6
# Surviving leaves are scanned in rounds by rank of lower bound (per query): after each
# round but the last, tau shrinks to the k-th best cost seen so far.
_LEAF_ROUNDS = (4, 16, 64, 1 << 62)


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
            cur = np.broadcast_to(cur, (num_queries,))
            if np.any(cur >= num_rows):
                raise KinemaError(f"exclusion current row out of range (database has {num_rows} rows)")
            if np.any(cur >= 0):
                self.current = cur
                self.around = int(e.around)
                self.current_clip = np.where(cur >= 0, clip_of_row[np.maximum(cur, 0)], -1)
        self.clips = None
        if e.clips is not None:
            clips = np.asarray(e.clips, np.int64)
            if clips.ndim == 1:
                clips = np.broadcast_to(clips[None, :], (num_queries, clips.shape[0]))
            if clips.ndim != 2 or clips.shape[0] != num_queries:
                raise KinemaError(f"exclusion clips must be (M,) or (Q={num_queries}, M), got {clips.shape}")
            if clips.shape[1]:
                self.clips = clips

    @property
    def by_position(self) -> bool:
        """True when rules depend on the query's current row (leaf-level skipping applies)."""
        return self.current is not None or self.clips is not None

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

    def leaf_fully_excluded(self, row_min: np.ndarray, row_max: np.ndarray, clip_min: np.ndarray,
                            clip_max: np.ndarray, qid: np.ndarray) -> np.ndarray:
        """Bool per (leaf, query) pair: the rules remove every row of the leaf."""
        out = np.zeros(row_min.shape, bool)
        if self.current is not None:
            cur, cclip = self.current[qid], self.current_clip[qid]
            out |= (clip_min == cclip) & (clip_max == cclip) & (row_min >= cur - self.around) \
                & (row_max <= cur + self.around)
        if self.clips is not None:
            single = clip_min == clip_max
            out |= single & np.any(clip_min[..., None] == self.clips[qid], axis=-1)
        return out


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


def _lower_bounds(boxes: np.ndarray, qr: np.ndarray) -> np.ndarray:
    """Squared distance from points qr (..., D) to boxes (..., 2, D) [centre, half-width]."""
    gap = boxes[..., 0, :] - qr
    np.abs(gap, out=gap)
    gap -= boxes[..., 1, :]
    np.maximum(gap, 0, out=gap)
    return np.einsum("...k,...k->...", gap, gap)


def _rank_in_group(group: np.ndarray, num_groups: int) -> np.ndarray:
    """Position of each element within its run of equal values of sorted ``group``."""
    return np.arange(len(group)) - np.searchsorted(group, np.arange(num_groups))[group]


class SearchIndex:
    """Exact k-nearest search over fixed features with a box tree (see module docstring).

    Args:
        features: (N, D) float32 normalised features (copied, reordered into tree order).
        ranges: (C, 2) [start, stop) rows of each clip (default: one clip); needed for
            clip-aware exclusions.
        leaf_size: rows per leaf block (power of two).
        fanout: children per stored node (power of two).
        top_nodes: the first stored level has at least this many nodes (fewer for tiny data).
        beam: nodes kept per level in the upper-bound descent.
        rotate: align the boxes with the principal axes of the features (tighter boxes).
    """

    def __init__(self, features: np.ndarray, ranges: np.ndarray | None = None, leaf_size: int = 16,
                 fanout: int = 8, top_nodes: int = 64, beam: int = 4, rotate: bool = True):
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
        self.beam = beam
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

        # Leaf boxes and per-leaf row/clip spans (to skip leaves an exclusion empties).
        yp = y[perm]
        del y
        starts = np.arange(0, self.num_rows, leaf_size)
        n_full = 1 << depth  # complete tree: missing leaves are empty boxes
        lo = np.full((n_full, self.dims), np.inf)
        hi = np.full((n_full, self.dims), -np.inf)
        lo[:num_leaves], hi[:num_leaves] = _segment_min_max(yp, leaf_size)
        del yp
        self.leaf_row_min = np.minimum.reduceat(perm, starts)
        self.leaf_row_max = np.maximum.reduceat(perm, starts)
        self.leaf_clip_min = np.minimum.reduceat(self.clip_of_row[perm], starts)
        self.leaf_clip_max = np.maximum.reduceat(self.clip_of_row[perm], starts)

        # Stored levels: every log2(fanout)-th depth from the leaves up, top >= top_nodes.
        shift = int(np.log2(fanout))
        keep = list(range(depth, -1, -shift))
        while len(keep) > 1 and (1 << keep[-1]) < top_nodes:
            keep.pop()
        self.levels: list[np.ndarray] = []  # top first; level i+1 reshaped (n_i, fanout, 2, D)
        cur_depth = depth
        for d in keep:
            while cur_depth > d:
                lo = np.minimum(lo[0::2], lo[1::2])
                hi = np.maximum(hi[0::2], hi[1::2])
                cur_depth -= 1
            self.levels.append(_boxes(lo, hi))
        self.levels.reverse()
        depths = keep[::-1]
        # fanouts[i]: children per level-i node at level i + 1 (1 for the leaves)
        self.fanouts = [1 << (depths[i + 1] - depths[i]) for i in range(len(depths) - 1)] + [1]
        # Flat 2-D views for fast row gathers (ndarray.take is slow on >2-D arrays).
        self.children = [self.levels[0]] + [
            self.levels[i].reshape(len(self.levels[i - 1]), -1) for i in range(1, len(self.levels))]
        self.rows_flat = self.rows.reshape(num_leaves, -1)

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

    def _rotate(self, q: np.ndarray) -> np.ndarray:
        return np.einsum("qd,de->qe", q.astype(np.float64) - self.mean, self.basis).astype(np.float32)  # no BLAS threads

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
        rules = _Rules(exclude, len(q), self.clip_of_row, self.clip_stop_of_row, self.num_rows)
        qr = self._rotate(q)
        if len(q) == 1:
            found = self._search_one(q[0], qr[0], k, rules)
            if found is not None:
                idx, cost = found
                return (idx, cost) if single else (idx[None], cost[None])
        tau = self._upper_bounds(q, qr, k, rules)
        return self._branch_and_bound(q, qr, k, rules, tau, single)

    # -- one query: the same algorithm without per-query bookkeeping (fewer NumPy calls) ----
    def _search_one(self, q: np.ndarray, qr: np.ndarray, k: int, rules: _Rules
                    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Exact search for one query (D,); None when the beam finds fewer than k allowed rows."""
        dims, size = self.dims, self.leaf_size
        last = len(self.levels) - 1
        lb_top = _lower_bounds(self.levels[0], qr)
        # upper bound tau: greedy beam descent, then the k-th best allowed row of its leaves
        nodes, lb = np.arange(len(lb_top)), lb_top
        for li in range(last + 1):
            if li > 0:
                f = self.fanouts[li - 1]
                lb = _lower_bounds(self.children[li].take(nodes, axis=0).reshape(-1, 2, dims), qr)
                nodes = (nodes[:, None] * f + np.arange(f)).ravel()
            width = self.beam
            if li == last:
                lb[self._leaf_skip(nodes, None, rules)] = np.inf
                width = max(2 * self.beam, -(-2 * k // size))
            if len(nodes) > width:
                sel = np.argpartition(lb, width - 1)[:width]
                nodes, lb = nodes[sel], lb[sel]
        leaves = nodes[np.isfinite(lb)]
        cost = _sqdist(self.rows_flat.take(leaves, axis=0).reshape(-1, dims), q)
        orig = self.row_index.take(leaves, axis=0).ravel()
        ok = orig >= 0
        ok[ok] = rules.allowed(orig[ok], None)
        if np.count_nonzero(ok) < k:
            return None
        tau = np.partition(cost[ok], k - 1)[k - 1]

        # branch and bound
        limit = tau * np.float32(1 + _REL_SLACK) + np.float32(_ABS_SLACK)
        node = np.flatnonzero(lb_top <= limit)
        lb = lb_top[node]
        for li in range(1, last + 1):
            f = self.fanouts[li - 1]
            lb = _lower_bounds(self.children[li].take(node, axis=0).reshape(-1, 2, dims), qr)
            node = (node[:, None] * f + np.arange(f)).ravel()
            keep = lb <= limit
            node, lb = node[keep], lb[keep]
        keep = ~self._leaf_skip(node, None, rules)
        node, lb = node[keep], lb[keep]
        order = np.argsort(lb)
        node, lb = node[order], lb[order]
        best_rows = np.zeros(0, np.int64)
        best_cost = np.zeros(0, np.float32)
        start = 0
        for bound in _LEAF_ROUNDS:
            if start >= len(node) or lb[start] > limit:
                break
            chunk = node[start:bound]
            chunk = chunk[lb[start:bound] <= limit]
            start = bound
            cost = _sqdist(self.rows_flat.take(chunk, axis=0).reshape(-1, dims), q)
            rows = self.row_index.take(chunk, axis=0).ravel()
            keep = (cost <= tau) & (rows >= 0)
            rows, cost = rows[keep], cost[keep]
            ok = rules.allowed(rows, None)
            rows, cost = rows[ok], cost[ok]
            best_rows = np.concatenate([best_rows, rows])
            best_cost = np.concatenate([best_cost, cost])
            if len(best_cost) >= k:
                tau = min(tau, np.partition(best_cost, k - 1)[k - 1])
                keep = best_cost <= tau
                best_rows, best_cost = best_rows[keep], best_cost[keep]
                limit = tau * np.float32(1 + _REL_SLACK) + np.float32(_ABS_SLACK)
        order = np.lexsort((best_rows, best_cost))[:k]
        idx = np.full(k, -1, np.int64)
        costs = np.full(k, np.inf, np.float32)
        idx[:len(order)] = best_rows[order]
        costs[:len(order)] = best_cost[order]
        return idx, costs

    def _leaf_skip(self, leaves: np.ndarray, qid: np.ndarray | None, rules: _Rules) -> np.ndarray:
        """Bool per (leaf, query): missing leaf, or every row removed by the exclusions
        (``qid`` None: the single query 0)."""
        skip = leaves >= self.num_leaves
        if rules.by_position:
            if qid is None:
                qid = np.zeros(len(leaves), np.int64)
            lv = np.minimum(leaves, self.num_leaves - 1)
            skip |= rules.leaf_fully_excluded(self.leaf_row_min[lv], self.leaf_row_max[lv],
                                              self.leaf_clip_min[lv], self.leaf_clip_max[lv], qid)
        return skip

    # -- upper bound: greedy beam descent ------------------------------------------------
    def _upper_bounds(self, q: np.ndarray, qr: np.ndarray, k: int, rules: _Rules) -> np.ndarray:
        """Per query, the k-th smallest allowed cost among rows of a few promising leaves
        (inf when fewer than k allowed rows were seen after widening the beam twice)."""
        tau = np.full(len(q), np.inf, np.float32)
        todo = np.arange(len(q))
        beam = self.beam
        leaves = max(2 * beam, -(-2 * k // self.leaf_size))
        for _attempt in range(3):
            t = self._beam_tau(q[todo], qr[todo], todo, k, rules, beam, leaves)
            tau[todo] = t
            todo = todo[~np.isfinite(t)]
            if len(todo) == 0:
                break
            beam *= 4
            leaves *= 4
        return tau

    def _beam_tau(self, q: np.ndarray, qr: np.ndarray, qids: np.ndarray, k: int, rules: _Rules,
                  beam: int, leaves_wanted: int) -> np.ndarray:
        nq = len(q)
        nodes = None
        for li, level in enumerate(self.levels):
            if nodes is None:
                cand = np.broadcast_to(np.arange(len(level)), (nq, len(level)))
                boxes = level[None]
            else:
                f = self.fanouts[li - 1]
                boxes = self.children[li].take(nodes.ravel(), axis=0).reshape(nq, -1, 2, self.dims)
                cand = (nodes[:, :, None] * f + np.arange(f)).reshape(nq, -1)
            lb = _lower_bounds(boxes, qr[:, None, :])
            last = li == len(self.levels) - 1
            if last:
                qq = np.broadcast_to(qids[:, None], cand.shape)
                lb = np.where(self._leaf_skip(cand, qq, rules), np.inf, lb)
            width = leaves_wanted if last else beam
            if cand.shape[1] > width:
                sel = np.argpartition(lb, width - 1, axis=1)[:, :width]
                pick = (np.arange(nq)[:, None], sel)
                cand, lb = cand[pick], lb[pick]
            nodes = cand
        ok_leaf = np.isfinite(lb)
        leaves = np.where(ok_leaf, nodes, 0)
        rows = self.rows_flat.take(leaves.ravel(), axis=0).reshape(nq, -1, self.dims)
        cost = _sqdist(rows, q[:, None, :])
        orig = self.row_index.take(leaves, axis=0).reshape(nq, -1)
        ok = (orig >= 0) & np.repeat(ok_leaf, self.leaf_size, axis=1)
        ok &= rules.allowed(np.maximum(orig, 0), np.broadcast_to(qids[:, None], orig.shape))
        cost = np.where(ok, cost, np.inf)
        if cost.shape[1] < k:
            return np.full(nq, np.inf, np.float32)
        return np.partition(cost, k - 1, axis=1)[:, k - 1]

    # -- exact search: level-synchronous branch and bound ----------------------------------
    def _branch_and_bound(self, q: np.ndarray, qr: np.ndarray, k: int, rules: _Rules, tau: np.ndarray,
                          single: bool) -> tuple[np.ndarray, np.ndarray]:
        nq = len(q)
        limit = tau * np.float32(1 + _REL_SLACK) + np.float32(_ABS_SLACK)
        top = self.levels[0]
        lb = _lower_bounds(top[None], qr[:, None, :])  # (nq, n_top)
        qid, node = np.nonzero(lb <= limit[:, None])
        lb = lb[qid, node]
        for li in range(1, len(self.levels)):
            f = self.fanouts[li - 1]
            boxes = self.children[li].take(node, axis=0).reshape(len(node), f, 2, self.dims)
            qpt = qr[0] if nq == 1 else qr.take(qid, axis=0)[:, None, :]
            lb = _lower_bounds(boxes, qpt).ravel()
            node = (node[:, None] * f + np.arange(f)).ravel()
            qid = np.repeat(qid, f)
            keep = lb <= limit[qid]
            node, qid, lb = node[keep], qid[keep], lb[keep]
        keep = ~self._leaf_skip(node, qid, rules)
        return self._scan_leaves(q, k, rules, tau, node[keep], qid[keep], lb[keep], single)

    def _scan_leaves(self, q: np.ndarray, k: int, rules: _Rules, tau: np.ndarray, node: np.ndarray,
                     qid: np.ndarray, lb: np.ndarray, single: bool) -> tuple[np.ndarray, np.ndarray]:
        """Evaluate surviving leaves in rounds of increasing lower bound, tightening tau."""
        nq = len(q)
        order = np.lexsort((lb, qid))
        node, qid, lb = node[order], qid[order], lb[order]
        rank = _rank_in_group(qid, nq)
        c_rows, c_qid, c_cost = [], [], []
        prev = 0
        for bound in _LEAF_ROUNDS:
            limit = tau * np.float32(1 + _REL_SLACK) + np.float32(_ABS_SLACK)
            sel = (rank >= prev) & (rank < bound) & (lb <= limit[qid])
            prev = bound
            if not np.any(sel):
                if bound >= rank.max(initial=0):
                    break
                continue
            n_sel, q_sel = node[sel], qid[sel]
            qpt = q[0] if nq == 1 else q.take(q_sel, axis=0)[:, None, :]
            cost = _sqdist(self.rows_flat.take(n_sel, axis=0).reshape(len(n_sel), -1, self.dims), qpt).ravel()
            rows = self.row_index.take(n_sel, axis=0).ravel()
            q_sel = np.repeat(q_sel, self.leaf_size)
            keep = (cost <= tau[q_sel]) & (rows >= 0)
            rows, q_sel, cost = rows[keep], q_sel[keep], cost[keep]
            keep = rules.allowed(rows, None if nq == 1 else q_sel)
            c_rows.append(rows[keep])
            c_qid.append(q_sel[keep])
            c_cost.append(cost[keep])
            if bound >= rank.max(initial=0):
                break
            # tighten tau to the k-th best cost found so far; drop worse candidates
            rows, q_sel, cost = np.concatenate(c_rows), np.concatenate(c_qid), np.concatenate(c_cost)
            o = np.lexsort((cost, q_sel))
            rows, q_sel, cost = rows[o], q_sel[o], cost[o]
            at_k = _rank_in_group(q_sel, nq) == k - 1
            tau = tau.copy()
            tau[q_sel[at_k]] = np.minimum(tau[q_sel[at_k]], cost[at_k])
            keep = cost <= tau[q_sel]
            c_rows, c_qid, c_cost = [rows[keep]], [q_sel[keep]], [cost[keep]]
        if not c_rows:
            empty = np.zeros(0, np.int64)
            return _finish(empty, empty, np.zeros(0, np.float32), nq, k, single)
        rows, q_sel, cost = np.concatenate(c_rows), np.concatenate(c_qid), np.concatenate(c_cost)
        keep = cost <= tau[q_sel]
        return _finish(q_sel[keep], rows[keep], cost[keep], nq, k, single)

    @property
    def nbytes(self) -> int:
        """Memory held by the index (reordered rows, boxes, maps), in bytes."""
        arrays = [self.rows, self.row_index, self.perm, self.clip_of_row, self.clip_stop_of_row,
                  self.leaf_row_min, self.leaf_row_max, self.leaf_clip_min, self.leaf_clip_max, *self.levels]
        return int(sum(a.nbytes for a in arrays))
