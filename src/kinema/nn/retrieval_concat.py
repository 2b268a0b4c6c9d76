"""The plain-concatenation retrieval model: ablation A1 of NOTES.md 3.3.

The k candidate payloads (B, L, k, W) are normalised, each followed by a presence flag,
flattened and concatenated to the backbone's input ``[control, pose]``; no attention, no
gates, no null token (an absent candidate is a zero slot with flag 0, so candidate
dropout trains the all-absent input that the ablation feeds). The candidate columns of the
backbone's input head start at zero, so a fresh model computes what the no-retrieval
backbone computes. Same interface as :class:`kinema.nn.retrieval.RetrievalMamba`
(``forward``, ``step``, ``initial_state``, ``parameter_groups``, ``candidate_norm``).
"""
from __future__ import annotations

import torch
from torch import nn

from kinema.nn.layers import Normaliser
from kinema.nn.mamba import Mamba, MambaState


class ConcatRetrievalMamba(nn.Module):
    """Mamba backbone reading ``[control (C), pose (P), k x (candidate (W), present (1))]``.

    Args:
        pose_dim (P), control_dim (C), contact_dim: sizes of pose, joystick and contacts.
        k: candidates per frame; candidate_dim (W): features per candidate (default 2 P + contact_dim + 1).
        backbone: keyword arguments of :class:`~kinema.nn.mamba.Mamba` (d_model, n_layers, ...).
    """

    use_retrieval = True

    def __init__(self, pose_dim: int = 151, control_dim: int = 12, contact_dim: int = 2, k: int = 4,
                 candidate_dim: int | None = None, **backbone):
        super().__init__()
        candidate_dim = 2 * pose_dim + contact_dim + 1 if candidate_dim is None else candidate_dim
        self.hparams = dict(pose_dim=pose_dim, control_dim=control_dim, contact_dim=contact_dim, k=k,
                            candidate_dim=candidate_dim, **backbone)
        self.pose_dim, self.control_dim, self.contact_dim = pose_dim, control_dim, contact_dim
        self.k, self.candidate_dim = k, candidate_dim
        self.backbone = Mamba(control_dim + pose_dim + k * (candidate_dim + 1), pose_dim + contact_dim, **backbone)
        self.candidate_norm = Normaliser(candidate_dim)
        with torch.no_grad():
            self.backbone.in_head.weight[:, control_dim + pose_dim:] = 0.0

    def parameter_groups(self) -> dict[str, int]:
        """Parameter counts: the backbone and the input-head columns that read the candidates."""
        cols = self.backbone.in_head.out_features * self.k * (self.candidate_dim + 1)
        total = sum(p.numel() for p in self.parameters())
        return {"backbone": total, "backbone.in_head columns for the candidates": cols,
                "backbone (reference part)": total - cols, "total": total}

    def _inputs(self, control: torch.Tensor, pose: torch.Tensor, candidates: torch.Tensor | None,
                mask: torch.Tensor | None) -> torch.Tensor:
        lead = pose.shape[:-1]
        if candidates is None:
            slots = pose.new_zeros(*lead, self.k * (self.candidate_dim + 1))
        else:
            if candidates.shape[-1] != self.candidate_dim or candidates.shape[-2] != self.k:
                raise ValueError(f"candidates must be (..., {self.k}, {self.candidate_dim}), "
                                 f"got {tuple(candidates.shape)}")
            present = torch.ones(candidates.shape[:-1], dtype=pose.dtype, device=pose.device) if mask is None \
                else mask.to(pose.dtype)
            c = self.candidate_norm.normalise(candidates) * present.unsqueeze(-1)
            slots = torch.cat([c, present.unsqueeze(-1)], -1).flatten(-2)
        return torch.cat([control, pose, slots], -1)

    def _outputs(self, pose: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        delta = y[..., :self.pose_dim]
        return {"pose": pose + delta, "delta": delta, "contact_logits": y[..., self.pose_dim:]}

    def forward(self, control: torch.Tensor, pose: torch.Tensor, candidates: torch.Tensor | None = None,
                mask: torch.Tensor | None = None, state: MambaState | None = None
                ) -> tuple[dict[str, torch.Tensor], MambaState]:
        """Whole sequences: control (B, L, C), pose (B, L, P), candidates (B, L, k, W) or None,
        mask (B, L, k) -> (outputs with ``pose`` (B, L, P) = next pose, ``delta``,
        ``contact_logits``; last state)."""
        y, state = self.backbone.forward_with_state(self._inputs(control, pose, candidates, mask), state)
        return self._outputs(pose, y), state

    def step(self, state: MambaState, control: torch.Tensor, pose: torch.Tensor,
             candidates: torch.Tensor | None = None, mask: torch.Tensor | None = None
             ) -> tuple[dict[str, torch.Tensor], MambaState]:
        """One frame in O(1): control (B, C), pose (B, P), candidates (B, k, W) -> (outputs, state)."""
        y, state = self.backbone.step(state, self._inputs(control, pose, candidates, mask))
        return self._outputs(pose, y), state

    def initial_state(self, batch: int = 1) -> MambaState:
        return self.backbone.initial_state(batch)
