"""``kinema train`` as a user runs it: a loss-curve PNG beside the checkpoint, and Ctrl-C
ends in one line (the state of the last validation kept for --resume)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import imageio.v2 as imageio
import numpy as np

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "retrieval_tiny.toml"


def _sigint_default() -> None:
    # a child inherits an ignored SIGINT (pytest-xdist's workers ignore it), and Python then
    # installs no KeyboardInterrupt handler: restore the default a terminal gives a user
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _train(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "kinema.cli", "train", str(CONFIG), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_default, **kw)


def test_ctrl_c_saves_one_line_then_resume_writes_the_loss_curve(tmp_path):
    out = tmp_path / "tiny.safetensors"
    partial = tmp_path / "tiny.partial.safetensors"
    longer = ["--set", "train.free=80"]             # long enough to be interrupted
    proc = _train("--out", out, *longer, cwd=tmp_path)
    deadline = time.time() + 240
    while not partial.is_file() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert partial.is_file(), proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("train:")]  # tqdm's bar
    assert lines == [f"kinema train: interrupted; the state of the last validation is in {partial}; "
                     "run the same command with --resume to continue"], err
    assert "Traceback" not in err and partial.is_file() and not out.exists()

    done = subprocess.run([sys.executable, "-m", "kinema.cli", "train", str(CONFIG), "--out", str(out), *longer,
                           "--resume"], capture_output=True, text=True, cwd=tmp_path, check=False, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stdout
    curve = out.with_suffix(".loss.png")
    assert out.is_file() and curve.is_file() and str(curve) in done.stdout and not partial.exists()
    img = imageio.imread(curve)
    assert img.shape[0] >= 300 and img.shape[1] >= 600
    # curves drawn: some pixels are saturated colour (matplotlib's default line colours),
    # not white background, black text or grey grid
    coloured = (np.ptp(img[..., :3].astype(int), axis=-1) > 60).mean()
    assert coloured > 0.003


def test_tensorboard_logs_beside_the_checkpoint(tmp_path):
    """With tensorboard installed, ``kinema train`` writes the history it records in the
    checkpoint as TensorBoard scalars (train/loss and every validation number, per step)."""
    import pytest
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from kinema.cli.main import main
    from kinema.nn.checkpoint import read_metadata

    out = tmp_path / "tiny.safetensors"
    assert main(["train", str(CONFIG), "--out", str(out)]) == 0
    logs = out.with_suffix(".tensorboard")
    events = EventAccumulator(str(logs))
    events.Reload()
    epochs = read_metadata(out)["history"]["epochs"]
    loss = events.Scalars("train/loss")
    assert [e.step for e in loss] == [r["step"] for r in epochs]
    np.testing.assert_allclose([e.value for e in loss], [r["train_loss"] for r in epochs], rtol=1e-6)
    val = "fr_with" if "fr_with" in epochs[0] else "fr_without"
    np.testing.assert_allclose([e.value for e in events.Scalars(f"validation/{val}")], [r[val] for r in epochs],
                               rtol=1e-6)
    # a second run replaces the first's events (no doubled curves)
    assert main(["train", str(CONFIG), "--out", str(out)]) == 0
    assert len(list(logs.glob("events.out.tfevents.*"))) == 1


def test_tensorboard_scalars_are_live_while_training(tmp_path):
    """A user running ``tensorboard --logdir`` sees the curves during training: the event
    file beside the checkpoint holds train/loss and the validation numbers of the
    validations made so far while ``kinema train`` is still running (they are flushed at
    each validation), and an interrupted run keeps them."""
    import pytest
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "tiny.safetensors"
    logs = out.with_suffix(".tensorboard")
    proc = _train("--out", out, "--set", "train.free=400", cwd=tmp_path)    # 410 steps, a validation every 7
    seen: list[int] = []
    finished = True
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if list(logs.glob("events.out.tfevents.*")):
            events = EventAccumulator(str(logs))
            events.Reload()
            if "train/loss" in events.Tags()["scalars"]:
                seen = [e.step for e in events.Scalars("train/loss")]
                val = [e.step for e in events.Scalars("validation/fr_with")]
                finished = out.exists()             # the checkpoint is written when training ends
                break
        time.sleep(0.2)
    running = proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert running and seen and not finished, err                # read while it trained
    assert seen[0] == 7 and val == seen and seen[-1] < 410, seen  # from the first validation on
    assert proc.returncode == 130, err
    events = EventAccumulator(str(logs))
    events.Reload()
    kept = [e.step for e in events.Scalars("train/loss")]
    assert kept[:len(seen)] == seen and all(s % 7 == 0 for s in kept)
