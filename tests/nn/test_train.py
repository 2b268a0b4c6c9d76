"""Training loop: exact resume, early stopping, step API, loss plot, schedule and groups."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kinema.nn.checkpoint import load_checkpoint
from kinema.nn.models import MLP
from kinema.nn.train import TrainConfig, Trainer, parameter_groups, plot_losses, seed_everything


def _data(n=96, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=g)
    y = torch.stack([x[:, 0] * x[:, 1], torch.sin(x[:, 2]), x[:, 3] - x[:, 4]], -1)
    return x, y


def _model():
    seed_everything(3)
    return MLP(5, 3, hidden=(32, 32), dropout=0.1)  # dropout makes the RNG state matter


def _config(**kw):
    base = dict(epochs=4, batch_size=16, lr=3e-3, restart_epochs=2, progress=False, seed=7)
    base.update(kw)
    return TrainConfig(**base)


def test_resume_matches_uninterrupted_run(tmp_path):
    x, y = _data()
    val = _data(32, seed=1)
    ref = Trainer(_model(), (x, y), val, _config())
    ref.fit()
    ref_params = [p.detach().clone() for p in ref.model.parameters()]

    # interrupt mid-epoch (after 8 of 12 steps of epoch 2), through a checkpoint file
    first = Trainer(_model(), (x, y), val, _config())
    for _ in range(first.steps_per_epoch + 2):
        first.step()
    path = first.save(tmp_path / "mid.safetensors")
    torch.manual_seed(12345)  # disturb the global RNG: resume must restore it
    second = Trainer.resume(path, (x, y), val)
    assert second.global_step == first.global_step and second.epoch == 1
    second.fit()
    for a, b in zip(ref_params, second.model.parameters()):
        assert torch.equal(a, b)
    assert second.history == ref.history
    assert len(ref.history["val"]) == 4 and len(ref.history["train_mse"]) == 4  # model's loss parts
    assert ref.history["train"][-1] < ref.history["train"][0]


def test_step_api_equals_fit():
    x, y = _data()
    a = Trainer(_model(), (x, y), None, _config(epochs=2))
    a.fit()
    b = Trainer(_model(), (x, y), None, _config(epochs=2))
    while b.epoch < 2:  # e.g. N steps per frame from an engine update loop
        for _ in range(5):
            if b.epoch < 2:
                b.step()
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(p, q)
    assert b.global_step == 2 * b.steps_per_epoch == 12


def test_early_stopping_and_outputs(tmp_path):
    x, y = _data()
    # validation targets unrelated to the inputs: validation loss cannot keep improving
    xv = torch.randn(32, 5, generator=torch.Generator().manual_seed(5))
    yv = torch.randn(32, 3, generator=torch.Generator().manual_seed(6)) * 5
    t = Trainer(_model(), (x, y), (xv, yv), _config(epochs=50, patience=2, lr=1e-2), out_dir=tmp_path)
    hist = t.fit()
    assert t.stopped and t.epoch < 50
    assert len(hist["val"]) == t.epoch
    best = int(np.argmin(hist["val"]))
    assert t.epoch == best + 1 + 2  # stopped exactly `patience` epochs after the best
    png = (tmp_path / "loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert json.loads((tmp_path / "history.json").read_text())["val"] == hist["val"]
    model, meta = load_checkpoint(tmp_path / "best.safetensors")
    assert meta["training_state"]["counters"]["epoch"] == best + 1
    assert meta["config"]["patience"] == 2


def test_cosine_warm_restarts_per_step():
    x, y = _data()
    t = Trainer(_model(), (x, y), None, _config(epochs=4, restart_epochs=1, min_lr=0.0))
    lrs = []
    for _ in range(2 * t.steps_per_epoch):
        lrs.append(t.optimizer.param_groups[0]["lr"])
        t.step()
    n = t.steps_per_epoch
    assert lrs[0] == pytest.approx(3e-3) and lrs[n] == pytest.approx(3e-3)  # restart
    assert all(a > b for a, b in zip(lrs[:n - 1], lrs[1:n]))  # decays within a cycle
    expected = 0.5 * 3e-3 * (1 + np.cos(np.pi * 3 / n))
    assert lrs[3] == pytest.approx(expected)


def test_gradient_clipping_bounds_update():
    x, y = _data()
    model = MLP(5, 3, hidden=(8,))
    t = Trainer(model, (x, y * 1e4), None, _config(grad_clip=1e-3, lr=1.0, weight_decay=0.0))
    before = [p.detach().clone() for p in model.parameters()]
    t.step()
    # Adam normalises the step, so check the clipped gradient norm directly instead
    grads = [p.grad for p in model.parameters()]
    total = torch.sqrt(sum((g ** 2).sum() for g in grads))
    assert total <= 1e-3 * (1 + 1e-4)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_weight_decay_groups_exclude_ssm_and_biases():
    from kinema.nn.mamba import Mamba
    m = Mamba(3, 3, d_model=16, n_layers=1, d_state=4)
    decay, no_decay = parameter_groups(m, 0.1)
    names = {id(p): n for n, p in m.named_parameters()}
    nd = {names[id(p)] for p in no_decay["params"]}
    assert "layers.0.mixer.A_log" in nd and "layers.0.mixer.D" in nd and "in_head.bias" in nd
    assert "layers.0.mixer.in_proj.weight" in {names[id(p)] for p in decay["params"]}


def test_plot_losses_handles_val(tmp_path):
    p = plot_losses({"step_loss": [1.0, 0.5, 0.2, 0.1], "train": [0.7, 0.15], "val": [0.8, 0.3]},
                    tmp_path / "x" / "l.png")
    assert p.read_bytes()[:4] == b"\x89PNG"


def test_trainer_fits_mamba_on_real_windows_with_parallel_scan(lafan_poses):
    from kinema.nn.mamba import Mamba
    windows = torch.stack([lafan_poses[1000 + 20 * i: 1000 + 20 * i + 17] for i in range(32)])
    x, y = windows[:, :-1], windows[:, 1:]
    seed_everything(0)
    model = Mamba(89, 89, d_model=32, n_layers=1, d_state=4, scan="parallel", chunk=8)
    model.input_norm.fit(x)
    model.output_norm.fit(y)
    t = Trainer(model, (x[:24], y[:24]), (x[24:], y[24:]), _config(epochs=6, batch_size=8, lr=1e-2))
    hist = t.fit()
    assert hist["train"][-1] < hist["train"][0] / 3
    assert hist["val"][-1] < hist["val"][0]
