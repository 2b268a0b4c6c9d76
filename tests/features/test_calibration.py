"""Opening calibration T-poses: found in the LaFAN1 takes, absent elsewhere, trimmed by
databases that ask for it without touching the presets' fingerprints."""
from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema.features.calibration import arm_elevation, calibration_frames
from kinema.matching.config import DatabaseConfig
from kinema.matching.database import build_database, source_from_file
from kinema.motion.roles import find_roles


def test_lafan1_takes_open_with_a_tpose_that_is_found(shared_data):
    takes = sorted((shared_data / "lafan1").glob("*.bvh"))
    assert len(takes) == 7
    for path in takes:
        m = kinema.load(path)
        cut = calibration_frames(m)
        assert 1.5 * m.fps < cut < 5 * m.fps, (path.name, cut)          # 2-4 s T-pose
        el = arm_elevation(m.global_positions()[: cut + 1].astype(np.float64), find_roles(m.skeleton))
        assert (np.abs(el[:int(m.fps)]) < 30).all()                       # arms level first
        assert (el[cut] < -50).all(), path.name                           # arms down after it


@pytest.mark.parametrize("rel", [("games105", "walk_forward.bvh"), ("cmu", "02_01.bvh"),
                                 ("bandai_namco", "dataset-1", "dataset-1_walk_proud_001.bvh")])
def test_takes_without_a_tpose_are_untouched(shared_data, rel):
    assert calibration_frames(kinema.load(shared_data.joinpath(*rel))) == 0


def test_non_humanoids_are_untouched(sample_data):
    assert calibration_frames(kinema.load(sample_data / "fox" / "fox.glb")) == 0


def test_presets_keep_their_fingerprints_and_trimming_is_recorded(shared_data):
    cfg = DatabaseConfig.preset("lafan1")
    assert not cfg.trim_calibration and "trim_calibration" not in cfg.to_dict()
    src = source_from_file(shared_data / "lafan1" / "walk4_subject1.bvh")
    src.motion = src.motion[:400]
    plain = build_database([src], cfg, progress=False)
    from dataclasses import replace
    trimmed = build_database([src], replace(cfg, trim_calibration=True), progress=False)
    cut = calibration_frames(src.motion)
    assert trimmed.sources[0]["calibration_frames"] == cut and "calibration_frames" not in plain.sources[0]
    assert plain.rows - trimmed.rows == pytest.approx(cut * cfg.fps / src.motion.fps, abs=2)
    assert trimmed.fingerprint != plain.fingerprint
    assert DatabaseConfig.from_dict(trimmed.config.to_dict()).trim_calibration


def test_lafan1_dataset_preset_trims_the_tpose(shared_data, tmp_path):
    from kinema.features.dataset import FeatureSpec, build_dataset
    path = shared_data / "lafan1" / "walk4_subject1.bvh"
    spec = FeatureSpec.lafan1(fps=30.0)
    assert spec.trim_calibration and spec.to_json()["trim_calibration"]
    assert "trim_calibration" not in FeatureSpec().to_json()
    trimmed = build_dataset([path], tmp_path / "t", spec=spec, validation=0.0, progress=False)
    kept = build_dataset([path], tmp_path / "k", spec=FeatureSpec.lafan1(fps=30.0, trim_calibration=False),
                         validation=0.0, progress=False)
    cut = calibration_frames(kinema.load(path))
    assert cut > 0 and len(kept.clips[0:1]) == 1
    assert (kept.clips[0].stop - kept.clips[0].start) - (trimmed.clips[0].stop - trimmed.clips[0].start) == cut
