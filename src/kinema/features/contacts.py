"""Foot (end-effector) contact labels and local phases derived from them.

A joint is in contact when it is low (world height below a threshold) and slow (speed
below a threshold); a median filter over time removes single-frame flicker. Local phases
(Starke et al. 2020, "Local Motion Phases") turn each contact signal into a cyclic phase
in [0, 1): 0 at every contact onset, rising linearly to the next onset.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kinema.errors import KinemaError
from kinema.features.root import finite_difference


def contacts(global_positions: np.ndarray, fps: float, joints: Sequence[int],
             height_threshold: float | Sequence[float] | None = 0.1,
             speed_threshold: float | Sequence[float] | None = 0.3,
             filter_size: int = 5, velocities: np.ndarray | None = None) -> np.ndarray:
    """Contact labels of ``joints``.

    Args:
        global_positions: (F, J, 3) world positions, metres (floor at y = 0).
        fps: frame rate (for speeds).
        joints: K joint indices (e.g. feet and toes).
        height_threshold: metres, scalar or (K,); None disables the height test.
        speed_threshold: m/s, scalar or (K,); None disables the speed test.
        filter_size: median filter length in frames (odd; 1 or less disables it).
        velocities: (F, J, 3) precomputed world velocities (default central differences).
    Returns:
        (F, K) bool, True where the joint touches the ground.
    """
    p = np.asarray(global_positions)
    if p.ndim != 3 or p.shape[-1] != 3:
        raise KinemaError(f"global_positions must be (F, J, 3), got {p.shape}")
    joints = np.asarray(joints, np.int64).reshape(-1)
    if joints.size and (joints.min() < 0 or joints.max() >= p.shape[1]):
        raise KinemaError(f"contact joints {joints.tolist()} out of range for {p.shape[1]} joints")
    if height_threshold is None and speed_threshold is None:
        raise KinemaError("contacts needs a height or a speed threshold")
    out = np.ones((p.shape[0], joints.size), bool)
    if height_threshold is not None:
        out &= p[:, joints, 1] < np.asarray(height_threshold, np.float64)
    if speed_threshold is not None:
        v = finite_difference(p[:, joints], fps) if velocities is None else velocities[:, joints]
        out &= np.linalg.norm(v, axis=-1) < np.asarray(speed_threshold, np.float64)
    return median_filter(out, filter_size)


def median_filter(labels: np.ndarray, size: int) -> np.ndarray:
    """Median-filter boolean labels (F, K) over frames (majority vote in an odd window,
    edges repeated)."""
    labels = np.asarray(labels, bool)
    if size <= 1 or labels.shape[0] < 2:
        return labels.copy()
    if size % 2 == 0:
        size += 1
    from scipy.ndimage import median_filter as _mf
    return _mf(labels.astype(np.uint8), size=(size,) + (1,) * (labels.ndim - 1), mode="nearest").astype(bool)


def onsets(labels: np.ndarray) -> list[np.ndarray]:
    """Frames where each contact begins (False -> True), one int array per column of
    ``labels`` (F, K). The first frame never counts as an onset."""
    c = np.asarray(labels, bool)
    rise = c[1:] & ~c[:-1]
    return [np.nonzero(rise[:, k])[0] + 1 for k in range(c.shape[1])]


def local_phases(labels: np.ndarray) -> np.ndarray:
    """A phase per column of contact ``labels`` (F, K), in [0, 1).

    The phase is 0 at each contact onset and rises linearly to the next one. Before the
    first onset and after the last the neighbouring cycle's period is extended (modulo 1);
    a column with fewer than two onsets has phase 0 throughout.
    Returns:
        (F, K) float32.
    """
    c = np.asarray(labels, bool)
    f = np.arange(c.shape[0], dtype=np.float64)
    out = np.zeros(c.shape, np.float64)
    for k, on in enumerate(onsets(c)):
        if on.size < 2:
            continue
        # cycle i runs from on[i] to on[i+1]; frames outside use the first/last cycle
        i = np.clip(np.searchsorted(on, f, side="right") - 1, 0, on.size - 2)
        start, period = on[i], on[i + 1] - on[i]
        out[:, k] = np.mod((f - start) / period, 1.0)
    out = out.astype(np.float32)
    out[out >= 1] = 0  # rounding of values just below 1 (or of -0 modulo 1)
    return out


def phase_vectors(phases: np.ndarray) -> np.ndarray:
    """Phases (..., K) in [0, 1) as points on the unit circle (..., K, 2): (sin, cos)."""
    a = 2 * np.pi * np.asarray(phases, np.float64)
    return np.stack([np.sin(a), np.cos(a)], axis=-1).astype(np.float32)
