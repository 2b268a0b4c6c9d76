"""Backprop through inference: a loss on forward-kinematics joint positions of a model's
output pose reaches the model's control input, and gradient descent on the control
reaches a target pose of real LaFAN1 motion."""
from __future__ import annotations

import torch

from kinema.maths import quat
from kinema.motion import kinematics
from kinema.nn.inversion import optimise_input
from kinema.nn.models import MLP

START, LENGTH = 1200, 10  # a third of a second of walking at 30 fps (one swing)


def _world_positions(pose: torch.Tensor, offsets: torch.Tensor, parents) -> torch.Tensor:
    """pose (..., 22*4 + 1): local quaternions and hips height -> world joints (..., 22, 3)."""
    rot = quat.normalize(pose[..., :88].unflatten(-1, (22, 4)))
    pos = offsets.expand(*pose.shape[:-1], 22, 3).clone()
    pos[..., 0, :] = 0.0
    pos[..., 0, 1] = pose[..., 88]
    return kinematics.forward(rot, pos, parents)[1]


def _trained_pose_model(poses: torch.Tensor, all_poses: torch.Tensor) -> MLP:
    """MLP from a 1-D control (time in [0, 1] across the clip) to the pose at that time."""
    t = torch.linspace(0, 1, LENGTH).unsqueeze(-1)
    torch.manual_seed(0)
    model = MLP(1, 89, hidden=(128, 128), activation="elu")
    model.input_norm.fit(t)
    model.output_norm.fit(all_poses)  # statistics of the whole clip
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        loss, _ = model.training_loss(t, poses)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 2e-3
    return model.eval().requires_grad_(False)


def test_gradient_descent_on_control_reaches_fk_target(lafan_poses, lafan_motion):
    poses = lafan_poses[START:START + LENGTH]
    offsets = torch.tensor(lafan_motion.skeleton.offsets, dtype=torch.float32)
    parents = lafan_motion.parents
    model = _trained_pose_model(poses, lafan_poses)

    target_t = torch.tensor([[7 / (LENGTH - 1)]])
    target = _world_positions(poses[7], offsets, parents)  # real joint positions (22, 3)

    def loss_fn(control):
        return ((_world_positions(model(control), offsets, parents) - target) ** 2).sum(-1).mean()

    control0 = torch.tensor([[1 / (LENGTH - 1)]])
    initial_error = float(loss_fn(control0)) ** 0.5
    control, history = optimise_input(loss_fn, control0, steps=300, lr=0.02)
    final_error = history[-1] ** 0.5
    assert initial_error > 0.05  # > 5 cm RMS joint error to start with
    assert final_error < 0.01  # < 1 cm after descent on the control
    assert abs(float(control) - float(target_t)) < 0.03  # a quarter of the frame spacing
    assert torch.equal(control0, torch.tensor([[1 / (LENGTH - 1)]]))  # init untouched


def test_control_gradient_through_fk_matches_finite_differences(lafan_poses, lafan_motion):
    poses = lafan_poses[START:START + LENGTH].double()
    offsets = torch.tensor(lafan_motion.skeleton.offsets, dtype=torch.float64)
    torch.manual_seed(1)
    model = MLP(3, 89, hidden=(32,), activation="tanh").double()
    model.output_norm.fit(poses)
    target = _world_positions(poses[5], offsets, lafan_motion.parents)

    def loss_fn(control):
        return ((_world_positions(model(control), offsets, lafan_motion.parents) - target) ** 2).sum()

    control = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(loss_fn(control), control)
    eps = 1e-6
    for i in range(3):
        d = torch.zeros(3, dtype=torch.float64)
        d[i] = eps
        with torch.no_grad():
            fd = (loss_fn(control + d) - loss_fn(control - d)) / (2 * eps)
        assert abs(float(fd) - float(grad[i])) < 1e-6 * max(1.0, abs(float(fd)))
    assert grad.abs().max() > 1e-4
