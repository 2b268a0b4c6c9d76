"""A procedural body for any skeleton: one capsule per bone, so every motion can be seen."""
from __future__ import annotations

import numpy as np


def body_capsules(positions, parents, thickness: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Capsules for the bones of one pose.

    Args:
        positions: (J, 3) world joint positions, metres.
        parents: (J,) parent indices (-1 for roots).
        thickness: radius multiplier.

    Returns:
        (start (B, 3), end (B, 3), radius (B,)): one capsule per bone longer than 1 mm. Bones
        hanging from a root joint that are longer than 40% of the figure's size (a static
        ``Root``/``Simulation`` joint on the floor connected to the travelling hips) are left
        out. Radii grow with bone length and with how many joints hang below the bone (the
        spine carries arms and head, so the torso comes out thicker than the neck), clamped
        by the figure's size.
    """
    p = np.asarray(positions, np.float64).reshape(-1, 3)
    par = np.asarray(parents, int).reshape(-1)
    child = np.nonzero(par >= 0)[0]
    a, b = p[par[child]], p[child]
    length = np.linalg.norm(b - a, axis=-1)
    size = float(np.ptp(p, axis=0).max()) if p.shape[0] > 1 else 1.0
    size = max(size, 1e-3)
    from_root = par[par[child]] < 0
    keep = (length > 1e-3) & ~(from_root & (length > 0.4 * size))
    below = np.zeros(len(par), int)            # descendants of each joint
    for j in range(len(par) - 1, 0, -1):
        if par[j] >= 0:
            below[par[j]] += below[j] + 1
    carried = below[child][keep] + 1
    a, b, length = a[keep], b[keep], length[keep]
    radius = np.maximum(0.2 * length, 0.006 * size * np.sqrt(carried) + 0.01 * size)
    radius = np.clip(radius, 0.015 * size, 0.05 * size) * thickness
    return a, b, radius
