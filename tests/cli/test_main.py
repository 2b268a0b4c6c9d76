import subprocess
import sys
from pathlib import Path

import pytest

from kinema.cli.main import build_parser, main


def test_help_lists_subcommands(capsys):
    parser = build_parser()
    text = parser.format_help()
    assert "demo" in text


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out


def test_entry_point_runs_as_module():
    out = subprocess.run([sys.executable, "-m", "kinema.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "kinema" in out.stdout


@pytest.mark.parametrize("module,extra,argv", [
    ("pyray", "render", ["render", "{clip}", "-o", "{tmp}/x.mp4", "--frames", "1"]),
    ("torch", "train", ["train", "configs/retrieval_sample.toml", "--out", "{tmp}/m.safetensors"]),
])
def test_missing_extra_names_the_pip_command(module, extra, argv, tmp_path):
    """Without an optional dependency a command ends in one line naming the extra, not a
    ModuleNotFoundError traceback (the module is blocked as if it were not installed)."""
    from kinema.data import sample_path
    args = [a.format(clip=sample_path("games105", "walk_forward.bvh"), tmp=tmp_path) for a in argv]
    code = (f"import sys; sys.modules[{module!r}] = None; from kinema.cli.main import main; "
            f"sys.exit(main({args!r}))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 1, res.stderr
    assert f"pip install 'kinema[{extra}]'" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
