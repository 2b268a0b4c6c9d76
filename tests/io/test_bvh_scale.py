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


def _cmu_files(root):
    return sorted((root / "cmu").glob("*.bvh")) + sorted((root / "cmu" / "xia_styles").glob("*.bvh"))


def test_cmu_units_detected_from_the_skeletons_height(shared_data):
    """CMU files are in 1/0.45 inch: read as centimetres they were a 26 cm person."""
    files = _cmu_files(shared_data)
    assert len(files) >= 5
    for path in files:
        m = kinema.load(path)
        assert m.metadata["bvh"]["scale"] == pytest.approx(2.54 / 45)
        g = m.global_positions()
        names = m.skeleton.names
        leg = np.linalg.norm(g[:, names.index("LeftLeg")] - g[:, names.index("LeftUpLeg")], axis=-1) + \
            np.linalg.norm(g[:, names.index("LeftFoot")] - g[:, names.index("LeftLeg")], axis=-1)
        assert 0.65 < leg.mean() < 1.05, path.name          # thigh + shin of an adult
        assert 1.15 < np.ptp(g[:, :, 1], axis=1).max() < 2.0, path.name
        cm = kinema.load(path, scale=0.01)                    # the override still wins
        np.testing.assert_allclose(cm.positions, m.positions * (0.01 / m.metadata["bvh"]["scale"]), rtol=1e-5, atol=1e-6)


def test_bundled_cmu_clip_is_a_person(sample_data):
    m = kinema.load(sample_data / "cmu" / "02_01.bvh")
    assert 1.3 < np.ptp(m.global_positions()[0, :, 1]) * 1.1 < 2.1
