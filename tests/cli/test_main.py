import subprocess
import sys

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
