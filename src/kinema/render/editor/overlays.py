"""What the motion editor draws in 3D for each feature, and the overlay names.

:func:`draw_features` only indexes the precomputed :class:`~kinema.render.editor.features.ClipFeatures`
at one frame and queues debug-draw primitives on a renderer (no raylib import here).
"""
from __future__ import annotations

import numpy as np

from kinema.render.editor.features import ClipFeatures

OVERLAYS = {
    "root": "root + facing",
    "trajectory": "root trajectory",
    "joints": "joint trajectories",
    "velocities": "joint velocities",
    "contacts": "foot contacts",
    "phases": "phase dials",
    "plots": "timeline plots",
    "skeleton": "skeleton",
    "body": "character",
}
DEFAULT_OVERLAYS = ("root", "trajectory", "joints", "velocities", "contacts", "phases", "plots", "body")

ROOT_COLOR = (1.0, 0.85, 0.1, 1.0)
PAST_COLOR = (0.2, 0.45, 1.0, 1.0)
FUTURE_COLOR = (1.0, 0.5, 0.0, 1.0)
JOINT_PAST_COLOR = (0.65, 0.35, 0.95, 1.0)
JOINT_FUTURE_COLOR = (0.3, 0.95, 0.45, 1.0)
VELOCITY_COLOR = (0.2, 0.85, 0.95, 1.0)
ROOT_VELOCITY_COLOR = (0.95, 0.3, 0.85, 1.0)
CONTACT_COLOR = (0.1, 0.9, 0.2, 1.0)
AIR_COLOR = (0.95, 0.15, 0.15, 1.0)
AXIS_X_COLOR = (0.95, 0.25, 0.25, 1.0)
AXIS_Y_COLOR = (0.25, 0.85, 0.3, 1.0)
AXIS_LENGTH = 0.06             # metres, joint-trajectory rotation axes
LIFT = 0.02                    # floor overlays float this high above y = 0 (no z-fighting)
CONTACT_RADIUS = 0.06


def draw_features(renderer, feats: ClipFeatures, frame: int, overlays) -> None:
    """Queue the 3D feature overlays of ``frame`` named in ``overlays`` (a set of names)."""
    f = int(np.clip(frame, 0, feats.num_frames - 1))
    lift = np.array([0.0, LIFT, 0.0], np.float32)
    if "trajectory" in overlays:
        current = int((feats.offsets < 0).sum())
        renderer.draw_trajectory(feats.trajectory_positions[f] + lift, feats.trajectory_directions[f], current,
                                 past_color=PAST_COLOR, future_color=FUTURE_COLOR, width=3.0, point_size=9.0,
                                 direction_length=0.2)
    if "root" in overlays:
        p = feats.root.positions[f] + lift
        renderer.draw_sphere(p[None], 0.05, ROOT_COLOR)
        renderer.draw_arrow(p[None], (p + feats.root.directions[f] * 0.6)[None], ROOT_COLOR, 5.0)
    if "joints" in overlays and feats.joints.size:
        current = int((feats.joint_offsets < 0).sum())
        for k in range(feats.joints.size):
            renderer.debug.trajectory(feats.joint_trajectory_positions[f, :, k], None, current,
                                      past_color=JOINT_PAST_COLOR, future_color=JOINT_FUTURE_COLOR,
                                      width=2.0, point_size=5.0)
        # the 6D rotation features: each sample's local x (red) and y (green) axes
        p = feats.joint_trajectory_positions[f].reshape(-1, 3)
        axes = feats.joint_trajectory_axes[f].reshape(-1, 2, 3) * AXIS_LENGTH
        renderer.draw_lines(p, p + axes[:, 0], AXIS_X_COLOR, 1.5)
        renderer.draw_lines(p, p + axes[:, 1], AXIS_Y_COLOR, 1.5)
    if "velocities" in overlays:
        renderer.draw_velocities(feats.positions[f], feats.velocities[f], scale=0.1, color=VELOCITY_COLOR)
        # the root's velocity, 0.5 s of travel from the root (on the floor)
        p = feats.root.positions[f] + lift
        renderer.draw_velocities(p, feats.root_velocities[f], scale=0.5, color=ROOT_VELOCITY_COLOR, width=4.0)
    if "contacts" in overlays and feats.contact_joints.size:
        colours = np.where(feats.contacts[f][:, None], np.float32(CONTACT_COLOR), np.float32(AIR_COLOR))
        renderer.debug.spheres(feats.positions[f, feats.contact_joints], CONTACT_RADIUS, colours)
