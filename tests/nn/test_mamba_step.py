"""Mamba inference step: the no-grad fast path, the in-place state update and the opt-in
``torch.compile`` step all compute the same recurrence as the autograd step."""
from __future__ import annotations

import warnings

import pytest
import torch

from kinema.nn.mamba import Mamba


def _model(dtype=torch.float64) -> Mamba:
    torch.manual_seed(2)
    m = Mamba(7, 5, d_model=16, n_layers=2, d_state=4, d_conv=4, d_inner=32).to(dtype).eval()
    with torch.no_grad():  # away from the identity-like init so every term matters
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
        m.input_norm.set(torch.randn(7, dtype=dtype), torch.rand(7, dtype=dtype) + 0.5)
    return m


def _grad_rollout(m: Mamba, x: torch.Tensor, state=None) -> tuple[torch.Tensor, list]:
    """Reference: the autograd step frame by frame (grad enabled, out of place)."""
    state = m.initial_state(x.shape[0]) if state is None else state
    ys = []
    for xt in x.unbind(1):
        y, state = m.step(state, xt)
        ys.append(y)
    return torch.stack(ys, 1).detach(), [t.detach() for t in state.conv + state.h]


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_inplace_step_matches_autograd_step(mode):
    m = _model()
    x = torch.randn(3, 9, 7, dtype=torch.float64)
    y_ref, s_ref = _grad_rollout(m, x)
    ctx = torch.no_grad() if mode == "no_grad" else torch.inference_mode()
    with ctx:
        state = m.initial_state(3)
        tensors = [id(t) for t in state.conv + state.h]
        ys = []
        for xt in x.unbind(1):
            y, out = m.step(state, xt, inplace=True)
            assert out is state
            ys.append(y)
    assert [id(t) for t in state.conv + state.h] == tensors  # updated in place
    assert (torch.stack(ys, 1) - y_ref).abs().max() < 1e-10
    for a, b in zip(state.conv + state.h, s_ref):
        assert (a - b).abs().max() < 1e-10
    assert y_ref.abs().max() > 0.1


def test_inplace_step_continues_a_scanned_state():
    """forward_with_state returns strided conv windows; the in-place shift must handle them."""
    m = _model()
    x = torch.randn(2, 12, 7, dtype=torch.float64)
    whole = m(x).detach()
    with torch.no_grad():
        _, state = m.forward_with_state(x[:, :8])
        assert not state.conv[0].is_contiguous()
        for t in range(8, 12):
            y, state = m.step(state, x[:, t], inplace=True)
            assert (y - whole[:, t]).abs().max() < 1e-10


def test_inplace_step_refuses_grad():
    m = _model()
    with pytest.raises(ValueError, match="inplace"):
        m.step(m.initial_state(1), torch.randn(1, 7, dtype=torch.float64), inplace=True)


def test_grad_step_still_differentiable_after_inference_use():
    m = _model()
    x = torch.randn(2, 5, 7, dtype=torch.float64)
    with torch.no_grad():
        m.rollout_steps(x)  # fills the scratch buffers and the cached A
    xg = x.clone().requires_grad_(True)
    y = m.rollout_steps(xg)
    g_step = torch.autograd.grad(y.square().sum(), xg)[0]
    xs = x.clone().requires_grad_(True)
    g_scan = torch.autograd.grad(m(xs).square().sum(), xs)[0]
    assert (g_step - g_scan).abs().max() < 1e-10 and g_scan.abs().max() > 0


def test_compiled_step_matches_eager():
    """Inductor path (C++ via the system compiler) against the eager step, both modes."""
    m = _model(torch.float32)
    ref = _model(torch.float32)
    x = torch.randn(4, 6, 7)
    m.compile_step()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback would hide the compiled path
        s, s_ip, s_ref = m.initial_state(4), m.initial_state(4), ref.initial_state(4)
        for xt in x.unbind(1):
            with torch.no_grad():  # parameters still require grad here
                y, s = m.step(s, xt)
                y_ref, s_ref = ref.step(s_ref, xt)
            with torch.inference_mode():
                y_ip, s_ip = m.step(s_ip, xt, inplace=True)
            assert torch.allclose(y, y_ref, rtol=1e-5, atol=1e-5)
            assert torch.allclose(y_ip, y_ref, rtol=1e-5, atol=1e-5)
    assert m._compiled_step is not None
    for a, b, c in zip(s.h + s.conv, s_ip.h + s_ip.conv, s_ref.h + s_ref.conv):
        assert torch.allclose(a, c, rtol=1e-5, atol=1e-6) and torch.allclose(b, c, rtol=1e-5, atol=1e-6)
    assert s_ref.h[0].abs().max() > 1e-3


def test_compiled_step_falls_back_when_compilation_fails():
    def broken_backend(gm, example_inputs):
        raise RuntimeError("no C++ compiler here")

    m = _model(torch.float32)
    ref = _model(torch.float32)
    m.compile_step(backend=broken_backend)
    x = torch.randn(2, 7)
    with torch.no_grad():
        with pytest.warns(RuntimeWarning, match="using the eager step"):
            y, _ = m.step(m.initial_state(2), x)
        assert m._compiled_step is None
        y2, _ = m.step(m.initial_state(2), x)  # eager from now on, no second warning
        y_ref, _ = ref.step(ref.initial_state(2), x)
    assert torch.equal(y, y_ref) and torch.equal(y2, y_ref)
    m.compile_step(enabled=False)
    assert m._compiled_step is None


@pytest.mark.parametrize("inplace", [False, True])
def test_blocked_state_update_matches_whole_batch(monkeypatch, inplace):
    """The inference step updates the (B, Di, N) state in blocks of rows (cache-sized at
    B = 256); blocks of 2 rows with a remainder give the whole-batch pass's bits."""
    from kinema.nn import mamba
    m = _model()
    x = torch.randn(5, 6, 7, dtype=torch.float64)
    y_ref, s_ref = _grad_rollout(m, x)
    runs = {}
    for rows in (2, 10 ** 6):
        monkeypatch.setattr(mamba, "_STATE_BLOCK_BYTES", rows * 32 * 4 * 8)    # Di 32, N 4, float64
        with torch.inference_mode():
            state, ys = m.initial_state(5), []
            for xt in x.unbind(1):
                y, state = m.step(state, xt, inplace=inplace)
                ys.append(y)
        runs[rows] = (torch.stack(ys, 1), state.conv + state.h)
    (y_blk, s_blk), (y_all, s_all) = runs[2], runs[10 ** 6]
    assert torch.equal(y_blk, y_all) and all(torch.equal(a, b) for a, b in zip(s_blk, s_all))
    assert (y_blk - y_ref).abs().max() < 1e-10 and y_ref.abs().max() > 0.1
    for a, b in zip(s_blk, s_ref):
        assert (a - b).abs().max() < 1e-10
