"""Helpers shared by the demo tests: find the drawn figure in a headless demo's MP4 by
comparing it with renders of the empty scene (floor and sky) from the same cameras."""
from __future__ import annotations

import imageio.v2 as imageio
import numpy as np


def empty_floor(views: list[dict], width: int, height: int) -> list[np.ndarray]:
    """Renders (H, W, 3) of the empty scene from each recorded camera (``camera_position``,
    ``camera_target`` of a demo's ``rendered_frames``)."""
    from kinema.render import Renderer
    r = Renderer(show_fps=False)
    r.open(width, height, "empty floor", headless=True)
    out = []
    try:
        for v in views:
            r.camera.set_fixed(v["camera_position"], v["camera_target"])
            r.camera.snap()
            r.begin_frame()
            r.begin_gui()
            r.end_frame()
            out.append(r.capture())
    finally:
        r.close()
    return out


def figure_contrast(video: str, views: list[dict], key: str = "hips_px", every: int = 15,
                    visible: str = "hips_visible") -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Mean absolute RGB difference, video against the empty floor, in a 7x7 patch at each
    projected point ``views[i][key]`` (one (2,) pixel or (P, 2) of them) and in one at the
    bottom-right corner (floor only), every ``every``-th rendered frame.

    Returns: (S, P) at the points, (S,) at the corner, and the S frame indices sampled.
    Asserts the video has one frame per view and every sampled point is inside the image."""
    frames = list(imageio.get_reader(video).iter_data())
    assert len(frames) == len(views)
    h, w = frames[0].shape[:2]
    picked = list(range(0, len(views), every))
    empty = empty_floor([views[i] for i in picked], w, h)
    at, corner = [], []
    for i, e in zip(picked, empty):
        v = views[i]
        assert np.all(v[visible]), v
        diff = np.abs(frames[i].astype(int) - e.astype(int))
        pts = np.atleast_2d(np.asarray(v[key], float))
        at.append([diff[max(0, y - 3):y + 4, max(0, x - 3):x + 4].mean() for x, y in np.round(pts).astype(int)])
        corner.append(diff[h - 12:h - 5, w - 12:w - 5].mean())
    return np.array(at), np.array(corner), picked
