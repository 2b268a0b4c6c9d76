"""One way to find the shared data: ``KINEMA_DATA`` or ``kinema --data``, from any folder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

from kinema import data


def _kinema(*args, cwd, env_data=None, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != data.ENV_VAR}
    if env_data is not None:
        env[data.ENV_VAR] = str(env_data)
    return subprocess.run([sys.executable, "-m", "kinema.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.parametrize("demo", ["quadruped", "styles"])
def test_demos_find_the_data_by_kinema_data_from_another_folder(demo, shared_data, tmp_path):
    out = tmp_path / "out"
    res = _kinema("demo", demo, "--headless", "--frames", 10, "--no-video", "--out", out,
                  cwd=tmp_path, env_data=shared_data)
    assert res.returncode == 0, res.stderr
    assert "warning" not in res.stderr
    assert json.loads((out / "metrics.json").read_text())["steps"] == 10


def test_data_option_is_the_same_rule(shared_data, tmp_path):
    res = _kinema("--data", shared_data, "demo", "quadruped", "--headless", "--frames", 5, "--no-video",
                  "--out", tmp_path / "q", cwd=tmp_path, env_data=tmp_path / "elsewhere")
    assert res.returncode == 0, res.stderr          # --data wins over the environment


def test_missing_data_error_names_both_ways_and_the_folder(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    res = _kinema("demo", "quadruped", "--headless", "--frames", 5, "--no-video", "--out", tmp_path / "q",
                  cwd=tmp_path, env_data=empty)
    assert res.returncode == 1
    msg = res.stderr.strip()
    assert len(msg.splitlines()) == 1 and "Traceback" not in msg
    for part in ("quadruped/bvh", str(empty.resolve()), "KINEMA_DATA", "--data"):
        assert part in msg, (part, msg)


def test_a_kinema_data_that_is_no_folder_is_an_error(tmp_path):
    res = _kinema("demo", "styles", "--headless", cwd=tmp_path, env_data=tmp_path / "missing")
    assert res.returncode == 1 and "is not a folder" in res.stderr and "KINEMA_DATA" in res.stderr


def test_fallback_warns_what_is_drawn_instead(tmp_path):
    """The training demo walks the bundled CMU clip without the LaFAN1 walk, and says so."""
    empty = tmp_path / "empty"
    empty.mkdir()
    res = _kinema("demo", "training", "--headless", "--frames", 2, "--steps-per-frame", 1, "--out", tmp_path / "t",
                  cwd=tmp_path, env_data=empty)
    assert res.returncode == 0, res.stderr
    assert "kinema: warning: the LaFAN1 walk (lafan1/walk4_subject1.bvh) not found" in res.stderr
    assert "bundled CMU walk" in res.stderr and "KINEMA_DATA" in res.stderr


def test_library_rules(monkeypatch, tmp_path, shared_data):
    monkeypatch.setenv(data.ENV_VAR, str(shared_data))
    monkeypatch.chdir(tmp_path)                      # the current folder plays no part
    assert data.shared_root() == shared_data.resolve()
    assert data.require_path("lafan1") == shared_data.resolve() / "lafan1"
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="KINEMA_DATA"):
        data.require_path("lafan1", what="the LaFAN1 takes")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert data.optional_path("lafan1", instead="nothing at all") is None
    assert caught and issubclass(caught[0].category, data.DataFallbackWarning)
    assert "nothing at all" in str(caught[0].message) and str(tmp_path.resolve()) in str(caught[0].message)
    monkeypatch.delenv(data.ENV_VAR)
    root = data.shared_root()                        # beside the repository, or absent
    assert root is None or root.name == "data"


@pytest.mark.parametrize("command", ["info", "convert", "retarget", "render"])
def test_path_commands_read_shared_paths_from_another_folder(command, shared_data, tmp_path):
    """``shared:REL`` (and ``sample:REL``) name a file in the data folder for every command
    that takes a motion path, whatever the current folder; with an empty data folder the
    error names the path it looked for."""
    take = "shared:lafan1/multipleActions1_subject1.bvh"
    args = {"info": ["info", take],
            "convert": ["convert", take, "-o", tmp_path / "npz"],
            "retarget": ["retarget", take, "--to", "sample:geno/geno.glb", "-o", tmp_path / "geno.npz"],
            "render": ["render", take, "--frames", 2, "-o", tmp_path / "r.mp4"]}[command]
    res = _kinema(*args, cwd=tmp_path, env_data=shared_data)
    assert res.returncode == 0, res.stderr
    if command == "info":
        assert "multipleActions1_subject1" in res.stdout
    else:
        assert any(tmp_path.rglob("*.npz" if command != "render" else "*.mp4")), list(tmp_path.iterdir())
    empty = tmp_path / "empty"
    empty.mkdir()
    res = _kinema(*args, cwd=tmp_path, env_data=empty)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert str(empty.resolve() / "lafan1" / "multipleActions1_subject1.bvh") in res.stderr, res.stderr


def test_records_name_paths_that_work_on_another_machine(monkeypatch, tmp_path):
    """portable_path writes shared:/sample: inside the data, a relative path inside the
    current folder, else the absolute path; the shipped cards and evaluations hold no
    absolute path (they were once written with a worktree's and a scratch folder's)."""
    import re
    from pathlib import Path

    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    (tmp_path / "lafan1").mkdir()
    assert data.portable_path(tmp_path / "lafan1" / "a.bvh") == "shared:lafan1/a.bvh"
    assert data.portable_path(data.sample_root() / "geno" / "geno.glb") == "sample:geno/geno.glb"
    work = tmp_path.parent / f"{tmp_path.name}_work"
    (work / "models").mkdir(parents=True)
    monkeypatch.chdir(work)
    assert data.portable_path(work / "models" / "m.safetensors") == "models/m.safetensors"
    assert data.portable_path("/elsewhere/m.safetensors") == "/elsewhere/m.safetensors"
    models = Path(__file__).resolve().parents[2] / "models"
    absolute = re.compile(r'(?:^|[\s"\'(`|])((?:/[A-Za-z0-9_.-]+){2,})')
    records = sorted(models.glob("retrieval_*.eval.json")) + [p.with_suffix("").with_suffix(".md")
                                                              for p in models.glob("retrieval_*.eval.json")]
    assert len(records) >= 6
    for path in records:
        assert not absolute.findall(path.read_text()), (path.name, absolute.findall(path.read_text())[:3])
