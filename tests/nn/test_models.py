"""Each model overfits a small batch of real LaFAN1 motion windows (loss drops 100x), plus
shape/behaviour checks of the layers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from kinema.features.normalisation import Normaliser as Statistics
from kinema.nn.layers import FiLM, MLPBlock, Normaliser, RMSNorm, gumbel_softmax_st
from kinema.nn.mamba import Mamba
from kinema.nn.models import MLP, Autoencoder, CodebookMatching, SequenceMLP, code_perplexity

HORIZON = 8


@pytest.fixture(scope="module")
def batch(lafan_poses):
    """32 current poses spread over ~32 s of walking, their next frame and next 8 frames."""
    idx = torch.arange(32) * 30 + 1000
    x = lafan_poses[idx]
    future = torch.stack([lafan_poses[idx + 1 + k] for k in range(HORIZON)], 1)
    return x, future


def _overfit(model, data, steps, lr=1e-3, seed=0):
    """(initial loss, final loss, final parts) in eval mode on the same batch; the initial
    parts are kept in ``parts["initial"]``."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.eval()
    with torch.no_grad():
        first_loss, first_parts = model.training_loss(*data)
        first = float(first_loss)
    model.train()
    for _ in range(steps):
        loss, _ = model.training_loss(*data)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        last, parts = model.training_loss(*data)
    parts["initial"] = first_parts
    return first, float(last), parts


def test_mlp_overfits_next_pose(batch):
    x, future = batch
    torch.manual_seed(0)
    model = MLP(89, 89, hidden=(256, 256), gated=True)
    model.input_norm.fit(x)
    model.output_norm.fit(future[:, 0])
    first, last, _ = _overfit(model, (x, future[:, 0]), 150)
    assert first > 0.3 and last < first / 100


def test_film_mlp_uses_condition(batch):
    x, future = batch
    torch.manual_seed(0)
    model = MLP(89, 89, hidden=(64, 64), film_dim=1)
    cond = torch.linspace(0, 1, 32).unsqueeze(-1)
    model.input_norm.fit(x)
    model.output_norm.fit(future[:, -1])
    first, last, _ = _overfit(model, (x, future[:, -1], cond), 200, lr=3e-3)
    assert last < first / 100
    with torch.no_grad():  # the trained FiLM is no longer the identity: cond changes the output
        assert (model(x, cond) - model(x, cond + 1)).abs().max() > 1e-3
    with pytest.raises(ValueError, match="cond"):
        model(x)


def test_sequence_mlp_overfits_future_frames(batch):
    x, future = batch
    torch.manual_seed(0)
    model = SequenceMLP(89, 89, HORIZON, hidden=(256, 256))
    model.input_norm.fit(x)
    model.output_norm.fit(future)
    assert model(x).shape == (32, HORIZON, 89)
    first, last, _ = _overfit(model, (x, future), 150, lr=3e-3)
    assert last < first / 100


@pytest.mark.parametrize("variational", [False, True])
def test_autoencoder_overfits_poses(batch, variational):
    x, _ = batch
    torch.manual_seed(0)
    model = Autoencoder(89, 16, hidden=(256,), variational=variational, beta=1e-4)
    model.norm.fit(x)
    first, last, parts = _overfit(model, (x,), 300)
    assert float(parts["reconstruction"]) < float(parts["initial"]["reconstruction"]) / 100
    if variational:
        assert 0 < float(parts["kl"]) < 1e4
        model.train()
        mu, _ = model.encode(x)
        assert model(x).shape == x.shape
        assert mu.shape == (32, 16)
    else:
        assert last < first / 100


def test_codebook_matching_overfits_and_uses_codes(batch):
    x, future = batch
    y = future.flatten(1)
    torch.manual_seed(0)
    model = CodebookMatching(89, y.shape[1], channels=16, classes=8, hidden=(256, 256))
    model.input_norm.fit(x)
    model.output_norm.fit(y)
    first, last, parts = _overfit(model, (x, y), 300)
    assert last < first / 100
    assert float(parts["reconstruction"]) < first / 100 and float(parts["matching"]) < 0.01
    code, _ = model.encode(x, y)
    assert len({tuple(c.argmax(-1).tolist()) for c in code}) == 32  # every sample its own code
    # perplexity floor: at least half of the 8 classes effectively used per channel
    assert float(parts["perplexity"]) > 4.0
    # runtime: a code sampled greedily from the estimator decodes to the target motion
    with torch.no_grad():
        err = torch.nn.functional.mse_loss(model.output_norm.normalise(model(x, greedy=True)),
                                           model.output_norm.normalise(y))
    assert err < 0.02
    samples = model.sample_code(x, generator=torch.Generator().manual_seed(0))
    assert samples.shape == (32, 16, 8) and torch.all(samples.sum(-1) == 1)


def test_mamba_overfits_next_pose_sequences(lafan_poses):
    windows = torch.stack([lafan_poses[1000 + 60 * i: 1000 + 60 * i + 33] for i in range(8)])
    x, y = windows[:, :-1], windows[:, 1:]
    torch.manual_seed(0)
    model = Mamba(89, 89, d_model=64, n_layers=2, d_state=8)
    model.input_norm.fit(x)
    model.output_norm.fit(y)
    first, last, _ = _overfit(model, (x, y), 100, lr=1e-2)
    assert last < first / 100


def test_code_perplexity_bounds():
    one = torch.nn.functional.one_hot(torch.zeros(10, 3, dtype=torch.long), 4).float()
    assert code_perplexity(one) == pytest.approx(1.0)
    uniform = torch.nn.functional.one_hot(torch.arange(8).repeat(2, 1).T % 4, 4).float()
    assert code_perplexity(uniform) == pytest.approx(4.0)


def test_gumbel_straight_through_is_one_hot_with_soft_gradient():
    logits = torch.randn(5, 3, 4, requires_grad=True)
    code = gumbel_softmax_st(logits, generator=torch.Generator().manual_seed(0))
    assert torch.all(code.sum(-1) == 1) and set(code.unique().tolist()) <= {0.0, 1.0}
    (code * torch.arange(4.0)).sum().backward()
    assert logits.grad.abs().sum() > 0


def test_layers_basic_behaviour():
    x = torch.randn(4, 6) * 3 + 2
    n = Normaliser(6).fit(x)
    assert torch.allclose(n.normalise(x).mean(0), torch.zeros(6), atol=1e-5)
    assert torch.allclose(n.denormalise(n.normalise(x)), x, atol=1e-5)
    # the same statistics as the NumPy normaliser, both ways (weights folded into std)
    stats = Statistics.fit(x.numpy(), [("a", 0, 2, 2.0), ("b", 2, 6, 0.5)], fold_weights=False)
    torch_norm = Normaliser(6).set_statistics(stats)
    np.testing.assert_allclose(torch_norm.normalise(x).numpy(), stats.normalise(x.numpy()), rtol=1e-5, atol=1e-6)
    back = torch_norm.statistics()
    np.testing.assert_allclose(back.normalise(x.numpy()), stats.normalise(x.numpy()), rtol=1e-5, atol=1e-6)
    r = RMSNorm(6)(x)
    assert torch.allclose(r.pow(2).mean(-1), torch.ones(4), atol=1e-3)
    f = FiLM(6, 2)
    assert torch.equal(f(x, torch.randn(4, 2)), x)  # zero-initialised: identity
    g = MLPBlock(6, 5, gated=True, dropout=0.5)
    assert g(x).shape == (4, 5) and g.linear.out_features == 10
