"""Retrieval-augmented Mamba controller: next pose from joystick, previous pose and k
poses retrieved from a motion-matching database.

Per frame the model reads

- ``control`` (B, L, C): the joystick request (12 numbers: future trajectory positions and
  directions at +20/+40/+60 frames in the current root space),
- ``pose`` (B, L, P): the previous pose (root-relative pose vector, P = 151 for LaFAN1),
- ``candidates`` (B, L, k, W): k retrieved database frames expressed in the *current*
  character's root space. Each row is ``[pose_j (P), pose_{j+1} - pose_j (P), extra]``
  where ``extra`` may hold contacts, the matching cost, feature residuals (W >= 2P),
- ``mask`` (B, L, k) bool: which candidates are present (False = dropped / null),

and predicts ``next_pose = pose + delta`` and contact logits.

Retrieval pathway (only with ``use_retrieval=True``):

1. a shared per-candidate encoder ``phi`` (no positional embedding: permutation invariant);
2. attention from a query made of (control, pose) to ``{phi(c_i)} U {null}``: the learned
   null token is always a key, so dropping every candidate (candidate dropout in
   training, the ablation at evaluation) is an input the model has seen;
3. the attended vector ``r`` (R numbers) joins the backbone input; the backbone's input-head
   columns for ``r`` start at zero;
4. a per-dimension copy gate adds the attention-weighted successor deltas of the
   candidates to the predicted delta; it starts at zero;
5. a per-dimension pull gate adds the attention-weighted offset from the current pose to
   the candidates' successor poses (``sum_i w_i (pose_j + delta_j - pose)``, the null token
   contributing nothing), so playing a candidate's successor (motion matching) is one gate
   value away and free-running drift can be corrected; it starts at zero.
   ``copy_init`` starts the copy gate elsewhere instead (e.g. 0.5: half of the candidates'
   motion is played from the first step), a different starting basin for training.
6. optionally (``gates="state"``) both gates are scaled per frame by
   ``1 + tanh(gate_head(y))`` in [0, 2], read from the backbone output y (so from its
   history): the model can shut the pull on an exact previous pose (teacher forcing, the
   first frames after a context) and keep it on a drifted one. The head starts at zero,
   so the scale starts at exactly 1 (the static gates, ``gates="static"``, the default).

With ``kinematic`` (a :class:`~kinema.nn.kinematic.KinematicPrior` config), the predicted
delta starts from the pose's own kinematic one-step displacement of the joint positions
(``pose + prior(pose) + delta``): the network learns the residual of integrating the
velocities it reads, instead of the integration itself.

Steps 3 to 5 start at zero (with the default ``copy_init``), so a fresh retrieval model
computes exactly what the no-retrieval model with the same backbone weights computes, and
training moves away from that baseline only where the candidates help. With
``use_retrieval=False`` the model *is* the reference backbone (:class:`kinema.nn.mamba.Mamba`,
1,833,625 parameters at the reference size) and the candidate arguments are rejected rather
than ignored.
"""
from __future__ import annotations

import torch
from torch import nn

from kinema.nn.kinematic import KinematicPrior
from kinema.nn.layers import Normaliser
from kinema.nn.mamba import Mamba, MambaState

GATES = ("static", "state")


class RetrievalMamba(nn.Module):
    """Mamba backbone with an optional retrieval pathway (see the module docstring).

    Args:
        pose_dim (P), control_dim (C), contact_dim: sizes of pose, joystick and contacts.
        k: candidates per frame.
        candidate_dim (W): features per candidate row (default ``2 P + contact_dim + 1``).
        use_retrieval: build and use the retrieval pathway.
        retrieval_dim (R): width of the encoded candidates and of ``r``.
        gates: ``"static"`` or ``"state"`` (step 6).
        copy_init: the copy gate's starting value in every dimension (step 4; default 0).
        kinematic: :meth:`KinematicPrior.config` of the pose layout (fps, columns), or None;
            its normaliser is set with ``model.kinematic.set_normaliser(mean, std)``.
        backbone: keyword arguments of :class:`~kinema.nn.mamba.Mamba` (d_model, n_layers, ...).
    """

    def __init__(self, pose_dim: int = 151, control_dim: int = 12, contact_dim: int = 2, k: int = 4,
                 candidate_dim: int | None = None, use_retrieval: bool = True, retrieval_dim: int = 64,
                 gates: str = "static", kinematic: dict | None = None, copy_init: float = 0.0, **backbone):
        super().__init__()
        candidate_dim = 2 * pose_dim + contact_dim + 1 if candidate_dim is None else candidate_dim
        if gates not in GATES:
            raise ValueError(f"unknown gates {gates!r}; expected one of {GATES}")
        if use_retrieval and candidate_dim < 2 * pose_dim:
            raise ValueError(f"candidate_dim {candidate_dim} must hold pose and successor delta (>= {2 * pose_dim})")
        self.hparams = dict(pose_dim=pose_dim, control_dim=control_dim, contact_dim=contact_dim, k=k,
                            candidate_dim=candidate_dim, use_retrieval=use_retrieval,
                            retrieval_dim=retrieval_dim, **backbone)
        if gates != "static":   # older checkpoints have no "gates" entry and load as "static"
            self.hparams["gates"] = gates
        self.gates = gates
        if copy_init and use_retrieval:   # older checkpoints have no "copy_init" entry and start at 0
            self.hparams["copy_init"] = float(copy_init)
        # The one-step kinematic prior (buffers only: the pose normaliser); None = off.
        self.kinematic = KinematicPrior(pose_dim, **kinematic) if kinematic else None
        if self.kinematic is not None:   # older checkpoints have no "kinematic" entry
            self.hparams["kinematic"] = self.kinematic.config()
        self.pose_dim, self.control_dim, self.contact_dim = pose_dim, control_dim, contact_dim
        self.k, self.candidate_dim, self.use_retrieval = k, candidate_dim, use_retrieval
        extra = retrieval_dim if use_retrieval else 0
        self.backbone = Mamba(control_dim + pose_dim + extra, pose_dim + contact_dim, **backbone)
        if use_retrieval:
            self.candidate_norm = Normaliser(candidate_dim)
            self.encoder = nn.Sequential(nn.Linear(candidate_dim, 2 * retrieval_dim), nn.ELU(),
                                         nn.Linear(2 * retrieval_dim, 2 * retrieval_dim))
            self.query = nn.Linear(control_dim + pose_dim, retrieval_dim)
            self.null_token = nn.Parameter(torch.randn(2 * retrieval_dim) * 0.02)
            self.copy_gate = nn.Parameter(torch.full((pose_dim,), float(copy_init)))
            self.pull_gate = nn.Parameter(torch.zeros(pose_dim))
            if gates == "state":
                # Per-frame gate scales from the backbone's output (see gate_values); the
                # zero init makes them exactly 1 at start.
                self.gate_head = nn.Linear(pose_dim + contact_dim, 2 * pose_dim)
                nn.init.zeros_(self.gate_head.weight)
                nn.init.zeros_(self.gate_head.bias)
            with torch.no_grad():
                self.backbone.in_head.weight[:, control_dim + pose_dim:] = 0.0
            self.scale = retrieval_dim ** -0.5

    # -- parts ----------------------------------------------------------------------------
    def parameter_groups(self) -> dict[str, int]:
        """Parameter counts by part: where a retrieval model's extra parameters live."""
        groups = {"backbone": sum(p.numel() for p in self.backbone.parameters())}
        if self.use_retrieval:
            r = self.hparams["retrieval_dim"]
            groups["backbone.in_head columns for r"] = self.backbone.in_head.out_features * r
            groups["backbone (reference part)"] = groups["backbone"] - groups["backbone.in_head columns for r"]
            groups["candidate encoder"] = sum(p.numel() for p in self.encoder.parameters())
            groups["attention query"] = sum(p.numel() for p in self.query.parameters())
            groups["null token"] = self.null_token.numel()
            groups["copy gate"] = self.copy_gate.numel()
            groups["pull gate"] = self.pull_gate.numel()
            if self.gates == "state":
                groups["state gate head"] = sum(p.numel() for p in self.gate_head.parameters())
        groups["total"] = sum(p.numel() for p in self.parameters())
        return groups

    def retrieve(self, control: torch.Tensor, pose: torch.Tensor, candidates: torch.Tensor | None,
                 mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Attend over candidates: (..., C), (..., P), (..., k, W), (..., k) ->
        (r (..., R), candidate weights (..., k), the candidate correction (..., P) with the
        static gates: ``copy_gate * sum_i w_i delta_i + pull_gate * sum_i w_i (pose_i + delta_i - pose)``).

        ``candidates=None`` means every candidate is dropped (only the null token is seen).
        """
        r, cand_w, copy_term, pull_term = self._attend(control, pose, candidates, mask)
        return r, cand_w, self.copy_gate * copy_term + self.pull_gate * pull_term

    def _attend(self, control, pose, candidates, mask):
        """(r, candidate weights, ``sum_i w_i delta_i``, ``sum_i w_i (pose_i + delta_i - pose)``)."""
        lead = pose.shape[:-1]
        r_dim = self.hparams["retrieval_dim"]
        q = self.query(torch.cat([control, pose], -1))                         # (..., R)
        null = self.null_token.expand(*lead, 1, 2 * r_dim)
        if candidates is None:
            keys_values = null
            valid = torch.ones(*lead, 1, dtype=torch.bool, device=pose.device)
        else:
            if candidates.shape[-1] != self.candidate_dim or candidates.shape[-2] != self.k:
                raise ValueError(f"candidates must be (..., {self.k}, {self.candidate_dim}), "
                                 f"got {tuple(candidates.shape)}")
            enc = self.encoder(self.candidate_norm.normalise(candidates))      # (..., k, 2R)
            keys_values = torch.cat([null, enc], -2)
            present = torch.ones(candidates.shape[:-1], dtype=torch.bool, device=pose.device) \
                if mask is None else mask.to(torch.bool)
            valid = torch.cat([torch.ones(*lead, 1, dtype=torch.bool, device=pose.device), present], -1)
        keys, values = keys_values[..., :r_dim], keys_values[..., r_dim:]
        logits = (keys @ q.unsqueeze(-1)).squeeze(-1) * self.scale             # (..., 1 + k)
        weights = torch.softmax(logits.masked_fill(~valid, float("-inf")), -1)
        r = (weights.unsqueeze(-1) * values).sum(-2)
        if candidates is None:
            zero = torch.zeros_like(pose)
            return r, pose.new_zeros(*lead, self.k), zero, zero
        cand_w = weights[..., 1:]
        deltas = candidates[..., self.pose_dim:2 * self.pose_dim]
        succ = candidates[..., :self.pose_dim] + deltas
        w = cand_w.unsqueeze(-1)
        pull = (w * succ).sum(-2) - cand_w.sum(-1, keepdim=True) * pose
        return r, cand_w, (w * deltas).sum(-2), pull

    def _inputs(self, control, pose, candidates, mask):
        """(backbone input, candidate weights or None, (copy term, pull term) or None)."""
        if not self.use_retrieval:
            if candidates is not None:
                raise ValueError("this model was built with use_retrieval=False: it cannot read candidates")
            return torch.cat([control, pose], -1), None, None
        r, w, copy_term, pull_term = self._attend(control, pose, candidates, mask)
        return torch.cat([control, pose, r], -1), w, (copy_term, pull_term)

    def gate_values(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy and pull gates (..., P) for backbone outputs y (..., P + contact_dim): the
        learned per-dimension gates, with ``gates="state"`` scaled per frame by
        ``1 + tanh(gate_head(normalised y))`` in [0, 2] (y is a linear image of the
        backbone's final hidden state, so the scale can depend on the history: shut the
        pull on an exact previous pose, keep it on a drifted one). Bounded so a state the
        head never saw cannot push a gate out of the range the static gate learned
        (an unbounded additive offset diverged in free running)."""
        if self.gates == "static":
            return self.copy_gate, self.pull_gate
        g = 1.0 + torch.tanh(self.gate_head(self.backbone.output_norm.normalise(y)))
        return self.copy_gate * g[..., :self.pose_dim], self.pull_gate * g[..., self.pose_dim:]

    def _outputs(self, pose, y, w, terms) -> dict[str, torch.Tensor]:
        delta = y[..., :self.pose_dim]
        if self.kinematic is not None:
            delta = delta + self.kinematic(pose)
        if terms is not None:
            copy_gate, pull_gate = self.gate_values(y)
            delta = delta + (copy_gate * terms[0] + pull_gate * terms[1])
        out = {"pose": pose + delta, "delta": delta, "contact_logits": y[..., self.pose_dim:]}
        if w is not None:
            out["candidate_weights"] = w
        return out

    # -- running ----------------------------------------------------------------------------
    def forward(self, control: torch.Tensor, pose: torch.Tensor, candidates: torch.Tensor | None = None,
                mask: torch.Tensor | None = None, state: MambaState | None = None
                ) -> tuple[dict[str, torch.Tensor], MambaState]:
        """Whole sequences: control (B, L, C), pose (B, L, P), candidates (B, L, k, W) or None,
        mask (B, L, k) -> (outputs dict with ``pose`` (B, L, P) = predicted next pose,
        ``delta``, ``contact_logits`` (B, L, contact_dim), ``candidate_weights``; last state)."""
        x, w, terms = self._inputs(control, pose, candidates, mask)
        y, state = self.backbone.forward_with_state(x, state)
        return self._outputs(pose, y, w, terms), state

    def step(self, state: MambaState, control: torch.Tensor, pose: torch.Tensor,
             candidates: torch.Tensor | None = None, mask: torch.Tensor | None = None, inplace: bool = False
             ) -> tuple[dict[str, torch.Tensor], MambaState]:
        """One frame in O(1): control (B, C), pose (B, P), candidates (B, k, W) -> (outputs, state).
        ``inplace`` (no grad only): overwrite ``state`` (:meth:`kinema.nn.mamba.Mamba.step`)."""
        x, w, terms = self._inputs(control, pose, candidates, mask)
        y, state = self.backbone.step(state, x, inplace)
        return self._outputs(pose, y, w, terms), state

    def initial_state(self, batch: int = 1) -> MambaState:
        return self.backbone.initial_state(batch)
