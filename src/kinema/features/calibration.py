"""The calibration pose a capture take opens with.

Mocap takes (LaFAN1, Holden's PFNN captures) often start with the actor standing in a
T-pose for the solver, then dropping the arms and starting the action. Those frames are no
motion to learn or match. :func:`calibration_frames` finds them: the take opens with both
arms (upper arm to hand) within ``arm_tolerance`` of horizontal for at least
``min_seconds``, and the calibration lasts until both arms hang ``release`` below the
horizontal, plus ``settle`` seconds.
"""
from __future__ import annotations

import numpy as np

from kinema.errors import SkeletonError
from kinema.motion import Motion
from kinema.motion.roles import find_roles


def arm_elevation(positions: np.ndarray, roles: dict[str, int]) -> np.ndarray:
    """(F, 2) elevation in degrees of the left and right arm (upper arm joint to hand)
    above the horizontal (0 level, -90 hanging straight down)."""
    out = []
    for side in ("left", "right"):
        v = positions[:, roles[f"{side}_hand"]] - positions[:, roles[f"{side}_upper_arm"]]
        out.append(np.degrees(np.arcsin(np.clip(v[:, 1] / np.maximum(np.linalg.norm(v, axis=-1), 1e-9), -1, 1))))
    return np.stack(out, axis=1)


def calibration_frames(motion: Motion, *, arm_tolerance: float = 30.0, release: float = 50.0,
                       min_seconds: float = 0.3, settle: float = 0.2, max_seconds: float = 20.0) -> int:
    """How many opening frames of ``motion`` are a calibration T-pose (0 when it has none,
    or when the skeleton has no arms kinema can name).

    Args:
        arm_tolerance: degrees from horizontal both arms stay within during the T-pose.
        release: degrees below horizontal both arms reach when the actor drops them.
        min_seconds: shortest opening T-pose counted.
        settle: seconds trimmed after the arms are down.
        max_seconds: a "T-pose" still held after this long is the action itself: 0.
    """
    try:
        roles = find_roles(motion.skeleton)
    except SkeletonError:
        return 0
    if not all(f"{s}_{p}" in roles for s in ("left", "right") for p in ("upper_arm", "hand")):
        return 0
    n = min(motion.num_frames, int(round(max_seconds * motion.fps)) + 1)
    el = arm_elevation(motion[:n].global_positions().astype(np.float64), roles)
    level = (np.abs(el) < arm_tolerance).all(axis=1)
    held = int(np.argmin(level)) if not level.all() else n
    if held < min_seconds * motion.fps:
        return 0
    down = (el[held:] < -release).all(axis=1)
    if not down.any():
        return 0 if held >= n else held
    end = held + int(np.argmax(down)) + int(round(settle * motion.fps))
    return int(min(end, motion.num_frames - 2))
