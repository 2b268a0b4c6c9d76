"""The showcase demos follow the demo plug-in contract (docs/architecture.md): listed by
``kinema demo --list``, helpers (``_*``) not listed, common headless options accepted."""
from __future__ import annotations

import argparse
import importlib

import pytest

from kinema.cli.demo import demo_names

MINE = ("tracking", "quadruped", "styles")


def test_listed_and_helpers_hidden(capsys):
    from kinema.cli.main import main
    assert main(["demo", "--list"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert set(MINE) <= listed
    assert not any(n.startswith("_") for n in demo_names())


@pytest.mark.parametrize("name", MINE)
def test_headless_options_and_served_clips(name, tmp_path):
    mod = importlib.import_module(f"kinema.demos.{name}")
    assert mod.DESCRIPTION and callable(mod.run) and callable(mod.served_clips)
    parser = argparse.ArgumentParser()
    mod.add_arguments(parser)
    args = parser.parse_args(["--headless", "--frames", "7", "--out", str(tmp_path)])
    assert args.headless and args.frames == 7 and args.out == tmp_path
