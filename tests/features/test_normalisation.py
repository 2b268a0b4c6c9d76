"""The one normaliser: per-dimension or per-group statistics, weights folded or applied,
streamed moments, round trips."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kinema.features.normalisation import Normaliser


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2000, 7)) * np.array([1.0, 2.0, 0.5, 3.0, 3.0, 0.1, 1.0]) + np.arange(7)
    x[:, 6] = 4.0                       # a constant dimension
    return x


def test_per_dimension(data):
    n = Normaliser.fit(data, floor=1e-2)
    assert n.mean.dtype == np.float32 and n.weight is None
    np.testing.assert_allclose(n.mean, data.mean(0), rtol=1e-6)
    np.testing.assert_allclose(n.std[:6], data.std(0)[:6], rtol=1e-6)
    assert n.std[6] == pytest.approx(1e-2)
    z = n.normalise(data)
    assert z.dtype == np.float32
    np.testing.assert_allclose(z[:, :6].std(0), 1, rtol=1e-4)
    np.testing.assert_allclose(n.denormalise(z), data, atol=1e-5)


def test_groups_fold_their_weights(data):
    """One scale per group (mean std of its dimensions over its weight): the normalised
    group's mean std is its weight; a constant group keeps its units (scale 1 / weight)."""
    layout = [("a", 0, 2, 0.5), ("b", 2, 5, 2.0), ("c", 5, 6, 1.0), ("flat", 6, 7, 4.0)]
    n = Normaliser.fit(data, layout, dtype=np.float64)
    z = n.normalise(data).astype(np.float64)
    for _name, a, b, w in layout[:3]:
        assert len(set(n.std[a:b])) == 1
        assert z[:, a:b].std(0).mean() == pytest.approx(w, rel=1e-5)
    assert n.std[6] == pytest.approx(1 / 4.0)
    np.testing.assert_allclose(n.denormalise(z), data, atol=1e-5)


def test_pooled_groups_with_weights_after(data):
    layout = [("a", 0, 2, 0.5), ("b", 2, 7, 2.0)]
    n = Normaliser.fit(data, layout, pooled=True, eps=1e-6, fold_weights=False, dtype=np.float64)
    assert n.std[0] == data[:, :2].std() + 1e-6 and n.std[4] == data[:, 2:].std() + 1e-6
    np.testing.assert_array_equal(n.weight, [0.5, 0.5, 2, 2, 2, 2, 2])
    z = n.normalise(data)
    np.testing.assert_allclose(z, (data - data.mean(0)) / n.std * n.weight, rtol=1e-5, atol=1e-6)
    back = n.denormalise(z)
    assert back.dtype == np.float64
    np.testing.assert_allclose(back, data, atol=1e-5)


def test_streamed_moments_equal_the_fit(data):
    total, squares = np.zeros(7), np.zeros(7)
    for part in np.array_split(data.astype(np.float32), 7):
        total += part.sum(0, dtype=np.float64)
        squares += np.einsum("bd,bd->d", part, part, dtype=np.float64)
    streamed = Normaliser.from_moments(len(data), total, squares, floor=1e-6)
    fitted = Normaliser.fit(data, floor=1e-6)
    np.testing.assert_allclose(streamed.mean, fitted.mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(streamed.std, fitted.std, rtol=1e-4, atol=1e-6)


def test_json_round_trip(data):
    for n in (Normaliser.fit(data, floor=1e-2),
              Normaliser.fit(data, [("a", 0, 7, 2.0)], pooled=True, fold_weights=False)):
        again = Normaliser.from_json(json.loads(json.dumps(n.to_json())))
        np.testing.assert_array_equal(again.normalise(data), n.normalise(data))
