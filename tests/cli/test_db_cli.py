"""``kinema db build`` / ``kinema db info`` on real files (per the CLI plug-in contract)."""
from __future__ import annotations

import json
import subprocess
import sys

from kinema.cli.main import main
from kinema.matching.database import Database


def test_db_build_and_info(shared_data, tmp_path, capsys):
    folder = tmp_path / "clips"
    folder.mkdir()
    for f in sorted((shared_data / "bandai_namco" / "dataset-1").glob("*walk_*.bvh"))[:3]:
        (folder / f.name).write_bytes(f.read_bytes())
    out = tmp_path / "db.npz"
    proc = subprocess.run([sys.executable, "-m", "kinema.cli", "db", "build", str(folder), "-o", str(out),
                           "--config", "bandai", "--mirror"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "database: 100%" in proc.stderr and "3/3" in proc.stderr  # one tqdm bar: each file loaded and added in turn
    db = Database.load(out)
    assert db.mirror and len(db.clip_names) == 6 and f"fingerprint {db.fingerprint}" in proc.stdout

    assert main(["db", "info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"fingerprint", "rows", "pose_width", "frame_time", "clips"} <= set(info)
    assert info["fingerprint"] == db.fingerprint and info["rows"] == db.rows
    assert info["pose_width"] == 270 and abs(info["frame_time"] - 1 / 60) < 1e-12
    assert info["clips"] == db.clip_names

    assert main(["db", "info", str(out)]) == 0
    text = capsys.readouterr().out
    assert db.fingerprint in text and str(db.rows) in text

    # rebuilding the same inputs gives the same fingerprint; bad inputs exit non-zero
    assert main(["db", "build", str(folder), "-o", str(tmp_path / "b.npz"), "--config", "bandai",
                 "--mirror", "--quiet"]) == 0
    assert Database.load(tmp_path / "b.npz").fingerprint == db.fingerprint
    capsys.readouterr()
    assert main(["db", "build", str(tmp_path / "missing"), "-o", str(tmp_path / "c.npz")]) == 1
    assert "missing" in capsys.readouterr().err
    assert main(["db", "info", str(tmp_path / "clips" / next(folder.iterdir()).name)]) == 1
