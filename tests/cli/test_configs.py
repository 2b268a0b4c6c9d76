"""Every shipped training config loads: known settings, a resolvable clip split, a known
database preset and model arguments the model class accepts."""
from __future__ import annotations

from pathlib import Path

import pytest

from kinema.control.retrieval.training import database_config, load_config, settings, split_clips
from kinema.nn.retrieval import RetrievalMamba

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("retrieval_*.toml"))


def test_there_are_configs():
    assert len(CONFIGS) >= 4


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_is_complete(path, shared_data):
    cfg = load_config(path)
    s = settings(cfg)
    assert s.warmup + s.scheduled + s.free > 0 and s.device in ("cpu", "cuda")
    train, val = split_clips(cfg)
    held = set(cfg["data"].get("test", []))
    assert train and val and not held & {p.stem for p in train + val}
    database_config(cfg)
    model = {k: v for k, v in cfg.get("model", {}).items() if k not in ("k", "fusion", "kinematic")}
    if cfg.get("model", {}).get("fusion", "attention") == "attention":
        RetrievalMamba(pose_dim=270, control_dim=12, contact_dim=2, k=cfg["model"].get("k", 4), **model)
