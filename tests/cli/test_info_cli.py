"""``kinema info``: JSON keys and values agree with the loaded motion; format extras."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kinema
from kinema.cli.main import main


def info_json(capsys, *args) -> dict:
    assert main(["info", *map(str, args), "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1                    # one JSON object on one line
    return json.loads(out[0])


def test_bvh_json(sample_data, capsys):
    path = sample_data / "cmu" / "02_01.bvh"
    m = kinema.load(path)
    d = info_json(capsys, path)
    assert {"format", "joints", "parents", "frames", "fps", "duration"} <= set(d)
    assert d["format"] == "bvh"
    assert d["joints"] == m.joint_names and d["parents"] == m.parents.tolist()
    assert d["frames"] == m.num_frames == 343
    assert d["fps"] == pytest.approx(120.0) and d["duration"] == pytest.approx(343 / 120.0)
    assert d["channels"] == 6 + 3 * (len(m.joint_names) - 1) and d["end_sites"] == 5 + 2


def test_npz_kinds_and_glb_extras(sample_data, shared_data, tmp_path, capsys):
    m = kinema.load(sample_data / "games105" / "walk60.bvh", scale=1.0)
    kinema.save(m, tmp_path / "w.npz")
    d = info_json(capsys, tmp_path / "w.npz")
    assert d["format"] == "kinema-npz" and d["format_version"] == 1 and d["frames"] == m.num_frames
    d = info_json(capsys, shared_data / "quadruped" / "ai4animation_npz" / "D1_008_KAN01_001.npz")
    assert d["format"] == "ai4animation-npz" and d["frames"] == 1072 and len(d["joints"]) == 27
    d = info_json(capsys, sample_data / "fox" / "fox.glb")
    assert d["animations"] == ["Survey", "Walk", "Run"] and d["has_mesh"] is True
    assert len(d["joints"]) == len(d["parents"]) and d["frames"] > 1


def test_human_output_and_errors(sample_data, tmp_path, capsys):
    assert main(["info", str(sample_data / "games105" / "idle.bvh")]) == 0
    out = capsys.readouterr().out
    assert "format     bvh" in out and "frames" in out and "RootJoint" in out
    assert main(["info", str(tmp_path / "missing.bvh")]) == 1
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "bad.bvh").write_text("HIERARCHY\nROOT x\n{\n")
    assert main(["info", str(tmp_path / "bad.bvh")]) == 1
    assert "bad.bvh:" in capsys.readouterr().err
    (tmp_path / "x.txt").write_text("")
    assert main(["info", str(tmp_path / "x.txt")]) == 1


def test_help_runs():
    out = subprocess.run([sys.executable, "-m", "kinema.cli", "info", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--json" in out.stdout
