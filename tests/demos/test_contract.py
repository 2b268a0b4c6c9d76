"""Every demo follows the one runner's contract (``kinema.cli.demo``): listed by
``kinema demo --list``, helpers (``_*``) not listed, the runner's options accepted, a
``programs(args)`` whose programs have ``metrics()``; a headless run writes metrics.json
and, where OpenGL runs, an MP4 whose frames are not blank."""
from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from kinema.cli.demo import demo_names, parse_demo_args, run_demo

SERVED = ("tracking", "quadruped", "styles")
ALL = ("crowd", "ecs", "ik", "locomotion", "matching", "quadruped", "styles", "tracking", "training")


def test_listed_and_helpers_hidden(capsys):
    from kinema.cli.main import main
    assert main(["demo", "--list"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert set(ALL) == listed == set(demo_names())
    assert not any(n.startswith("_") for n in demo_names())


@pytest.mark.parametrize("name", ALL)
def test_every_demo_takes_the_runner_options(name, tmp_path):
    mod = importlib.import_module(f"kinema.demos.{name}")
    assert mod.DESCRIPTION and callable(mod.programs) and not hasattr(mod, "run")
    _, args = parse_demo_args(name, ["--headless", "--frames", "7", "--out", str(tmp_path), "--no-video"])
    assert args.headless and args.mode == "headless" and args.frames == 7 and args.out == tmp_path
    assert args.no_video and not args.png and args.width > 0 and args.render_every >= 1
    assert (name in SERVED) == callable(getattr(mod, "served_clips", None))


def test_headless_run_writes_the_video_and_the_metrics(tmp_path):
    """``kinema demo ik --headless``: the runner's keys and the program's metrics in one file,
    and the MP4 (one frame per step) shows the chain on the floor."""
    import imageio.v2 as imageio

    m = run_demo("ik", ["--headless", "--frames", "12", "--out", str(tmp_path), "--width", "320", "--height", "192"])
    assert json.loads((tmp_path / "metrics.json").read_text()) == json.loads(json.dumps(m))
    assert m["demo"] == "ik" and m["mode"] == "headless" and m["steps"] == 12 and m["frames"] == 12
    assert m["sim_seconds"] == pytest.approx(12 / 60)
    if m["video"] is None:
        pytest.skip("no OpenGL context here (the runner then writes metrics only)")
    with imageio.get_reader(m["video"]) as reader:
        frames = list(reader.iter_data())
    assert len(frames) == 12 and frames[0].shape == (192, 320, 3)
    assert np.asarray(frames[-1], np.float32).std() > 5          # a scene, not a blank frame
