"""Helpers shared by the rendering tests."""
from __future__ import annotations

import numpy as np


def render(r, draw, gui=None) -> np.ndarray:
    """One frame: ``draw(r)`` between begin_frame/begin_gui; returns the capture."""
    r.begin_frame()
    draw(r)
    r.begin_gui()
    if gui is not None:
        gui(r.ui)
    r.end_frame()
    return r.capture()


def neighbourhood(img: np.ndarray, px: np.ndarray, k: int = 1) -> np.ndarray:
    """(N, (2k+1)^2, 3) pixels around each (x, y) in ``px`` (clamped to the image)."""
    h, w = img.shape[:2]
    out = []
    for x, y in np.round(px).astype(int):
        ys = np.clip(np.arange(y - k, y + k + 1), 0, h - 1)
        xs = np.clip(np.arange(x - k, x + k + 1), 0, w - 1)
        out.append(img[np.ix_(ys, xs)].reshape(-1, 3))
    return np.array(out)
