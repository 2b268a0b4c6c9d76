"""BVH unit detection: centimetre files are scaled by 0.01, metre files are kept."""
import numpy as np
import pytest

import kinema
from kinema.io import bvh


@pytest.mark.parametrize("rel,expected", [
    ("games105/walk60.bvh", 1.0),          # GAMES-105 is in metres (data README)
    ("lafan1/walk4_subject1.bvh", 0.01),   # LaFAN1 in centimetres
    ("quadruped/bvh/D1_008_KAN01_001.bvh", 0.01),
])
def test_auto_scale_follows_the_files_units(shared_data, rel, expected):
    m = kinema.load(shared_data / rel)
    assert m.metadata["bvh"]["scale"] == expected
    height = np.ptp(m.global_positions()[0, :, 1])
    assert 0.3 < height < 2.2  # a person or a dog, in metres


def test_explicit_scale_wins(sample_data):
    path = sample_data / "games105" / "walk60.bvh"
    auto = kinema.load(path)
    cm = kinema.load(path, scale=0.01)
    np.testing.assert_allclose(cm.positions, auto.positions * 0.01, rtol=1e-6, atol=1e-9)


def test_bad_scale_is_an_error(sample_data):
    with pytest.raises(ValueError, match="auto"):
        bvh.load(sample_data / "games105" / "walk60.bvh", scale="metres")
