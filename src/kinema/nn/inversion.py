"""Backpropagation through inference: optimise a model's *input* (e.g. a control signal)
so that a loss on its output, possibly after further differentiable maths such as
forward kinematics, is minimised. The model's weights stay fixed.

Example (see ``tests/nn/test_inversion.py``)::

    def loss(control):
        pose = model(control)                             # (..., J*4 + 1)
        _, world = kinematics.forward(rotations(pose), positions(pose), parents)
        return ((world - target) ** 2).sum(-1).mean()
    control, history = optimise_input(loss, control0, steps=200, lr=0.05)
"""
from __future__ import annotations

from collections.abc import Callable

import torch


def optimise_input(loss_fn: Callable[[torch.Tensor], torch.Tensor], init: torch.Tensor, steps: int = 200,
                   lr: float = 0.05, tolerance: float = 0.0) -> tuple[torch.Tensor, list[float]]:
    """Gradient descent (Adam) on an input tensor.

    Args:
        loss_fn: maps the input (shape of ``init``) to a scalar loss, differentiably.
        init: starting input; not modified.
        steps: maximum iterations. lr: Adam step size. tolerance: stop when loss <= it.
    Returns:
        (optimised input, detached; loss per iteration).
    """
    x = init.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr)
    history: list[float] = []
    for _ in range(steps):
        loss = loss_fn(x)
        history.append(float(loss.detach()))
        if history[-1] <= tolerance:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    return x.detach(), history
