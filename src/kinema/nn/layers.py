"""Building blocks shared by kinema's models: normalisation buffers, RMSNorm, FiLM and MLP
blocks.

Every block is an ordinary :class:`torch.nn.Module` working on the last dimension of its
input, so any leading batch/time dims are allowed.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from kinema.features.normalisation import Normaliser as Statistics

ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "tanh": nn.Tanh}


class Normaliser(nn.Module):
    """Affine feature normalisation held as buffers (persisted in checkpoints).

    ``normalise(x) = (x - mean) / std`` and its inverse, over the last dim of size ``dim``.
    Defaults to the identity (mean 0, std 1) until :meth:`fit` or :meth:`set` is called.
    The statistics are those of :class:`kinema.features.normalisation.Normaliser` (the
    NumPy one, without weights): :meth:`set_statistics` / :meth:`statistics` move them
    between the two.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    @torch.no_grad()
    def fit(self, data: torch.Tensor, eps: float = 1e-6) -> Normaliser:
        """Set mean/std from ``data`` (..., dim); std is floored at ``eps`` (constant dims)."""
        flat = data.reshape(-1, self.dim).to(self.mean.dtype)
        self.mean.copy_(flat.mean(0))
        self.std.copy_(flat.std(0, unbiased=False).clamp_min(eps))
        return self

    @torch.no_grad()
    def set(self, mean, std) -> Normaliser:
        """Set the statistics from arrays or tensors of shape (dim,)."""
        self.mean.copy_(torch.as_tensor(mean, dtype=self.mean.dtype))
        self.std.copy_(torch.as_tensor(std, dtype=self.std.dtype))
        return self

    def set_statistics(self, stats: Statistics) -> Normaliser:
        """Set mean and std from a NumPy normaliser fitted elsewhere (its weights, if any,
        folded into the std)."""
        std = stats.std if stats.weight is None else stats.std / stats.weight
        return self.set(stats.mean, std)

    def statistics(self) -> Statistics:
        """The buffers as a NumPy :class:`kinema.features.normalisation.Normaliser`."""
        return Statistics(self.mean.detach().cpu().numpy().copy(), self.std.detach().cpu().numpy().copy())

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std

    def denormalise(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.std + self.mean

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class RMSNorm(nn.Module):
    """Root-mean-square norm: ``x * rsqrt(mean(x^2) + eps) * weight`` (weight only, no bias)."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.weight.shape, self.weight.to(x.dtype), self.eps)


class FiLM(nn.Module):
    """Feature-wise linear modulation: ``x * (1 + gamma(c)) + beta(c)``.

    Args:
        dim: features of ``x`` (..., dim).
        cond_dim: features of the conditioning ``c`` (..., cond_dim).
    The projection is zero-initialised so a fresh FiLM is the identity.
    """

    def __init__(self, dim: int, cond_dim: int):
        super().__init__()
        self.proj = nn.Linear(cond_dim, 2 * dim)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.proj(cond).chunk(2, dim=-1)
        return x * (1 + gamma) + beta


class MLPBlock(nn.Module):
    """Linear -> activation -> dropout, or a gated unit ``act(W1 x) * (W2 x)`` when ``gated``.

    Args:
        in_dim, out_dim: feature sizes.
        activation: a key of :data:`ACTIVATIONS` ("elu" by default).
        dropout: dropout probability after the activation.
        gated: use a GLU-style gate (twice the weights of the plain block).
    """

    def __init__(self, in_dim: int, out_dim: int, activation: str = "elu", dropout: float = 0.0,
                 gated: bool = False):
        super().__init__()
        self.gated = gated
        self.linear = nn.Linear(in_dim, 2 * out_dim if gated else out_dim)
        self.act = ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        if self.gated:
            a, b = h.chunk(2, dim=-1)
            h = self.act(a) * b
        else:
            h = self.act(h)
        return self.dropout(h)


def mlp_stack(in_dim: int, hidden: list[int] | tuple[int, ...], out_dim: int, activation: str = "elu",
              dropout: float = 0.0, gated: bool = False) -> nn.Sequential:
    """``len(hidden)`` :class:`MLPBlock` s followed by a plain output Linear."""
    layers: list[nn.Module] = []
    d = in_dim
    for h in hidden:
        layers.append(MLPBlock(d, h, activation, dropout, gated))
        d = h
    layers.append(nn.Linear(d, out_dim))
    return nn.Sequential(*layers)


def gumbel_softmax_st(logits: torch.Tensor, tau: float = 1.0, hard: bool = True,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """Straight-through Gumbel-softmax over the last dim.

    Returns one-hot samples (``hard``) whose gradient is that of the soft sample.
    """
    u = torch.rand(logits.shape, dtype=logits.dtype, device=logits.device, generator=generator)
    g = -torch.log(-torch.log(u.clamp(1e-10, 1.0 - 1e-7)))
    soft = F.softmax((logits + g) / tau, dim=-1)
    if not hard:
        return soft
    index = soft.argmax(-1, keepdim=True)
    one_hot = torch.zeros_like(soft).scatter_(-1, index, 1.0)
    return one_hot - soft.detach() + soft
