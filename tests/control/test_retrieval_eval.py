"""Evaluation statistics of the retrieval controller against independent oracles."""
from __future__ import annotations

import numpy as np
from scipy import stats

from kinema.control.retrieval.metrics import bootstrap_ci, npss, npss_windows


def npss_oracle(pred: np.ndarray, true: np.ndarray) -> float:
    """LaFAN1's fast_npss written out per sequence and dimension with loops."""
    num, den = 0.0, 0.0
    for b in range(pred.shape[0]):
        for d in range(pred.shape[2]):
            pt = np.real(np.fft.fft(true[b, :, d])) ** 2
            pp = np.real(np.fft.fft(pred[b, :, d])) ** 2
            ct = np.cumsum(pt / pt.sum())
            cp = np.cumsum(pp / pp.sum())
            num += np.abs(ct - cp).sum() * pt.sum()
            den += pt.sum()
    return num / den


def test_npss_matches_the_loop_oracle_and_is_zero_for_identical_motion():
    rng = np.random.default_rng(0)
    true = rng.normal(size=(3, 60, 5)).cumsum(1)
    pred = true + rng.normal(size=true.shape) * 0.3
    assert np.isclose(npss(pred, true), npss_oracle(pred, true), rtol=1e-10)
    assert npss(true, true) == 0.0 and npss(pred, true) > 0
    # chunked: the mean-weighted NPSS of the 60-frame chunks, independent of total length
    long_true = rng.normal(size=(240, 5)).cumsum(0)
    long_pred = long_true + rng.normal(size=long_true.shape) * 0.3
    chunks = npss_oracle(long_pred.reshape(4, 60, 5), long_true.reshape(4, 60, 5))
    assert np.isclose(npss_windows(long_pred, long_true), chunks, rtol=1e-10)


def test_bootstrap_interval_agrees_with_scipy():
    rng = np.random.default_rng(1)
    x = rng.normal(0.3, 1.0, 200)
    lo, hi = bootstrap_ci(x, n=4000)
    ref = stats.bootstrap((x,), np.mean, n_resamples=4000, method="percentile", random_state=0).confidence_interval
    assert lo < x.mean() < hi
    assert abs(lo - ref.low) < 0.03 and abs(hi - ref.high) < 0.03
    # a constant gain has a zero-width interval at that value
    assert bootstrap_ci(np.full(10, 0.25)) == [0.25, 0.25]


def test_motion_energy_and_mean_pose_collapse(games105_db, games105_retriever):
    """The hedging diagnostics on real windows: the truth itself moves as much as the actor
    (ratio 1) and is not collapsed (0 cm); the frozen first pose does not move (ratio 0); a
    50/50 blend of the truth with the training mean pose moves exactly half as much and sits
    exactly half the truth's distance nearer the mean pose (joint positions are linear in it)."""
    from kinema.control.retrieval.metrics import joint_positions, window_metrics

    db, norm = games105_db, games105_retriever.norm
    long = db.ranges[:, 1] - db.ranges[:, 0] >= 80
    starts = db.ranges[long, 0] + 10
    assert len(starts) >= 4
    true = db.pose[starts[:, None] + np.arange(60)[None]]
    m = window_metrics(true, true, norm, db, 0.0)
    np.testing.assert_allclose(m["joint_speed_ratio"], 1.0, rtol=1e-6)
    np.testing.assert_allclose(m["mean_pose_collapse_cm"], 0.0, atol=1e-6)
    frozen = np.repeat(true[:, :1], 60, 1)
    assert np.all(window_metrics(frozen, true, norm, db, 0.0)["joint_speed_ratio"] == 0.0)
    half = 0.5 * true + 0.5 * norm.mean
    h = window_metrics(half, true, norm, db, 0.0)
    np.testing.assert_allclose(h["joint_speed_ratio"], 0.5, rtol=1e-4)
    spread = np.linalg.norm(joint_positions(db, true) - joint_positions(db, norm.mean), axis=-1).mean((1, 2)) * 100
    np.testing.assert_allclose(h["mean_pose_collapse_cm"], 0.5 * spread, rtol=1e-4)
    assert spread.min() > 1.0
