"""Batched debug drawing: lines, points, spheres, capsules, boxes, arrows, axes, 3D text,
trajectories, contact markers, skeleton sticks and velocity vectors.

Calls only append NumPy arrays; :meth:`DebugDraw.line_vertices` and
:meth:`DebugDraw.solid_vertices` concatenate everything once per frame so the renderer
draws all lines in one draw call and all solids in another (thousands of primitives stay
interactive). Colours are RGBA (or RGB) floats in [0, 1]; positions are metres.
"""
from __future__ import annotations

import numpy as np

from kinema.render import geometry

Color = tuple[float, ...]

WHITE = (1.0, 1.0, 1.0, 1.0)
RED = (0.9, 0.2, 0.2, 1.0)
GREEN = (0.2, 0.8, 0.3, 1.0)
BLUE = (0.2, 0.4, 0.95, 1.0)
YELLOW = (0.95, 0.85, 0.2, 1.0)
ORANGE = (1.0, 0.55, 0.1, 1.0)
CYAN = (0.2, 0.85, 0.9, 1.0)
MAGENTA = (0.9, 0.3, 0.9, 1.0)
BLACK = (0.0, 0.0, 0.0, 1.0)

# corner (side, end) of the 6 vertices of a line quad
_LINE_CORNERS = np.array([[-1, 0], [1, 0], [1, 1], [-1, 0], [1, 1], [-1, 1]], np.float32)


def as_colors(color, n: int) -> np.ndarray:
    """(n, 4) float32 RGBA from one colour or per-item colours (RGB or RGBA)."""
    c = np.asarray(color, np.float32)
    if c.ndim == 1:
        c = np.broadcast_to(c, (n, c.shape[0]))
    if c.shape[-1] == 3:
        c = np.concatenate([c, np.ones(c.shape[:-1] + (1,), np.float32)], axis=-1)
    return np.ascontiguousarray(np.broadcast_to(c, (n, 4)), np.float32)


class DebugDraw:
    """Collects primitives for one frame; the renderer consumes and clears them."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._lines: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._solids: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.texts: list[tuple[np.ndarray, str, np.ndarray, int]] = []

    # ------------------------------------------------------------------ primitives
    def lines(self, start, end, color=WHITE, width: float = 2.0) -> None:
        """Segments ``start`` (N, 3) -> ``end`` (N, 3), ``width`` pixels."""
        a = np.asarray(start, np.float32).reshape(-1, 3)
        b = np.asarray(end, np.float32).reshape(-1, 3)
        if a.shape[0] == 0:
            return
        w = np.broadcast_to(np.asarray(width, np.float32), (a.shape[0],))
        self._lines.append((a, b, as_colors(color, a.shape[0]), w))

    def line(self, start, end, color=WHITE, width: float = 2.0) -> None:
        self.lines(start, end, color, width)

    def polyline(self, points, color=WHITE, width: float = 2.0) -> None:
        """Connected segments through ``points`` (N, 3); ``color`` may be per point (N, 4)."""
        p = np.asarray(points, np.float32).reshape(-1, 3)
        if p.shape[0] < 2:
            return
        c = as_colors(color, p.shape[0])
        self.lines(p[:-1], p[1:], c[:-1], width)

    def points(self, positions, color=WHITE, size: float = 6.0) -> None:
        """Screen-space square points of ``size`` pixels at ``positions`` (N, 3)."""
        p = np.asarray(positions, np.float32).reshape(-1, 3)
        self.lines(p, p, color, size)

    def solids(self, positions, normals, color) -> None:
        """Raw lit triangles: ``positions``/``normals`` (3T, 3), ``color`` one or (3T, 4)."""
        p = np.asarray(positions, np.float32).reshape(-1, 3)
        if p.shape[0] == 0:
            return
        self._solids.append((p, np.asarray(normals, np.float32).reshape(-1, 3), as_colors(color, p.shape[0])))

    def _instanced(self, pos, nrm, color, n: int) -> None:
        k = pos.shape[0] // max(n, 1)
        c = as_colors(color, n)
        self.solids(pos, nrm, np.repeat(c, k, axis=0))

    def spheres(self, centers, radius=0.05, color=WHITE) -> None:
        """Lit spheres at ``centers`` (N, 3), ``radius`` scalar or (N,)."""
        c = np.asarray(centers, np.float32).reshape(-1, 3)
        if c.shape[0]:
            self._instanced(*geometry.spheres(c, radius), color, c.shape[0])

    def sphere(self, center, radius=0.05, color=WHITE) -> None:
        self.spheres(center, radius, color)

    def capsules(self, start, end, radius=0.05, color=WHITE) -> None:
        """Lit capsules between ``start`` and ``end`` (N, 3)."""
        a = np.asarray(start, np.float32).reshape(-1, 3)
        if a.shape[0]:
            self._instanced(*geometry.capsules(a, end, radius), color, a.shape[0])

    def boxes(self, transforms, sizes, color=WHITE) -> None:
        """Lit boxes with (N, 4, 4) transforms and (N, 3) edge lengths."""
        t = np.asarray(transforms, np.float32).reshape(-1, 4, 4)
        if t.shape[0]:
            self._instanced(*geometry.boxes(t, sizes), color, t.shape[0])

    def arrows(self, start, end, color=WHITE, width: float = 3.0, head: float = 0.25) -> None:
        """Arrows ``start`` -> ``end`` (N, 3): a line plus a lit cone head (``head`` x length, max 0.15 m)."""
        a = np.asarray(start, np.float32).reshape(-1, 3)
        b = np.asarray(end, np.float32).reshape(-1, 3)
        if a.shape[0] == 0:
            return
        d = b - a
        length = np.linalg.norm(d, axis=-1)
        ok = length > 1e-6
        a, b, d, length = a[ok], b[ok], d[ok], length[ok]
        c = as_colors(color, ok.shape[0])[ok]
        hl = np.minimum(length * head, 0.15)
        base = b - d / length[:, None] * hl[:, None]
        self.lines(a, base, c, width)
        if a.shape[0]:
            self._instanced(*geometry.cones(base, b, hl * 0.35), c, a.shape[0])

    def arrow(self, start, end, color=WHITE, width: float = 3.0) -> None:
        self.arrows(start, end, color, width)

    def axes(self, transforms, size: float = 0.2, width: float = 3.0) -> None:
        """RGB axes (x red, y green, z blue) for (N, 4, 4) transforms."""
        t = np.asarray(transforms, np.float32).reshape(-1, 4, 4)
        o = t[:, :3, 3]
        for k, col in enumerate((RED, GREEN, BLUE)):
            self.lines(o, o + t[:, :3, k] * size, col, width)

    def text(self, position, text: str, color=WHITE, size: int = 16) -> None:
        """Text anchored at a 3D point (drawn in screen space over the scene)."""
        self.texts.append((np.asarray(position, np.float64).reshape(3), str(text), as_colors(color, 1)[0], int(size)))

    # ------------------------------------------------------------------ animation helpers
    def trajectory(self, positions, directions=None, current: int | None = None,
                   past_color=(0.3, 0.5, 1.0, 1.0), future_color=ORANGE,
                   width: float = 3.0, point_size: float = 8.0, direction_length: float = 0.25) -> None:
        """A trajectory (N, 3) with optional facing ``directions`` (N, 3).

        Samples before index ``current`` use ``past_color``, the rest ``future_color``
        (all future when ``current`` is None).
        """
        p = np.asarray(positions, np.float32).reshape(-1, 3)
        n = p.shape[0]
        k = 0 if current is None else int(np.clip(current, 0, n))
        cols = np.empty((n, 4), np.float32)
        cols[:k] = as_colors(past_color, 1)
        cols[k:] = as_colors(future_color, 1)
        self.polyline(p, cols, width)
        self.points(p, cols, point_size)
        if directions is not None:
            d = np.asarray(directions, np.float32).reshape(-1, 3)
            self.lines(p, p + d * direction_length, cols, width * 0.7)

    def contacts(self, positions, mask, color=(1.0, 0.2, 0.2, 1.0), radius: float = 0.04) -> None:
        """Contact markers: spheres at ``positions`` (K, 3) where ``mask`` (K,) is true."""
        p = np.asarray(positions, np.float32).reshape(-1, 3)
        m = np.asarray(mask, bool).reshape(-1)
        if m.any():
            self.spheres(p[m], radius, color)

    def skeleton(self, positions, parents, color=(0.95, 0.95, 0.95, 1.0), width: float = 3.0,
                 joint_color=None, joint_size: float = 7.0) -> None:
        """Stick figure: a line from each joint (J, 3) to its parent, points on the joints."""
        p = np.asarray(positions, np.float32).reshape(-1, 3)
        par = np.asarray(parents, int)
        child = np.nonzero(par >= 0)[0]
        self.lines(p[par[child]], p[child], color, width)
        self.points(p, color if joint_color is None else joint_color, joint_size)

    def velocities(self, positions, velocities, scale: float = 0.1, color=CYAN, width: float = 2.0) -> None:
        """Velocity vectors (m/s) drawn as arrows of length ``scale`` x speed."""
        p = np.asarray(positions, np.float32).reshape(-1, 3)
        v = np.asarray(velocities, np.float32).reshape(-1, 3)
        self.arrows(p, p + v * scale, color, width)

    # ------------------------------------------------------------------ consumption
    @property
    def num_lines(self) -> int:
        return sum(a.shape[0] for a, *_ in self._lines)

    @property
    def num_solid_vertices(self) -> int:
        return sum(p.shape[0] for p, *_ in self._solids)

    def line_vertices(self) -> dict[str, np.ndarray] | None:
        """Expanded quads for every segment: start, end, params (side, end, width), colour (6N, ...)."""
        if not self._lines:
            return None
        a = np.concatenate([x[0] for x in self._lines])
        b = np.concatenate([x[1] for x in self._lines])
        c = np.concatenate([x[2] for x in self._lines])
        w = np.concatenate([x[3] for x in self._lines])
        n = a.shape[0]
        params = np.empty((n, 6, 3), np.float32)
        params[:, :, :2] = _LINE_CORNERS
        params[:, :, 2] = w[:, None]
        rep = lambda x: np.repeat(x, 6, axis=0)  # noqa: E731
        return {"start": rep(a), "end": rep(b), "params": params.reshape(-1, 3), "color": rep(c)}

    def solid_vertices(self) -> dict[str, np.ndarray] | None:
        """All lit triangles: positions, normals, colours (3T, ...)."""
        if not self._solids:
            return None
        return {"position": np.concatenate([s[0] for s in self._solids]),
                "normal": np.concatenate([s[1] for s in self._solids]),
                "color": np.concatenate([s[2] for s in self._solids])}
