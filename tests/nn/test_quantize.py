"""Dynamic int8 quantisation: Linear layers replaced, outputs close to float32 on real poses."""
from __future__ import annotations

import torch

from kinema.nn.mamba import Mamba
from kinema.nn.models import MLP
from kinema.nn.quantize import count_quantized, quantize_dynamic


def _rel_err(a, b):
    return float((a - b).norm() / b.norm())


def test_quantized_mlp_close_to_float(lafan_poses):
    x = lafan_poses[1000:1064]
    torch.manual_seed(0)
    model = MLP(89, 89, hidden=(128, 128))
    model.input_norm.fit(x)
    model.output_norm.fit(x)
    q = quantize_dynamic(model)
    assert count_quantized(q) == 3 and count_quantized(model) == 0  # original untouched
    with torch.no_grad():
        yf, yq = model(x), q(x)
    err = _rel_err(model.output_norm.normalise(yq), model.output_norm.normalise(yf))
    assert 0 < err < 0.05  # int8 changes the result, but only by a few percent


def test_quantized_mamba_step_and_scan(lafan_poses):
    x = lafan_poses[1000:1032].unsqueeze(0)
    torch.manual_seed(0)
    model = Mamba(89, 89, d_model=64, n_layers=2, d_state=8).eval()
    model.input_norm.fit(x)
    model.output_norm.fit(x)
    q = quantize_dynamic(model)
    assert count_quantized(q) == 2 * 4 + 2  # in/x/dt/out projections per layer + heads
    with torch.no_grad():
        yf = model(x)
        yq = q(x)
        yq_step = q.rollout_steps(x)
    assert _rel_err(yq, yf) < 0.05
    # activation scales are per call (whole sequence vs one frame), so the quantised scan and
    # recurrence differ slightly; both stay close to float32
    assert _rel_err(yq_step, yf) < 0.05
    assert _rel_err(yq_step, yq) < 0.05


def test_quantize_inside_inference_mode():
    torch.manual_seed(0)
    model = Mamba(5, 5, d_model=16, n_layers=1, d_state=4).eval()
    x = torch.randn(2, 5)
    with torch.inference_mode():
        q = quantize_dynamic(model)
        y, _ = q.step(q.initial_state(2), x)
        yf, _ = model.step(model.initial_state(2), x)
    assert not q.layers[0].mixer.A_log.is_inference()
    assert _rel_err(y, yf) < 0.05
