"""Mamba backbone: parameter count of the published configuration, and agreement of the
sequential scan, the parallel scan and the step-by-step recurrence (float64, 1e-10)."""
from __future__ import annotations

import pytest
import torch

from kinema.nn.mamba import Mamba, MambaState, scan_parallel, scan_sequential


def test_parameter_count_matches_published_model():
    m = Mamba(163, 153, d_model=256, n_layers=4, d_state=16, d_conv=4, d_inner=512, dt_rank=16)
    assert sum(p.numel() for p in m.parameters()) == 1_833_625
    # defaults derive d_inner = 2 d_model and dt_rank = ceil(d_model / 16)
    assert Mamba(163, 153).hparams["dt_rank"] == 16
    assert Mamba(163, 153).hparams["d_inner"] == 512


def test_initialisation_follows_reference():
    torch.manual_seed(0)
    mixer = Mamba(4, 4, d_model=64, n_layers=1, d_state=8).layers[0].mixer
    A = -torch.exp(mixer.A_log)
    assert torch.allclose(A, -torch.arange(1, 9, dtype=torch.float32).expand(128, 8), atol=1e-6)
    assert torch.all(mixer.D == 1)
    dt = torch.nn.functional.softplus(mixer.dt_proj.bias)
    assert dt.min() >= 1e-3 * 0.999 and dt.max() <= 0.1 * 1.001
    assert mixer.dt_proj.weight.abs().max() <= 4 ** -0.5


def _small(scan_chunk: int = 8) -> Mamba:
    torch.manual_seed(1)
    m = Mamba(7, 5, d_model=16, n_layers=2, d_state=4, d_conv=4, d_inner=32, chunk=scan_chunk).double()
    with torch.no_grad():  # move away from the identity-like init so every term matters
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
        m.input_norm.set(torch.randn(7), torch.rand(7) + 0.5)
        m.output_norm.set(torch.randn(5), torch.rand(5) + 0.5)
    return m


def _grads(m: Mamba, x: torch.Tensor, run) -> tuple[torch.Tensor, list[torch.Tensor]]:
    x = x.clone().requires_grad_(True)
    y = run(m, x)
    loss = (y ** 2).mean() + y.sum() * 0.1
    params = list(m.parameters())
    g = torch.autograd.grad(loss, [x] + params)
    return y.detach(), list(g)


RUNS = {
    "sequential": lambda m, x: m(x, scan="sequential"),
    "parallel": lambda m, x: m(x, scan="parallel"),
    "step": lambda m, x: m.rollout_steps(x),
}


@pytest.mark.parametrize("length", [1, 2, 3, 5, 8, 13, 37])
def test_scans_and_recurrence_agree_float64(length):
    m = _small()
    x = torch.randn(3, length, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(length))
    y_ref, g_ref = _grads(m, x, RUNS["sequential"])
    assert y_ref.abs().max() > 0.1
    for name in ("parallel", "step"):
        y, g = _grads(m, x, RUNS[name])
        assert (y - y_ref).abs().max() < 1e-10, name
        for a, b in zip(g, g_ref):
            assert (a - b).abs().max() < 1e-10, name
    assert g_ref[0].abs().max() > 0  # gradient reaches the input


def test_state_carries_across_calls():
    """Running two halves with the carried state equals one run (conv buffer and h)."""
    m = _small()
    x = torch.randn(2, 11, 7, dtype=torch.float64)
    whole = m(x)
    for split in (2, 6):  # 2 < d_conv - 1 exercises a conv buffer partly from the initial state
        for scan in ("sequential", "parallel"):
            y1, s = m.forward_with_state(x[:, :split], scan=scan)
            y2, s2 = m.forward_with_state(x[:, split:], s, scan=scan)
            assert isinstance(s2, MambaState)
            assert (torch.cat([y1, y2], 1) - whole).abs().max() < 1e-10
    # step from the scan's final state continues the sequence
    y1, s = m.forward_with_state(x[:, :10])
    y_last, _ = m.step(s, x[:, 10])
    assert (y_last - whole[:, 10]).abs().max() < 1e-10


def test_parallel_scan_kernel_matches_sequential_with_initial_state():
    g = torch.Generator().manual_seed(3)
    B, L, Di, N = 2, 21, 6, 3
    dA = torch.rand(B, L, Di, N, generator=g, dtype=torch.float64)
    dBu = torch.randn(B, L, Di, N, generator=g, dtype=torch.float64)
    C = torch.randn(B, L, N, generator=g, dtype=torch.float64)
    h0 = torch.randn(B, Di, N, generator=g, dtype=torch.float64)
    ys, hs = scan_sequential(dA, dBu, C, h0)
    for chunk in (1, 4, 5, 32):
        yp, hp = scan_parallel(dA, dBu, C, h0, chunk=chunk)
        assert (ys - yp).abs().max() < 1e-12 and (hs - hp).abs().max() < 1e-12
    # an independent oracle: explicit products of the recurrence for the last frame
    h = h0.clone()
    for t in range(L):
        h = dA[:, t] * h + dBu[:, t]
    assert (hs - h).abs().max() < 1e-12


def test_float32_scans_agree_loosely():
    torch.manual_seed(0)
    m = Mamba(7, 5, d_model=32, n_layers=2, d_state=8, chunk=16)
    x = torch.randn(2, 50, 7)
    ys, yp, yr = m(x, scan="sequential"), m(x, scan="parallel"), m.rollout_steps(x)
    assert torch.allclose(ys, yp, rtol=1e-4, atol=1e-5)
    assert torch.allclose(ys, yr, rtol=1e-4, atol=1e-5)


def test_unknown_scan_rejected():
    with pytest.raises(ValueError, match="unknown scan"):
        Mamba(3, 3, d_model=16, n_layers=1, scan="blelloch")


def test_inference_step_without_grad_matches():
    """The no-grad step (in-place state update) computes the same recurrence."""
    m = _small()
    x = torch.randn(2, 9, 7, dtype=torch.float64)
    with torch.no_grad():
        y_ng = m.rollout_steps(x)
        s = m.initial_state(2)
        y0, s1 = m.step(s, x[:, 0])
    assert (y_ng - m(x).detach()).abs().max() < 1e-10
    assert torch.all(s.h[0] == 0)  # the caller's state is not modified in place


def test_cached_A_follows_parameter_updates():
    m = _small()
    x = torch.randn(1, 4, 7, dtype=torch.float64)  # A matters from the second frame on
    with torch.inference_mode():
        y1 = m.rollout_steps(x)
    with torch.no_grad():
        for layer in m.layers:
            layer.mixer.A_log.add_(0.5)  # in-place update, as an optimizer does
    with torch.inference_mode():
        y2 = m.rollout_steps(x)
    y_ref = m.rollout_steps(x).detach()  # grad mode: no cache
    assert (y2 - y_ref).abs().max() < 1e-12
    assert (y1 - y2).abs().max() > 1e-6


def test_autocast_bf16_keeps_the_recurrence_in_float32():
    torch.manual_seed(0)
    m = Mamba(7, 5, d_model=32, n_layers=2, d_state=8)
    x = torch.randn(2, 40, 7)
    with torch.no_grad():
        ref = m(x)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        y, state = m.forward_with_state(x)
        s = m.initial_state(2)
        y_step, s = m.step(s, x[:, 0])
    assert state.h[0].dtype == torch.float32 and s.h[0].dtype == torch.float32
    assert torch.isfinite(y).all()
    rel = float((y.float() - ref).norm() / ref.norm())
    assert rel < 0.05  # bf16 projections, float32 scan
    assert float((y_step.float() - ref[:, 0]).norm() / ref[:, 0].norm()) < 0.05


def test_state_reset_and_select_per_sequence():
    m = _small()
    x = torch.randn(3, 6, 7, dtype=torch.float64)
    _, state = m.forward_with_state(x)
    fresh = state.reset(torch.tensor([False, True, False]))
    y_next, _ = m.step(fresh, x[:, 0])
    y_first = m(x[1:2, :1])[:, 0]  # sequence 1 restarted from zero state
    assert (y_next[1] - y_first[0]).abs().max() < 1e-10
    y_cont, _ = m.step(state, x[:, 0])
    assert torch.equal(y_next[0], y_cont[0]) and torch.equal(y_next[2], y_cont[2])
    sub = state.select(torch.tensor([2, 0]))
    y_sub, _ = m.step(sub, x[[2, 0], 0])
    assert (y_sub - y_cont[[2, 0]]).abs().max() < 1e-12
