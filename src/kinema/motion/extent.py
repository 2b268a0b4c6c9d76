"""Where a figure is and how big: the body's centre per frame and its size, from world
joint positions, for cameras that frame it (``kinema render``, ``view``, ``serve``).

A joint far from all the others (a static root left at the origin while the hips travel,
as in the Bandai-Namco takes) is no part of the body and is left out.
"""
from __future__ import annotations

import numpy as np


def with_body(positions: np.ndarray) -> np.ndarray:
    """(F, J) bool: joints within 3 median distances of the frame's median joint, from
    world positions (F, J, 3)."""
    g = np.asarray(positions, np.float64)
    d = np.linalg.norm(g - np.median(g, axis=1, keepdims=True), axis=-1)
    return d <= 3.0 * np.median(d, axis=1, keepdims=True) + 1e-6


def body_centre(positions: np.ndarray) -> np.ndarray:
    """(F, 3) mean of the joints that stay with the body, per frame."""
    g = np.asarray(positions, np.float64)
    keep = with_body(g)
    return (g * keep[..., None]).sum(axis=1) / np.maximum(keep.sum(axis=1, keepdims=True), 1)


def body_box(positions: np.ndarray) -> np.ndarray:
    """(3,) sides (m) of the box around the body's joints in one pose (J, 3)."""
    p = np.asarray(positions, np.float64)
    return np.ptp(p[with_body(p[None])[0]], axis=0)


def figure_size(box: np.ndarray) -> float:
    """A figure's size for a camera (m) from its box sides (3,): its height, or 0.6 of its
    longest side for a long, low figure (a dog, a fox), whichever is larger; at least 1 cm."""
    box = np.asarray(box, np.float64)
    return float(max(box[1], 0.6 * box.max(), 0.01))
