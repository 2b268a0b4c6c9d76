"""Feed-forward models: MLP, sequence-output MLP, (variational) autoencoder and categorical
codebook matching (Starke et al., SIGGRAPH 2024).

Conventions shared by every model here (and :class:`kinema.nn.mamba.Mamba`):

- ``hparams``: the constructor arguments, stored in checkpoints to rebuild the model.
- Normalisation lives in :class:`~kinema.nn.layers.Normaliser` buffers (``input_norm``,
  ``output_norm``): ``forward`` takes raw inputs and returns raw outputs (data units).
- ``training_loss(x, y) -> (loss, parts)`` computes the model's own loss in normalised
  units; ``parts`` maps term names to detached scalars (for logging).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from kinema.nn.layers import FiLM, MLPBlock, Normaliser, gumbel_softmax_st, mlp_stack


def _normalised_mse(norm: Normaliser, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(norm.normalise(pred), norm.normalise(target))


class MLP(nn.Module):
    """Multi-layer perceptron ``(..., input_dim) -> (..., output_dim)``.

    Args:
        hidden: widths of the hidden blocks. activation: "elu", "relu", ...
        dropout: after every hidden block. gated: GLU-style hidden blocks.
        film_dim: when > 0, ``forward(x, cond)`` modulates every hidden block with
            :class:`~kinema.nn.layers.FiLM` of ``cond`` (..., film_dim).
    """

    def __init__(self, input_dim: int, output_dim: int, hidden: list[int] | tuple[int, ...] = (256, 256),
                 activation: str = "elu", dropout: float = 0.0, gated: bool = False, film_dim: int = 0):
        super().__init__()
        self.hparams = dict(input_dim=input_dim, output_dim=output_dim, hidden=list(hidden),
                            activation=activation, dropout=dropout, gated=gated, film_dim=film_dim)
        self.input_norm = Normaliser(input_dim)
        self.output_norm = Normaliser(output_dim)
        dims = [input_dim, *hidden]
        self.blocks = nn.ModuleList(MLPBlock(a, b, activation, dropout, gated) for a, b in zip(dims, dims[1:]))
        self.films = nn.ModuleList(FiLM(h, film_dim) for h in hidden) if film_dim > 0 else None
        self.head = nn.Linear(dims[-1], output_dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        h = self.input_norm.normalise(x)
        for i, block in enumerate(self.blocks):
            h = block(h)
            if self.films is not None:
                if cond is None:
                    raise ValueError("this MLP was built with film_dim > 0 and needs a cond input")
                h = self.films[i](h, cond)
        return self.output_norm.denormalise(self.head(h))

    def training_loss(self, x: torch.Tensor, y: torch.Tensor, cond: torch.Tensor | None = None):
        loss = _normalised_mse(self.output_norm, self(x, cond), y)
        return loss, {"mse": loss.detach()}


class SequenceMLP(nn.Module):
    """Predicts ``horizon`` future frames: ``(B, input_dim) -> (B, horizon, frame_dim)``.

    An MLP whose output layer emits all frames at once (``horizon * frame_dim``), reshaped to
    frames; ``output_norm`` is per frame (frame_dim), shared by all future frames.
    """

    def __init__(self, input_dim: int, frame_dim: int, horizon: int,
                 hidden: list[int] | tuple[int, ...] = (256, 256), activation: str = "elu",
                 dropout: float = 0.0, gated: bool = False):
        super().__init__()
        self.hparams = dict(input_dim=input_dim, frame_dim=frame_dim, horizon=horizon,
                            hidden=list(hidden), activation=activation, dropout=dropout, gated=gated)
        self.horizon, self.frame_dim = horizon, frame_dim
        self.input_norm = Normaliser(input_dim)
        self.output_norm = Normaliser(frame_dim)
        self.net = mlp_stack(input_dim, hidden, horizon * frame_dim, activation, dropout, gated)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.net(self.input_norm.normalise(x)).unflatten(-1, (self.horizon, self.frame_dim))
        return self.output_norm.denormalise(h)

    def training_loss(self, x: torch.Tensor, y: torch.Tensor):
        loss = _normalised_mse(self.output_norm, self(x), y)
        return loss, {"mse": loss.detach()}


class Autoencoder(nn.Module):
    """Autoencoder ``(..., dim) -> latent (..., latent_dim) -> (..., dim)``.

    With ``variational`` the encoder gives a Gaussian (mu, logvar), training samples with
    the reparameterisation trick and the loss adds ``beta * KL``; in eval mode the mean is used.
    """

    def __init__(self, dim: int, latent_dim: int, hidden: list[int] | tuple[int, ...] = (256,),
                 activation: str = "elu", variational: bool = False, beta: float = 1e-3):
        super().__init__()
        self.hparams = dict(dim=dim, latent_dim=latent_dim, hidden=list(hidden),
                            activation=activation, variational=variational, beta=beta)
        self.variational, self.beta = variational, beta
        self.norm = Normaliser(dim)
        self.encoder = mlp_stack(dim, hidden, 2 * latent_dim if variational else latent_dim, activation)
        self.decoder = mlp_stack(latent_dim, list(hidden)[::-1], dim, activation)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Raw x -> (mu or z, logvar or None)."""
        e = self.encoder(self.norm.normalise(x))
        if not self.variational:
            return e, None
        mu, logvar = e.chunk(2, dim=-1)
        return mu, logvar.clamp(-10.0, 10.0)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Latent -> raw reconstruction."""
        return self.norm.denormalise(self.decoder(z))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Raw x -> raw reconstruction (mean latent in eval mode)."""
        mu, logvar = self.encode(x)
        z = mu
        if self.variational and self.training:
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.decode(z)

    def training_loss(self, x: torch.Tensor, y: torch.Tensor | None = None):
        mu, logvar = self.encode(x)
        z = mu
        if self.variational and self.training:
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        recon = F.mse_loss(self.decoder(z), self.norm.normalise(x))
        parts = {"reconstruction": recon.detach()}
        loss = recon
        if self.variational:
            kl = -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=-1))
            loss = loss + self.beta * kl
            parts["kl"] = kl.detach()
        return loss, parts


class CodebookMatching(nn.Module):
    """Categorical codebook matching (Starke et al. 2024).

    - encoder([Y, X]) -> logits (C, K) -> straight-through Gumbel-softmax one-hot code
    - decoder(code) -> Y (``output_dim``, e.g. K future frames flattened)
    - estimator(X) -> logits (C, K); matching loss: MSE between the estimator's softmax and
      the encoder's (detached) code, so the estimator learns which codes fit the control.
    At runtime :meth:`forward` samples a code per channel from the estimator and decodes it.

    Args:
        input_dim: control/state X. output_dim: motion Y.
        channels (C), classes (K): code size C x K. hidden: widths of all three MLPs.
        tau: Gumbel-softmax temperature.
    """

    def __init__(self, input_dim: int, output_dim: int, channels: int = 8, classes: int = 8,
                 hidden: list[int] | tuple[int, ...] = (256, 256), activation: str = "elu",
                 tau: float = 1.0):
        super().__init__()
        self.hparams = dict(input_dim=input_dim, output_dim=output_dim, channels=channels,
                            classes=classes, hidden=list(hidden), activation=activation, tau=tau)
        self.channels, self.classes, self.tau = channels, classes, tau
        code = channels * classes
        self.input_norm = Normaliser(input_dim)
        self.output_norm = Normaliser(output_dim)
        self.encoder = mlp_stack(output_dim + input_dim, hidden, code, activation)
        self.estimator = mlp_stack(input_dim, hidden, code, activation)
        self.decoder = mlp_stack(code, hidden, output_dim, activation)

    def _logits(self, net: nn.Module, inp: torch.Tensor) -> torch.Tensor:
        return net(inp).unflatten(-1, (self.channels, self.classes))

    def encode(self, x: torch.Tensor, y: torch.Tensor, hard: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw (X, Y) -> (straight-through code (..., C, K), encoder logits (..., C, K))."""
        logits = self._logits(self.encoder, torch.cat([self.output_norm.normalise(y),
                                                       self.input_norm.normalise(x)], -1))
        if self.training:
            code = gumbel_softmax_st(logits, self.tau, hard)
        else:
            code = F.one_hot(logits.argmax(-1), self.classes).to(logits.dtype)
        return code, logits

    def estimate(self, x: torch.Tensor) -> torch.Tensor:
        """Raw X -> estimator probabilities (..., C, K)."""
        return F.softmax(self._logits(self.estimator, self.input_norm.normalise(x)), -1)

    def decode(self, code: torch.Tensor) -> torch.Tensor:
        """Code (..., C, K) -> raw Y (..., output_dim)."""
        return self.output_norm.denormalise(self.decoder(code.flatten(-2)))

    def sample_code(self, x: torch.Tensor, greedy: bool = False,
                    generator: torch.Generator | None = None) -> torch.Tensor:
        """One-hot code (..., C, K) sampled per channel from the estimator (argmax if greedy)."""
        probs = self.estimate(x)
        if greedy:
            index = probs.argmax(-1)
        else:
            flat = probs.reshape(-1, self.classes)
            index = torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])
        return F.one_hot(index, self.classes).to(probs.dtype)

    def forward(self, x: torch.Tensor, greedy: bool = False,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """Runtime: raw X -> raw Y decoded from a code sampled from the estimator."""
        return self.decode(self.sample_code(x, greedy, generator))

    def training_loss(self, x: torch.Tensor, y: torch.Tensor, matching_weight: float = 1.0):
        code, logits = self.encode(x, y)
        recon = F.mse_loss(self.decoder(code.flatten(-2)), self.output_norm.normalise(y))
        matching = F.mse_loss(self.estimate(x), code.detach())
        loss = recon + matching_weight * matching
        return loss, {"reconstruction": recon.detach(), "matching": matching.detach(),
                      "perplexity": torch.tensor(code_perplexity(code.detach()))}


def code_perplexity(code: torch.Tensor) -> float:
    """Mean over channels of exp(entropy) of the code usage in a batch.

    code: one-hot or soft codes (..., C, K). Ranges from 1 (one class used) to K (uniform).
    """
    usage = code.reshape(-1, code.shape[-2], code.shape[-1]).float().mean(0)  # (C, K)
    entropy = -(usage * torch.log(usage.clamp_min(1e-12))).sum(-1)
    return float(torch.exp(entropy).mean())
