"""What the biped demos draw for a database's or the styles' skeleton
(:func:`kinema.retargeting.skin.character_skin`, measured on their own poses), and where a
frame drew it: :func:`frame_record` is what the headless runs log per rendered frame so
tests can find the figure in the video.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kinema.control.styles import FPS as STYLE_FPS
from kinema.control.styles import StyleLibrary, StylePlayer
from kinema.matching.database import pose_to_world
from kinema.motion import Skeleton
from kinema.retargeting.skin import Skin, character_skin


def database_skin(db, path: Path | None = None) -> Skin | None:
    """:func:`~kinema.retargeting.skin.character_skin` for a motion-matching database's
    skeleton, measured on up to 4000 rows of its unmirrored clips, clip by clip (contact
    speeds are read from them)."""
    # the clips as recorded: a mirrored clip's rotations are in the other side's joint frames
    # and would skew the retargeter's measured frame offsets
    own = [np.arange(lo, hi) for c, (lo, hi) in enumerate(db.ranges) if not db.clip_mirrored[c]]
    rows = np.concatenate(own)[:4000] if own else np.arange(min(db.rows, 4000))
    ref_rot, ref_pos = pose_to_world(db.pose[rows], db.num_joints, db.root_positions[rows], db.root_directions[rows])
    skeleton = Skeleton(list(db.joint_names), db.parents, db.offsets)
    return character_skin(skeleton, (ref_rot, ref_pos, db.fps), path, lafan1=db.config.name.startswith("lafan1"))


def frame_record(renderer, frame: int, joints: np.ndarray, hips: np.ndarray,
                 body: np.ndarray | None = None) -> dict:
    """Where the frame just shown put the figure: the camera, the hips (3,) and their pixel,
    the share of ``joints`` (J, 3) inside the image and their pixel box (x0, y0, x1, y1), and
    the pixels of ``body`` joints (B, 3) when given (points on the drawn mesh)."""
    px, _, visible = renderer.project(hips)
    jpx, _, jvis = renderer.project(joints)
    cam = renderer.camera.camera
    out = {"frame": frame, "camera_position": cam.position.tolist(), "camera_target": cam.target.tolist(),
           "hips": np.asarray(hips).tolist(), "hips_px": px.tolist(), "hips_visible": bool(visible),
           "joints_visible": float(np.mean(jvis)), "joints_box_px": [*jpx.min(0).tolist(), *jpx.max(0).tolist()]}
    if body is not None:
        bpx, _, bvis = renderer.project(body)
        out.update(body_px=bpx.tolist(), body_visible=bvis.tolist())
    return out


STYLE_REFERENCE_FRAMES = 90   # per style: the walk the retargeter measures frames and foot heights on


def style_skin(library: StyleLibrary, path: Path | None = None) -> Skin | None:
    """The character drawn for the Bandai walker (:func:`~kinema.retargeting.skin.character_skin`),
    measured on :data:`STYLE_REFERENCE_FRAMES` frames of every style as the player walks them."""
    player = StylePlayer(library, library.styles[0])
    rot, pos = [], []
    for style in library.styles:
        player.set_style(style)
        for _ in range(STYLE_REFERENCE_FRAMES):
            r, p = player.step(0.0)
            rot.append(r)
            pos.append(p)
    return character_skin(library.skeleton, (np.array(rot), np.array(pos), STYLE_FPS), path)
