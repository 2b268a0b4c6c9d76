"""``kinema convert``: converts a folder in parallel, lists failures per file, exits non-zero
when any failed while still writing the others."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np

import kinema
from kinema.cli.main import main


def test_convert_folder_with_a_bad_file(sample_data, tmp_path, capsys):
    src = tmp_path / "in"
    (src / "deep").mkdir(parents=True)
    shutil.copy(sample_data / "games105" / "walk60.bvh", src)
    shutil.copy(sample_data / "cmu" / "02_01.bvh", src / "deep")
    (src / "deep" / "bad.bvh").write_text("HIERARCHY\nROOT a\n{\n OFFSET 0 0 0\n CHANNELS 1 Xrotation\n}\n"
                                          "MOTION\nFrames: 2\nFrame Time: 0.1\n1\n")
    out = tmp_path / "out"
    rc = main(["convert", str(src), "-o", str(out), "--jobs", "2", "-q"])
    cap = capsys.readouterr()
    assert rc == 1
    assert "converted 2 of 3 files" in cap.out
    assert "1 failed" in cap.err and "bad.bvh" in cap.err and "truncated" in cap.err
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.npz")) == ["deep/02_01.npz", "walk60.npz"]
    m = kinema.load(out / "deep" / "02_01.npz")
    assert np.array_equal(m.rotations, kinema.load(sample_data / "cmu" / "02_01.bvh").rotations)


def test_convert_success_exit_code_and_progress_bar(sample_data, tmp_path):
    out = subprocess.run([sys.executable, "-m", "kinema.cli", "convert", str(sample_data / "games105"),
                          "-o", str(tmp_path), "--jobs", "1", "--fps", "30", "--scale", "1"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "converted 6 of 6 files" in out.stdout
    assert "100%" in out.stderr and "6/6" in out.stderr        # tqdm's bar
    assert all(kinema.load(p).fps == 30.0 for p in tmp_path.glob("*.npz"))


def test_bad_arguments(tmp_path, capsys):
    assert main(["convert", str(tmp_path / "nothing"), "-o", str(tmp_path / "o")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["convert", str(tmp_path), "-o", str(tmp_path / "o"), "--jobs", "0"]) == 2
    assert main(["convert", str(tmp_path), "-o", str(tmp_path / "o")]) == 1     # empty folder
    assert "no supported files" in capsys.readouterr().err
