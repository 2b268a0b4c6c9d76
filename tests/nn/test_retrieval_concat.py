"""The plain-concatenation ablation model (A1): starts as the no-retrieval backbone, reads
its candidates once trained, steps like it scans, round-trips through a checkpoint."""
from __future__ import annotations

import torch

from kinema.nn.checkpoint import load_checkpoint, save_checkpoint
from kinema.nn.mamba import Mamba
from kinema.nn.retrieval_concat import ConcatRetrievalMamba

P, C, K = 10, 12, 4
W = 2 * P + 3


def _inputs(b=2, length=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, length, C, generator=g), torch.randn(b, length, P, generator=g),
            torch.randn(b, length, K, W, generator=g))


def test_fresh_model_is_the_backbone_and_ignores_candidates():
    torch.manual_seed(0)
    m = ConcatRetrievalMamba(P, C, 2, K, d_model=16, n_layers=1, d_state=4)
    ctrl, pose, cand = _inputs()
    a, _ = m(ctrl, pose, cand)
    b, _ = m(ctrl, pose, None)
    assert torch.equal(a["pose"], b["pose"])
    ref = Mamba(C + P, P + 2, d_model=16, n_layers=1, d_state=4)
    state = dict(m.backbone.state_dict())
    state["in_head.weight"] = state["in_head.weight"][:, :C + P]
    state["input_norm.mean"], state["input_norm.std"] = state["input_norm.mean"][:C + P], state["input_norm.std"][:C + P]
    ref.load_state_dict(state)
    y = ref(torch.cat([ctrl, pose], -1))
    assert torch.allclose(b["pose"], pose + y[..., :P], atol=1e-6)


def test_candidates_reach_the_output_after_one_step_and_step_matches_scan(tmp_path):
    torch.manual_seed(1)
    m = ConcatRetrievalMamba(P, C, 2, K, d_model=16, n_layers=1, d_state=4)
    ctrl, pose, cand = _inputs()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    out, _ = m(ctrl, pose, cand)
    out["pose"].square().mean().backward()
    opt.step()
    cand = cand.requires_grad_(True)
    out, _ = m(ctrl, pose, cand)
    (g,) = torch.autograd.grad(out["pose"].sum(), cand)
    assert g.abs().sum() > 0
    mask = torch.ones(2, 7, K, dtype=torch.bool)
    mask[:, :, 1] = False
    seq, _ = m(ctrl, pose, cand.detach(), mask)
    state = m.initial_state(2)
    for t in range(7):
        o, state = m.step(state, ctrl[:, t], pose[:, t], cand[:, t].detach(), mask[:, t])
        assert torch.allclose(o["pose"], seq["pose"][:, t], atol=1e-5)
    path = save_checkpoint(tmp_path / "c.safetensors", m)
    again, _ = load_checkpoint(path)
    assert type(again) is ConcatRetrievalMamba
    assert torch.equal(again(ctrl, pose, cand.detach(), mask)[0]["pose"], seq["pose"])
