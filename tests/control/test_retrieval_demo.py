"""`kinema demo locomotion --headless` with a freshly trained tiny checkpoint: the database is
rebuilt on first run (fingerprint-checked, then cached), every controller runs the scripted
track and the metrics JSON holds what the character did."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kinema.cli.main import main
from kinema.control.retrieval.controller import RetrievalController
from kinema.control.retrieval.training import load_config, train
from kinema.demos.locomotion import TRACK, scripted_stick

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "retrieval_tiny.toml"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, sample_data):
    cfg = load_config(CONFIG)
    ckpt, meta = train(cfg, tmp_path_factory.mktemp("demo") / "tiny.safetensors", log=lambda *_: None)
    return cfg, ckpt, meta


def test_scripted_stick_follows_the_track():
    assert np.array_equal(scripted_stick(0.5), [0.0, 1.0])
    assert np.array_equal(scripted_stick(2.5), [-0.8, 0.6])
    total = sum(d for d, _, _ in TRACK)
    assert np.array_equal(scripted_stick(total + 0.5), scripted_stick(0.5))


def test_headless_demo_runs_every_controller(tmp_path, tiny):
    cfg, ckpt, meta = tiny
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = ["demo", "locomotion", "--headless", "--frames", "150", "--no-video", "--checkpoint", str(ckpt), "--out", str(out),
            "--cache", str(cache)]
    assert main(args) == 0
    assert (cache / f"retrieval_db_{meta['fingerprint']}.npz").is_file()
    result = json.loads((out / "metrics.json").read_text())
    assert result["database"] == meta["fingerprint"]
    assert set(result["controllers"]) == {"retrieval", "no_retrieval", "matching"}
    for m in result["controllers"].values():
        assert m["frames"] == 150 and m["finite"]
    # motion matching plays real walking data: it follows the 2 s walk forward
    mm = result["controllers"]["matching"]
    assert mm["distance_travelled_m"] > 0.5 and mm["trajectory_error_m"] < mm["simulation_travelled_m"]
    # second run reads the cached database (no rebuild message needed; same fingerprint)
    assert main(args[:4] + ["30"] + args[5:] + ["--controller", "retrieval"]) == 0


def test_headless_demo_replays_an_input_track(tmp_path, tiny):
    """``--input`` drives the headless run instead of the built-in TRACK: a released stick
    keeps motion matching's character near its start, where the TRACK walks it forward."""
    cfg, ckpt, meta = tiny
    track = tmp_path / "stand.json"
    track.write_text(json.dumps({"version": 1, "fps": 60, "duration": 2.5, "keyframes": [{"time": 0.0}]}))
    runs = {}
    for name, extra in (("track", []), ("stand", ["--input", str(track)])):
        out = tmp_path / name
        assert main(["demo", "locomotion", "--headless", "--frames", "150", "--no-video", "--controller", "matching",
                     "--checkpoint", str(ckpt), "--out", str(out), "--cache", str(tmp_path / "cache")] + extra) == 0
        runs[name] = json.loads((out / "metrics.json").read_text())
    assert runs["stand"]["track"] == str(track) and runs["track"]["track"] != str(track)
    walked = runs["track"]["controllers"]["matching"]["simulation_travelled_m"]
    stood = runs["stand"]["controllers"]["matching"]["simulation_travelled_m"]
    assert walked > 0.5 and stood < 0.05


def test_controller_modes_share_the_character_state(tiny):
    cfg, ckpt, _ = tiny
    from kinema.control.retrieval.training import build_databases
    db = build_databases(cfg)[0]
    ctl = RetrievalController(ckpt, db)
    control = db.trajectory[db.ranges[4, 0] + 30]
    ctl.set_mode("matching")
    for _ in range(12):
        ctl.step(control)
    # playback poses are database rows
    assert np.isclose(((db.pose - ctl.pose) ** 2).sum(1).min(), 0.0)
    before = ctl.root_pos.copy()
    ctl.set_mode("retrieval")
    pose = ctl.step(control)
    assert np.all(np.isfinite(pose)) and not np.array_equal(ctl.root_pos, before)
