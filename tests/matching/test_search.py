"""SearchIndex returns exactly the brute-force k nearest rows, with every exclusion kind.

Two oracles: an independent float64 computation (indices must agree wherever costs are not
tied within float32 rounding, costs to float32 precision) and the module's brute force
(same float32 cost kernel: indices and costs bit for bit). Real features: LaFAN1 and
Bandai-Namco databases built from ../shared/data (60 Hz, mirrored); synthetic data covers
shapes, ties and far-from-origin rounding.
"""
from __future__ import annotations

import numpy as np
import pytest

from kinema.errors import KinemaError
from kinema.matching.database import build_from_paths
from kinema.matching.search import Exclusion, SearchIndex, brute_force
from kinema.matching.search_kernels import segment_spread


def _motion_like(num_clips: int, length: int, dims: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Smooth random-walk clips (frames close to their neighbours, as in mocap features)."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(0, 0.05, (num_clips, length, dims)) * rng.uniform(0.2, 2.0, dims)
    clips = np.cumsum(steps, axis=1) + rng.normal(0, 1, (num_clips, 1, dims))
    feats = clips.reshape(-1, dims).astype(np.float32)
    starts = np.arange(num_clips) * length
    return feats, np.stack([starts, starts + length], axis=1)


def _oracle(features, queries, k, allowed):
    """float64 costs for all rows; (Q, N) with inf where not allowed."""
    f = features.astype(np.float64)
    q = queries.astype(np.float64)
    d = (f * f).sum(1)[None] - 2 * q @ f.T + (q * q).sum(1)[:, None]  # float64: error ~1e-13
    return np.where(allowed, np.maximum(d, 0), np.inf)


def _assert_exact(idx, cost, oracle, k):
    q = len(oracle)
    for i in range(q):
        order = np.argsort(oracle[i], kind="stable")
        ref = oracle[i][order[:k]]
        n_ok = int(np.isfinite(ref).sum())
        assert np.all(idx[i, n_ok:] == -1) and np.all(np.isinf(cost[i, n_ok:]))
        np.testing.assert_allclose(cost[i, :n_ok], ref[:n_ok], rtol=2e-6, atol=1e-7)
        got = oracle[i][idx[i, :n_ok]]
        np.testing.assert_allclose(got, ref[:n_ok], rtol=2e-6, atol=1e-7)  # same costs: same rows up to ties
        kth = ref[n_ok - 1] if n_ok else -np.inf
        clear = ref[:n_ok] < kth * (1 - 1e-5) - 1e-7  # rows that beat the k-th without a tie
        assert set(order[:n_ok][clear]) <= set(idx[i, :n_ok])


@pytest.fixture(scope="module")
def data():
    feats, ranges = _motion_like(24, 700, 27, seed=0)
    return feats, ranges, SearchIndex(feats, ranges)


def _queries(feats, n, seed, noise=0.05):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, len(feats), n)
    return src, (feats[src] + rng.normal(0, noise, (n, feats.shape[1]))).astype(np.float32)


def test_matches_oracle_without_exclusions(data):
    feats, ranges, index = data
    _, q = _queries(feats, 200, 1)
    for k in (1, 4, 9):
        idx, cost = index.search(q, k=k)
        assert idx.shape == (200, k) and cost.dtype == np.float32
        _assert_exact(idx, cost, _oracle(feats, q, k, np.ones(len(feats), bool)), k)


def test_batched_equals_single_and_module_brute_force(data):
    feats, ranges, index = data
    src, q = _queries(feats, 60, 2)
    ex = Exclusion(current=src, around=15, clip_end=20)
    bi, bc = index.search(q, k=4, exclude=ex)
    ri, rc = brute_force(feats, q, k=4, exclude=ex, ranges=ranges)
    np.testing.assert_array_equal(bi, ri)  # same cost kernel: identical, ties broken by row
    np.testing.assert_array_equal(bc, rc)
    for i in range(len(q)):
        si, sc = index.search(q[i], k=4, exclude=Exclusion(current=int(src[i]), around=15, clip_end=20))
        np.testing.assert_array_equal(si, bi[i])
        np.testing.assert_array_equal(sc, bc[i])


@pytest.mark.parametrize("around,clip_end", [(0, 0), (20, 0), (20, 20), (200, 60)])
def test_current_frame_and_clip_end_exclusions(data, around, clip_end):
    feats, ranges, index = data
    src, q = _queries(feats, 300, 3, noise=0.01)  # near the current frame: the hard case
    idx, cost = index.search(q, k=4, exclude=Exclusion(current=src, around=around, clip_end=clip_end))
    clip = np.searchsorted(ranges[:, 1], np.arange(len(feats)), side="right")
    rows = np.arange(len(feats))
    allowed = np.ones((len(q), len(feats)), bool)
    allowed &= ~((np.abs(rows[None] - src[:, None]) <= around) & (clip[None] == clip[src][:, None]))
    allowed &= rows[None] < ranges[clip, 1][None] - clip_end
    _assert_exact(idx, cost, _oracle(feats, q, 4, allowed), 4)
    # the excluded neighbourhood really is avoided
    same_clip = clip[np.maximum(idx, 0)] == clip[src][:, None]
    assert not np.any(same_clip & (np.abs(idx - src[:, None]) <= around))


def test_whole_clip_and_mask_exclusions(data):
    feats, ranges, index = data
    rng = np.random.default_rng(4)
    src, q = _queries(feats, 200, 5)
    clip = np.searchsorted(ranges[:, 1], np.arange(len(feats)), side="right")
    own = np.stack([clip[src], (clip[src] + 1) % len(ranges)], axis=1)  # own clip and a "twin"
    mask = rng.random(len(feats)) > 0.3
    idx, cost = index.search(q, k=4, exclude=Exclusion(clips=own, mask=mask))
    allowed = mask[None] & (clip[None] != own[:, :1]) & (clip[None] != own[:, 1:])
    _assert_exact(idx, cost, _oracle(feats, q, 4, allowed), 4)
    # one list of clips for every query
    idx, cost = index.search(q, k=4, exclude=Exclusion(clips=[0, 3, 5]))
    allowed = ~np.isin(clip, [0, 3, 5])[None].repeat(len(q), 0)
    _assert_exact(idx, cost, _oracle(feats, q, 4, allowed), 4)


def test_fewer_allowed_rows_than_k_pads(data):
    feats, ranges, index = data
    mask = np.zeros(len(feats), bool)
    mask[[5, 900, 4000]] = True
    _, q = _queries(feats, 7, 6)
    idx, cost = index.search(q, k=5, exclude=Exclusion(mask=mask))
    assert np.all(np.sort(idx[:, :3], axis=1) == [5, 900, 4000])
    assert np.all(idx[:, 3:] == -1) and np.all(np.isinf(cost[:, 3:]))
    idx1, cost1 = index.search(q[0], k=5, exclude=Exclusion(mask=mask))
    np.testing.assert_array_equal(idx1, idx[0])


def test_ties_and_duplicates_break_by_row_index():
    rng = np.random.default_rng(7)
    base = rng.integers(-3, 4, (300, 6)).astype(np.float32)  # lattice: many equal costs
    feats = np.concatenate([base, base, base])  # exact duplicates
    index = SearchIndex(feats, leaf_size=8, fanout=4, top_nodes=4)
    q = rng.integers(-3, 4, (200, 6)).astype(np.float32) + 0.5 * rng.integers(0, 2, (200, 6))
    idx, cost = index.search(q, k=6)
    ri, rc = brute_force(feats, q, k=6)
    np.testing.assert_array_equal(idx, ri)
    np.testing.assert_array_equal(cost, rc)
    ordered = (cost[:, 1:] > cost[:, :-1]) | ((cost[:, 1:] == cost[:, :-1]) & (idx[:, 1:] > idx[:, :-1]))
    assert ordered.all()


@pytest.mark.parametrize("n,leaf,fanout", [(1, 16, 8), (5, 2, 2), (17, 16, 8), (1000, 4, 16), (4099, 32, 2)])
def test_sizes_and_tree_shapes(n, leaf, fanout):
    rng = np.random.default_rng(n)
    feats = rng.normal(size=(n, 5)).astype(np.float32)
    index = SearchIndex(feats, leaf_size=leaf, fanout=fanout, rotate=n % 2 == 0)
    q = rng.normal(size=(50, 5)).astype(np.float32)
    k = min(3, n)
    idx, cost = index.search(q, k=k)
    _assert_exact(idx, cost, _oracle(feats, q, k, np.ones(n, bool)), k)
    assert sorted(index.perm.tolist()) == list(range(n))


def test_segment_spread_is_the_quartile_spread():
    """The split-axis statistic: upper minus lower quartile per segment and column (order
    statistics m - 1 - m // 4 and m // 4), ties and a partial last segment included."""
    rng = np.random.default_rng(15)
    for n, size in ((1, 4), (7, 3), (100, 16), (1000, 64), (999, 256)):
        for x in (rng.normal(size=(n, 5)), rng.integers(0, 4, (n, 5))):
            x = x.astype(np.float32)
            got = segment_spread(x, size, 4096)
            for g, lo in enumerate(range(0, n, size)):
                seg = np.sort(x[lo:lo + size], axis=0)
                m = len(seg)
                np.testing.assert_array_equal(got[g], seg[m - 1 - m // 4] - seg[m // 4])


def test_bad_input_raises():
    feats = np.zeros((10, 3), np.float32)
    with pytest.raises(KinemaError):
        SearchIndex(np.zeros((0, 3)))
    with pytest.raises(KinemaError):
        SearchIndex(feats, leaf_size=6)
    with pytest.raises(KinemaError):
        SearchIndex(feats, ranges=np.array([[0, 4], [5, 10]]))
    index = SearchIndex(feats)
    with pytest.raises(KinemaError):
        index.search(np.zeros((2, 4)))
    with pytest.raises(KinemaError):
        index.search(np.full(3, np.nan))
    with pytest.raises(KinemaError):
        index.search(np.zeros((2, 3)), exclude=Exclusion(current=[1, 2, 3]))
    with pytest.raises(KinemaError):
        index.search(np.zeros(3), exclude=Exclusion(mask=np.ones(9, bool)))


def test_far_from_origin_readonly_and_strided_inputs():
    """Large coordinates (float32 rounding of the rotated copy matters) and read-only,
    non-contiguous arguments give the brute-force result bit for bit."""
    feats, ranges = _motion_like(6, 500, 9, seed=11)
    feats = feats * 50 + 3000  # rounding of a float32 copy ~1e-4 here, costs down to ~1e-3
    index = SearchIndex(feats, ranges)
    src, q = _queries(feats, 80, 12, noise=0.02)
    q_strided = np.repeat(q, 2, axis=0)[::2]
    q_strided.flags.writeable = False
    mask = np.ones(len(feats), bool)
    mask[::7] = False
    mask.flags.writeable = False
    ex = Exclusion(current=src, around=3, clip_end=5, mask=mask)
    idx, cost = index.search(q_strided, k=4, exclude=ex)
    ri, rc = brute_force(feats, q, k=4, exclude=ex, ranges=ranges)
    np.testing.assert_array_equal(idx, ri)
    np.testing.assert_array_equal(cost, rc)
    i1, c1 = index.search(q[3], k=4, exclude=Exclusion(current=int(src[3]), around=3, clip_end=5, mask=mask))
    np.testing.assert_array_equal(i1, ri[3])


def test_threads_give_the_same_result(data):
    feats, ranges, index = data
    src, q = _queries(feats, 301, 13)
    ex = Exclusion(current=src, around=10, clip_end=5)
    one = index.search(q, k=4, exclude=ex)
    for threads in (2, 3):
        many = index.search(q, k=4, exclude=ex, threads=threads)
        np.testing.assert_array_equal(many[0], one[0])
        np.testing.assert_array_equal(many[1], one[1])
    with pytest.raises(KinemaError):
        index.search(q, threads=0)


def test_many_exact_ties_overflow_the_candidate_buffer():
    """Thousands of identical rows: every one is a candidate, far more than the kernel's first
    buffer holds, so it must grow the buffer and resume; the lowest rows win the ties."""
    rng = np.random.default_rng(14)
    other = rng.normal(3.0, 1.0, (500, 4)).astype(np.float32)
    feats = np.concatenate([np.zeros((6000, 4), np.float32), other])
    index = SearchIndex(feats)
    q = np.zeros((3, 4), np.float32)
    idx, cost = index.search(q, k=5)
    np.testing.assert_array_equal(idx, np.tile(np.arange(5), (3, 1)))
    assert np.all(cost == 0)
    ri, rc = brute_force(feats, q, k=5)
    np.testing.assert_array_equal(idx, ri)
    mask = np.ones(len(feats), bool)
    mask[:3000] = False
    idx1, _ = index.search(q[0], k=2, exclude=Exclusion(mask=mask))
    np.testing.assert_array_equal(idx1, [3000, 3001])


@pytest.fixture(scope="module", params=["lafan1", "bandai"])
def real(request, shared_data):
    """Matching features of a real database (60 Hz, mirrored) and its index."""
    if request.param == "lafan1":
        db = build_from_paths([shared_data / "lafan1"], "lafan1", mirror=True, progress=False)
    else:
        db = build_from_paths([shared_data / "bandai_namco" / "dataset-1"], "bandai", mirror=True, progress=False)
    return db.features, db.ranges, SearchIndex(db.features, db.ranges)


def _real_queries(feats, n, seed):
    """Rows with noise of several scales (0: queries on the data, 1.0: far off it)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, len(feats), n)
    sigma = rng.choice([0.0, 0.02, 0.1, 0.3, 1.0], n)[:, None]
    return src, (feats[src] + sigma * rng.normal(size=(n, feats.shape[1]))).astype(np.float32)


def test_real_features_equal_brute_force_with_exclusions(real):
    """Thousands of queries on real LaFAN1 / Bandai features under every exclusion kind:
    indices and costs bit-identical to the module's brute force."""
    feats, ranges, index = real
    src, q = _real_queries(feats, 1600, 21)
    clip = np.searchsorted(ranges[:, 1], src, side="right")
    own = np.stack([clip, clip ^ 1], axis=1)  # a clip and its mirror twin
    rng = np.random.default_rng(22)
    mask = rng.random(len(feats)) > 0.5
    settings = [(None, 4), (Exclusion(current=src, around=20, clip_end=20), 4),
                (Exclusion(current=src, around=0), 1), (Exclusion(clips=own, clip_end=1), 4),
                (Exclusion(mask=mask, current=src, around=60), 9)]
    for i, (ex, k) in enumerate(settings):
        part = slice(i * 320, (i + 1) * 320)
        if ex is not None:  # this part's queries only
            ex = Exclusion(current=None if ex.current is None else ex.current[part], around=ex.around,
                           clip_end=ex.clip_end, clips=None if ex.clips is None else ex.clips[part], mask=ex.mask)
        idx, cost = index.search(q[part], k=k, exclude=ex)
        ri, rc = brute_force(feats, q[part], k=k, exclude=ex, ranges=ranges)
        np.testing.assert_array_equal(idx, ri)
        np.testing.assert_array_equal(cost, rc)
    # one query at a time gives the batch's answer
    ex = Exclusion(current=src[:40], around=20, clip_end=20)
    bi, bc = index.search(q[:40], k=4, exclude=ex)
    for j in range(40):
        si, sc = index.search(q[j], k=4, exclude=Exclusion(current=int(src[j]), around=20, clip_end=20))
        np.testing.assert_array_equal(si, bi[j])
        np.testing.assert_array_equal(sc, bc[j])


def test_real_features_match_float64_oracle(real):
    feats, ranges, index = real
    _, q = _real_queries(feats, 120, 23)
    idx, cost = index.search(q, k=4)
    _assert_exact(idx, cost, _oracle(feats, q, 4, np.ones(len(feats), bool)), 4)


def _hold_out(feats, ranges, every=5):
    """Index rows and held-out rows: every ``every``-th clip pair (a clip and its mirror twin)
    is left out of the index, as a controller's queries come from motion not in it."""
    pair = np.arange(len(ranges)) // 2
    held = pair % every == 0
    lengths = ranges[:, 1] - ranges[:, 0]
    row_held = np.repeat(held, lengths)
    stops = np.cumsum(lengths[~held])
    return (np.ascontiguousarray(feats[~row_held]), np.stack([stops - lengths[~held], stops], axis=1),
            feats[row_held])


def test_held_out_real_queries_equal_brute_force(real):
    """Queries from real clips that are not in the index (LaFAN1 / Bandai, mirrored), with
    k > 1 and every exclusion kind: indices and costs bit-identical to brute force, costs
    within float32 rounding of a float64 oracle."""
    feats, ranges, _ = real
    index_feats, index_ranges, held = _hold_out(feats, ranges)
    index = SearchIndex(index_feats, index_ranges)
    rng = np.random.default_rng(31)
    q = np.ascontiguousarray(held[rng.choice(len(held), 300, replace=False)])
    near = index.search(q, k=1)[0][:, 0]  # the frame a controller would be playing
    clip = np.searchsorted(index_ranges[:, 1], near, side="right")
    mask = rng.random(len(index_feats)) > 0.2
    settings = [(None, 1), (None, 4), (None, 16), (Exclusion(current=near, around=20, clip_end=20), 4),
                (Exclusion(clips=np.stack([clip, clip ^ 1], axis=1), clip_end=3), 4),
                (Exclusion(mask=mask, current=near, around=0), 6)]
    for i, (ex, k) in enumerate(settings):
        part = slice(i * 50, (i + 1) * 50)
        if ex is not None:
            ex = Exclusion(current=None if ex.current is None else ex.current[part], around=ex.around,
                           clip_end=ex.clip_end, clips=None if ex.clips is None else ex.clips[part], mask=ex.mask)
        idx, cost = index.search(q[part], k=k, exclude=ex)
        ri, rc = brute_force(index_feats, q[part], k=k, exclude=ex, ranges=index_ranges)
        np.testing.assert_array_equal(idx, ri)
        np.testing.assert_array_equal(cost, rc)
        if ex is None:
            _assert_exact(idx, cost, _oracle(index_feats, q[part], k, np.ones(len(index_feats), bool)), k)
    # one query at a time (the controller's fast path) gives the batch's answer
    for j in range(20):
        ex = Exclusion(current=int(near[j]), around=20, clip_end=20)
        si, sc = index.search(q[j], k=4, exclude=ex)
        bi, bc = brute_force(index_feats, q[j], k=4, exclude=ex, ranges=index_ranges)
        np.testing.assert_array_equal(si, bi)
        np.testing.assert_array_equal(sc, bc)


def test_held_out_ties_with_duplicated_real_rows(real):
    """Every real index row present twice (and a block three times): each cost ties, and the
    lower row index wins, as in brute force."""
    feats, ranges, _ = real
    index_feats, _, held = _hold_out(feats, ranges)
    base = index_feats[::7]
    dup = np.concatenate([base, base, base[:500]])
    index = SearchIndex(dup)
    q = np.ascontiguousarray(held[::997][:80])
    for k in (1, 2, 5):
        idx, cost = index.search(q, k=k)
        ri, rc = brute_force(dup, q, k=k)
        np.testing.assert_array_equal(idx, ri)
        np.testing.assert_array_equal(cost, rc)
    assert np.all(idx[:, 0] < len(base))  # a row's first copy beats its duplicates


def test_costs_are_sequential_float32_sums():
    """The reported cost is sum_j (x_j - q_j)^2 rounded step by step in float32, left to
    right (the index's compiled kernel and brute force both), not NumPy's pairwise sum."""
    rng = np.random.default_rng(32)
    feats = (rng.normal(size=(3000, 27)) * rng.uniform(0.01, 100, 27)).astype(np.float32)
    q = rng.normal(size=(40, 27)).astype(np.float32)
    index = SearchIndex(feats)
    idx, cost = index.search(q, k=3)
    for i in range(len(q)):
        d = feats[idx[i]] - q[i]
        want = np.zeros(3, np.float32)
        for j in range(27):
            want = want + d[:, j] * d[:, j]  # float32 at every step
        np.testing.assert_array_equal(cost[i], want)


def test_single_query_inputs_and_caller_array_untouched():
    """The one-query fast path takes lists, float64, read-only and numpy-int exclusions; the
    caller's features are only read, and the index keeps its own copy."""
    feats, ranges = _motion_like(5, 400, 27, seed=33)
    keep = feats.copy()
    index = SearchIndex(feats, ranges)
    np.testing.assert_array_equal(feats, keep)
    q = feats[123] + 0.01
    ref = brute_force(keep, q, k=4, exclude=Exclusion(current=123, around=5, clip_end=2), ranges=ranges)
    ro = q.copy()
    ro.flags.writeable = False
    for arg in (q, q.astype(np.float64), q.tolist(), ro):
        for cur in (123, np.int64(123), np.array(123), np.array([123])):
            got = index.search(arg, k=4, exclude=Exclusion(current=cur, around=5, clip_end=2))
            np.testing.assert_array_equal(got[0], ref[0])
            np.testing.assert_array_equal(got[1], ref[1])
    feats[:] = 0.0  # the caller reuses its array: the index is unaffected
    np.testing.assert_array_equal(index.search(q, k=4, exclude=Exclusion(current=123, around=5, clip_end=2))[0],
                                  ref[0])
    bad = q.copy()
    bad[3] = np.inf
    with pytest.raises(KinemaError):
        index.search(bad)
    with pytest.raises(KinemaError):
        index.search(np.stack([q, bad]))
    with pytest.raises(KinemaError):
        index.search(q, exclude=Exclusion(current=len(feats)))
    with pytest.raises(KinemaError):
        SearchIndex(np.where(np.arange(27) == 4, np.nan, keep[:30]))


@pytest.mark.parametrize("size", [2, 5, 16, 17, 64])
def test_sorting_network_sorts(size):
    """The build's split-axis quartiles come from this network: it must sort any input."""
    from kinema.matching.search_kernels import sorting_network
    net = sorting_network(size)
    width = int(net.max()) + 1
    assert width >= size and np.all(net[:, 0] < net[:, 1])
    rng = np.random.default_rng(size)
    for x in rng.integers(0, 4, (300, width)).astype(np.float32):
        want = np.sort(x)
        for a, b in net:
            if x[a] > x[b]:
                x[a], x[b] = x[b], x[a]
        np.testing.assert_array_equal(x, want)
