"""Exact k-nearest-neighbour search in a motion-matching feature space.

Cost is the squared Euclidean distance between a query and a database row (both already
normalised), summed in float32 left to right over the features. :class:`SearchIndex`
returns exactly what :func:`brute_force` returns (same rows, same float32 costs, ties
broken by the lower row index) but visits only a small part of the database:

* **Tree.** Rows are rotated into the principal axes of the features (each row in
  float64, stored as one float32 copy: the build's only full-size temporary) and reordered
  by median splits along the axis of largest quartile spread into a complete binary tree
  whose leaves are blocks of ``leaf_size`` consecutive rows. The build is compiled: per
  level and node a quickselect finds the median and one stable pass streams the node's
  rows to the other buffer (the leaf storage doubles as that buffer); once nodes are
  small, each cache-sized block runs its remaining levels at once on row indices and
  writes its leaves' boxes. Every
  ``log2(fanout)``-th level is kept, each node with the [lo, hi] bounding box of its
  rotated rows, so the box's distance to a query is a lower bound of the distance of every
  row inside it.
* **Leaves hold the caller's rows** (not the rotated ones) in tree order, column by column
  per leaf, so the compiled kernel costs 8 rows at a time with vector instructions and
  still gets brute force's float32 cost bit for bit (same operations, same order).
* **Compiled branch and bound** (Numba, :mod:`kinema.matching.search_kernels`). Per query,
  a depth-first descent that visits the nearer child first and skips a node when its box
  lies beyond the query's current k-th best cost, inflated by a bound of the rotations'
  float32 rounding (measured per row and per query) and of float32 summation, so no node
  that could hold a row tying or beating the k-th cost is skipped. Rows are ranked by
  (cost, row); exclusions are tested per row, so excluded rows never tighten the bound.
  Queries of a batch run in tree order (consecutive queries share cached nodes), all in
  one compiled call; ``threads`` > 1 splits a batch over threads (the kernel releases the
  GIL).
* **One query, one call.** Everything per database (validation, array layouts, the
  kernel's arguments) is prepared once; a single query costs a few checks and one compiled
  call (about 3 µs in all), which also checks that the query is finite.
"""
from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from kinema.errors import KinemaError, NonFiniteError
from kinema.matching import search_kernels as kern


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


def _check_queries(queries: np.ndarray, dims: int) -> tuple[np.ndarray, bool]:
    q = np.asarray(queries, np.float32)
    single = q.ndim == 1
    q = np.atleast_2d(q)
    if q.ndim != 2 or q.shape[1] != dims:
        raise KinemaError(f"queries must be (Q, {dims}) or ({dims},), got {np.shape(queries)}")
    if not np.all(np.isfinite(q)):
        raise NonFiniteError("queries contain NaN or infinity")
    return np.ascontiguousarray(q), single


def _sqdist(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Squared distances (N,) float32 between rows (N, D) float32 and one query (D,) float32.

    The cost every search reports: ``sum_j (row_j - q_j)^2`` in float32, each product and
    each addition rounded, summed left to right over j. :class:`SearchIndex`'s compiled
    kernel computes exactly this sequence, so their costs agree bit for bit (NumPy's own
    reductions may sum in any order).
    """
    out = np.empty(len(rows), np.float32)
    for s in range(0, len(rows), 4096):  # blocks that stay in cache
        d = np.ascontiguousarray((rows[s:s + 4096] - q).T)
        c = d[0] * d[0]
        for j in range(1, len(d)):
            c += d[j] * d[j]
        out[s:s + 4096] = c
    return out


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


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _group_boxes(lo: np.ndarray, hi: np.ndarray, groups: int) -> tuple[np.ndarray, int]:
    """Boxes (n, D) of one level as ``groups`` groups of n / groups children in the kernel's
    layout (per group: lo then hi, each (D, lanes) with children padded to LANES lanes by
    empty boxes), flattened; and the lanes per group."""
    n, dims = lo.shape
    per = n // groups
    lanes = _round_up(per, kern.LANES)
    out = np.empty((groups, 2, dims, lanes), np.float32)
    out[:, 0] = np.inf
    out[:, 1] = -np.inf
    out[:, 0, :, :per] = lo.reshape(groups, per, dims).transpose(0, 2, 1)
    out[:, 1, :, :per] = hi.reshape(groups, per, dims).transpose(0, 2, 1)
    return out.ravel(), lanes


_NO_MASK = np.zeros(0, bool)
_NO_CURRENT = np.zeros(0, np.int64)
_NO_CLIPS = np.zeros((1, 0), np.int64)
_ONE = np.zeros(1, np.int64)
_F32 = np.dtype(np.float32)


class SearchIndex:
    """Exact k-nearest search over fixed features with a box tree (see module docstring).

    Args:
        features: (N, D) float32 normalised features (copied into the index's own layout;
            other dtypes are converted).
        ranges: (C, 2) [start, stop) rows of each clip (default: one clip); needed for
            clip-aware exclusions.
        leaf_size: rows per leaf block (power of two).
        fanout: children per stored node (power of two).
        top_nodes: the first stored level has at least this many nodes (fewer for tiny data).
        rotate: align the boxes with the principal axes of the features (tighter boxes).
        samples: rows per node sampled to pick its split axis (16: on the biped benchmark
            256 make a query visit ~2% fewer leaves and the build three times slower).
    """

    def __init__(self, features: np.ndarray, ranges: np.ndarray | None = None, leaf_size: int = 16,
                 fanout: int = 8, top_nodes: int = 64, rotate: bool = True, samples: int = 16):
        f = np.asarray(features)
        if f.ndim != 2 or len(f) == 0 or f.shape[1] == 0:
            raise KinemaError(f"features must be a non-empty (N, D) array, got shape {np.shape(features)}")
        # the kernels read float32 rows; converted once (the only full-size copy made of
        # the caller's array, and only when it is not float32 and C-ordered already)
        f = np.ascontiguousarray(f, np.float32)
        for name, v in (("leaf_size", leaf_size), ("fanout", fanout)):
            if v < 2 or v & (v - 1):
                raise KinemaError(f"{name} must be a power of two >= 2, got {v}")
        self.num_rows, self.dims = n, dims = f.shape
        self.leaf_size = leaf_size
        self.clip_of_row, self.clip_stop_of_row = _ranges_arrays(ranges, n)
        # float32 summation error of a D-term cost is below (D + 4) 2^-24 relative: keep a wide margin
        self.rel = max(1e-5, 16.0 * (dims + 4) * 2.0 ** -24)

        # Principal axes from a strided sample (any orthonormal basis keeps the search exact;
        # these give tight boxes). The rotated float32 copy is the build's one full-size
        # temporary; each row is rotated in float64 and its float32 rounding measured.
        sample = f[::max(1, n // 65536)].astype(np.float64)
        self.mean = sample.mean(axis=0)
        self.basis = np.eye(dims)
        if rotate and n > 1:
            centred = sample - self.mean
            _, vecs = np.linalg.eigh(centred.T @ centred)
            self.basis = np.ascontiguousarray(vecs[:, ::-1])
        del sample
        y = np.empty((n, dims), np.float32)
        finite, self.row_err = kern.rotate_rows(f, self.mean, self.basis, y)
        if not finite:
            raise KinemaError("features contain NaN or infinity")

        num_leaves = -(-n // leaf_size)
        depth = max(0, int(np.ceil(np.log2(num_leaves))))
        self.num_leaves = num_leaves
        self.leaf_lanes = lanes = _round_up(leaf_size, kern.LANES)
        # the leaf storage doubles as the build's scratch: the tree build streams rows between
        # ``y`` and it, level by level (it holds at least N * D floats)
        storage = np.empty(num_leaves * dims * lanes, np.float32)
        scratch = storage[:n * dims].reshape(n, dims)
        # Leaf boxes of the rotated float32 rows (exact min/max, written by the build);
        # missing leaves of the complete tree are empty boxes (lo > hi: infinitely far).
        n_full = 1 << depth
        lo = np.full((n_full, dims), np.inf, np.float32)
        hi = np.full((n_full, dims), -np.inf, np.float32)
        perm_a, perm_b = np.arange(n, dtype=np.int64), np.empty(n, np.int64)
        samples = max(4, int(samples))
        in_b = kern.build_tree(y, scratch, perm_a, perm_b, depth, leaf_size, samples, kern.sorting_network(samples),
                               lo, hi)
        perm = perm_b if in_b else perm_a
        del perm_a, perm_b, scratch, y
        self.perm = perm  # tree position -> original row
        # now the storage takes its final content: the caller's rows in tree order, by leaf
        self.row_index = np.empty(num_leaves * lanes, np.int64)
        kern.fill_leaves(f, perm, leaf_size, lanes, storage, self.row_index)
        self.leaf_rows = storage

        # Stored levels: every log2(fanout)-th depth from the leaves up, top >= top_nodes.
        shift = int(np.log2(fanout))
        keep = list(range(depth, -1, -shift))
        while len(keep) > 1 and (1 << keep[-1]) < top_nodes:
            keep.pop()
        levels: list[tuple[np.ndarray, np.ndarray]] = []  # leaves first
        cur_depth = depth
        for d in keep:
            while cur_depth > d:
                lo = np.minimum(lo[0::2], lo[1::2])
                hi = np.maximum(hi[0::2], hi[1::2])
                cur_depth -= 1
            levels.append((lo, hi))
        levels.reverse()
        depths = keep[::-1]
        # fanouts[i]: children per level-i node at level i + 1
        self.fanouts = np.asarray([1 << (depths[i + 1] - depths[i]) for i in range(len(depths) - 1)], np.int64)
        parts, lane_list = [], []
        for v, (lo_v, hi_v) in enumerate(levels):
            flat, lanes_v = _group_boxes(lo_v, hi_v, 1 if v == 0 else len(levels[v - 1][0]))
            parts.append(flat)
            lane_list.append(lanes_v)
        self.boxes = np.concatenate(parts)
        self.level_off = np.concatenate([[0], np.cumsum([len(p) for p in parts])[:-1]]).astype(np.int64)
        self.level_lanes = np.asarray(lane_list, np.int64)
        self._one_shape = (dims,)
        # the kernel's index arguments, in its order (passed with one unpacking per call)
        self._tree = (self.mean, self.basis, self.boxes, self.level_off, self.level_lanes, self.fanouts,
                      self.leaf_rows, self.row_index, int(self.leaf_lanes), float(self.rel), float(self.row_err),
                      self.clip_stop_of_row, self.clip_of_row)

    def _rules(self, exclude: Exclusion | None, nq: int) -> tuple:
        """The kernel's exclusion arguments (mask, clip_end, current per query, current for
        all, around, clips), validated like :class:`_Rules`."""
        if exclude is None:
            return _NO_MASK, 0, _NO_CURRENT, -1, -1, _NO_CLIPS
        mask = exclude.mask
        if mask is None:
            mask = _NO_MASK
        else:
            mask = np.asarray(mask)
            if mask.shape != (self.num_rows,) or mask.dtype != bool:
                raise KinemaError(f"exclusion mask must be bool of shape ({self.num_rows},), "
                                  f"got {mask.dtype} {mask.shape}")
            if not (mask.flags.c_contiguous and mask.flags.writeable):
                mask = mask.copy()  # one compiled signature: C-ordered, writable
        clip_end = max(0, int(exclude.clip_end))
        cur, cur0, around = _NO_CURRENT, -1, int(exclude.around)
        current = exclude.current
        if current is not None and around >= 0:
            if isinstance(current, (int, np.integer)):
                cur0 = int(current)
                if cur0 >= self.num_rows:
                    raise KinemaError(f"exclusion current row out of range (database has {self.num_rows} rows)")
            else:
                c = np.asarray(current, np.int64)
                if c.ndim > 1 or (c.ndim == 1 and len(c) != nq):
                    raise KinemaError(f"exclusion current must be one int or (Q={nq},), got {c.shape}")
                if c.max(initial=-1) >= self.num_rows:
                    raise KinemaError(f"exclusion current row out of range (database has {self.num_rows} rows)")
                if c.ndim == 0:
                    cur0 = int(c)
                else:
                    cur = np.ascontiguousarray(c)
                    if not cur.flags.writeable:
                        cur = cur.copy()
        clips = _NO_CLIPS
        if exclude.clips is not None:
            cl = np.asarray(exclude.clips, np.int64)
            if cl.ndim == 1:
                cl = cl[None]
            elif cl.ndim != 2 or cl.shape[0] != nq:
                raise KinemaError(f"exclusion clips must be (M,) or (Q={nq}, M), got {cl.shape}")
            if cl.shape[1]:
                clips = np.require(cl, np.int64, ("C", "W"))
        return mask, clip_end, cur, cur0, around, clips

    def search(self, queries: np.ndarray, k: int = 4, exclude: Exclusion | None = None,
               threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """The k rows nearest to each query, exactly as :func:`brute_force` finds them.

        Args:
            queries: (Q, D) or (D,) float features.
            k: neighbours per query.
            exclude: rows not to return (see :class:`Exclusion`).
            threads: split a batch over this many threads (results do not depend on it).

        Returns:
            indices (Q, k) int64 original rows (or (k,) for one query), -1 where fewer than
            k rows are allowed; costs (Q, k) float32, inf where missing; sorted by cost,
            ties by row index.
        """
        # Kept short on purpose: a controller calls this once per character and frame, so
        # everything per database is prepared in __init__ and one query costs a few checks
        # and one compiled call (finiteness is checked inside it).
        if type(queries) is np.ndarray and queries.shape == self._one_shape and type(k) is int and k >= 1:
            # one query (the controller's case), kept to the minimum: the compiled kernel
            # itself rejects (TypeError) an array that is not float32, C-ordered and
            # writable, which then takes the general path below and is converted
            idx = np.empty((1, k), np.int64)
            cost = np.empty((1, k), np.float32)
            try:
                status = kern.knn(queries.reshape(1, self.dims), _ONE, 0, 1, k, *self._rules(exclude, 1), idx, cost,
                                  *self._tree)
            except TypeError:
                status = 1
            if status == 0:
                return idx[0], cost[0]
            if status < 0:
                raise NonFiniteError("queries contain NaN or infinity")
        q = queries
        if type(q) is not np.ndarray or q.dtype != _F32:
            q = np.asarray(q, np.float32)
        flags = q.flags
        if not (flags.c_contiguous and flags.writeable):  # one compiled signature: C-ordered, writable
            q = np.array(q, np.float32, order="C")
        if k < 1:
            raise KinemaError(f"k must be >= 1, got {k}")
        k = int(k)
        if q.ndim == 1:
            if q.shape[0] != self.dims:
                raise KinemaError(f"queries must be (Q, {self.dims}) or ({self.dims},), got {q.shape}")
            idx = np.empty((1, k), np.int64)
            cost = np.empty((1, k), np.float32)
            if kern.knn(q.reshape(1, -1), _ONE, 0, 1, k, *self._rules(exclude, 1), idx, cost, *self._tree) < 0:
                raise NonFiniteError("queries contain NaN or infinity")
            return idx[0], cost[0]
        if q.ndim != 2 or q.shape[1] != self.dims:
            raise KinemaError(f"queries must be (Q, {self.dims}) or ({self.dims},), got {np.shape(queries)}")
        if threads < 1:
            raise KinemaError(f"threads must be >= 1, got {threads}")
        nq = q.shape[0]
        rules = self._rules(exclude, nq)
        idx = np.empty((nq, k), np.int64)
        cost = np.empty((nq, k), np.float32)
        order = kern.tree_order(q, self.mean, self.basis, self.boxes, self.level_off, self.level_lanes, self.fanouts)
        parts = max(1, min(threads, nq))
        cuts = np.linspace(0, nq, parts + 1).astype(np.int64).tolist()

        def run(i: int) -> int:
            return kern.knn(q, order, cuts[i], cuts[i + 1], k, *rules, idx, cost, *self._tree)
        if parts == 1:
            status = run(0)
        else:
            with ThreadPoolExecutor(parts) as pool:
                status = min(pool.map(run, range(parts)))
        if status < 0:
            raise NonFiniteError("queries contain NaN or infinity")
        return idx, cost

    @property
    def nbytes(self) -> int:
        """Memory held by the index (leaf rows, boxes, maps), in bytes."""
        arrays = [self.leaf_rows, self.row_index, self.perm, self.clip_of_row, self.clip_stop_of_row, self.boxes,
                  self.level_off, self.level_lanes, self.fanouts, self.mean, self.basis]
        return int(sum(a.nbytes for a in arrays))
