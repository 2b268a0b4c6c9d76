"""Planted-foot root motion: the root moves so that a toe on the floor stays where it was.

A controller that predicts its root motion (a network's root velocity, a database row's)
and its leg motion separately skates whenever the two disagree: the stance toe's world
position is ``root + R(yaw) toe_local`` and moves if the root's step is not the toe's
backward swing in root space. :func:`planted_root` corrects the root after the usual
integration so that the toes on the floor keep last frame's world position (horizontally):
for each toe a weight ``w`` (1 at or below ``floor`` metres, falling linearly to 0 at
``floor + band``, times the same weight of the toe last frame: a toe is pinned only while it
stays down, and 0 for a toe that would move more than ``PLANT_REACH``: a root that was
teleported or reset since). The root shifts by ``max(w)`` times a blend of the toes'
offsets whose shares are ``w * exp(-|offset| / PLANT_SCALE)`` normalised: with one toe
down, exactly its offset (that toe does not slide); with both down, mostly the offset of
the toe that moved less (the stance toe: a swinging toe skimming the floor moves
centimetres a frame, a stance toe under a slightly wrong root millimetres), and the mean of
the two when both stand. With no toe down the pose's own root motion moves the root.

The facing is left to the controller's predicted turning rate, so the character turns about
a planted toe as it turns about its root. The correction applies the same way to any
method's drawn poses, so evaluations can give it to every compared controller.
"""
from __future__ import annotations

import numpy as np

from kinema.features.root import yaw_rotate
from kinema.maths.backend import Array, is_torch

PLANT_BAND = 0.02   # m above the floor height over which a toe's pin weight falls to 0
PLANT_REACH = 0.25  # m: a toe farther than this from last frame's is not pinned (a teleport)
PLANT_SCALE = 0.01  # m per frame: how much less a toe must move to take over the pin


def plant_weights(heights: Array, floor: float, band: float = PLANT_BAND) -> Array:
    """Pin weights (...,) in [0, 1] of toe heights (...,) in metres: 1 at or below ``floor``,
    0 at or above ``floor + band``, linear between (NumPy, in float64, or torch)."""
    if is_torch(heights):
        return ((floor + band - heights) / band).clamp(0.0, 1.0)
    return np.clip((floor + band - np.asarray(heights, np.float64)) / band, 0.0, 1.0)


def planted_shift(world: Array, prev: Array, floor: float, band: float = PLANT_BAND) -> Array:
    """The planted-foot root shift (B, 3) (see the module docstring) of world toe positions
    (B, T, 3) this frame after the root's own motion, and the toes drawn the frame before
    (B, T, 3), metres. NumPy (float64) or torch; in torch the pins and the shares are read
    from detached values, so a gradient flows only through the toes' offsets: a root moved
    by a stance toe is moved by that leg's swing."""
    if is_torch(world):
        offset = (prev - world) * world.new_tensor([1.0, 0.0, 1.0])
        dist = offset.detach().norm(dim=-1)
        w = plant_weights(world[..., 1].detach(), floor, band) * plant_weights(prev[..., 1].detach(), floor, band)
        w = w * (dist <= PLANT_REACH)
        share = w * (-dist / PLANT_SCALE).exp()
        share = share / share.sum(1, keepdim=True).clamp(min=1e-12)
        return w.amax(1, keepdim=True) * (share[..., None] * offset).sum(1)
    w = plant_weights(world[..., 1], floor, band) * plant_weights(prev[..., 1], floor, band)   # (B, T)
    offset = (prev - world) * np.array([1.0, 0.0, 1.0])
    dist = np.linalg.norm(offset, axis=-1)
    w = w * (dist <= PLANT_REACH)
    share = w * np.exp(-dist / PLANT_SCALE)
    share = share / np.maximum(share.sum(1, keepdims=True), 1e-12)
    return w.max(1, initial=0.0)[:, None] * (share[..., None] * offset).sum(1)


def planted_root(root_pos: np.ndarray, root_dir: np.ndarray, toes_local: np.ndarray, prev_toes: np.ndarray,
                 floor: float, band: float = PLANT_BAND) -> tuple[np.ndarray, np.ndarray]:
    """Correct roots so that the toes on the floor stay put (see the module docstring).

    Args:
        root_pos, root_dir: (B, 3) the roots (on the floor) and facings after this frame's
            own root motion.
        toes_local: (B, T, 3) root-space toe positions of this frame's pose (m).
        prev_toes: (B, T, 3) world toe positions drawn the frame before (m).
        floor, band: toe height (m) at or below which a toe is fully pinned, and the band
            above it over which the pin fades.

    Returns:
        (root positions (B, 3) float32, world toe positions (B, T, 3) as now drawn: the next
        frame's ``prev_toes``).
    """
    world = yaw_rotate(np.asarray(root_dir, np.float64)[:, None], np.asarray(toes_local, np.float64)) \
        + np.asarray(root_pos, np.float64)[:, None]
    shift = planted_shift(world, np.asarray(prev_toes, np.float64), floor, band)
    return (root_pos + shift).astype(np.float32), (world + shift[:, None]).astype(np.float32)
