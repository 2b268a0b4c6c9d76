"""Triangle-soup primitives built with NumPy, many at once (spheres, capsules, cones, boxes).

Every builder returns ``(positions (N*K, 3), normals (N*K, 3))`` float32 for N instances of a
K-vertex template, ready to append to a batch. Triangles are counter-clockwise seen from
outside (front faces out). Units are metres.
"""
from __future__ import annotations

import functools

import numpy as np


def _outward_order(points: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """(3T,) vertex order making each triangle of a soup counter-clockwise around its normals."""
    p = points.reshape(-1, 3, 3)
    face = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    flip = np.einsum("ij,ij->i", face, normals.reshape(-1, 3, 3).sum(1)) < 0
    order = np.arange(p.shape[0] * 3).reshape(-1, 3)
    order[flip] = order[flip][:, [0, 2, 1]]
    return order.ravel()


def _grid_triangles(rows: int, cols: int) -> np.ndarray:
    """(T, 3) indices of a (rows+1) x (cols+1) vertex grid, wrapping in columns."""
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    c1 = (c + 1) % cols
    w = cols
    a, b, d, e = r * w + c, r * w + c1, (r + 1) * w + c, (r + 1) * w + c1
    return np.concatenate([np.stack([a, d, b], -1).reshape(-1, 3), np.stack([b, d, e], -1).reshape(-1, 3)])


@functools.lru_cache(maxsize=8)
def capsule_template(rings: int = 4, segments: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """A unit capsule as a split sphere.

    Returns:
        (end (K,) int 0|1 which end point a vertex hangs from, unit (K, 3) offset from it in
        the bone frame whose +Y runs from end 0 to end 1). The vertex is
        ``end_point + R @ (radius * unit)`` and its normal ``R @ unit``. With both end points
        equal it is a sphere.
    """
    # latitudes from the bottom pole to the top pole, the equator twice (bottom, top)
    lower = np.linspace(-np.pi / 2, 0.0, rings + 1)
    upper = np.linspace(0.0, np.pi / 2, rings + 1)
    lats = np.concatenate([lower, upper])
    ends = np.concatenate([np.zeros(rings + 1, int), np.ones(rings + 1, int)])
    lons = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    la, lo = np.meshgrid(lats, lons, indexing="ij")
    unit = np.stack([np.cos(la) * np.sin(lo), np.sin(la), np.cos(la) * np.cos(lo)], -1).reshape(-1, 3)
    end = np.repeat(ends, segments)
    tris = _grid_triangles(len(lats) - 1, segments)
    # drop the zero-area triangles at the poles (first and last ring degenerate to a point)
    keep = np.array([len({tuple(np.round(unit[i] + end[i] * 7, 6)) for i in t}) == 3 for t in tris])
    e, u = end[tris[keep].ravel()], unit[tris[keep].ravel()].astype(np.float64)
    reference = u * 0.5 + e[:, None] * np.array([0.0, 1.0, 0.0])   # a capsule to orient against
    order = _outward_order(reference, u)
    return e[order], u[order]


def frames_from_directions(d: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotations whose second column (+Y) is the unit direction of each ``d`` (N, 3)."""
    d = np.asarray(d, np.float64)
    n = np.linalg.norm(d, axis=-1, keepdims=True)
    y = np.where(n > 1e-9, d / np.maximum(n, 1e-12), np.array([0.0, 1.0, 0.0]))
    helper = np.where(np.abs(y[:, :1]) < 0.9, np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))
    z = np.cross(helper, y)
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    x = np.cross(y, z)
    return np.stack([x, y, z], axis=-1)


def capsules(a: np.ndarray, b: np.ndarray, radius) -> tuple[np.ndarray, np.ndarray]:
    """Capsules from ``a`` (N, 3) to ``b`` (N, 3) with ``radius`` (N,) or scalar."""
    a = np.asarray(a, np.float64).reshape(-1, 3)
    b = np.asarray(b, np.float64).reshape(-1, 3)
    r = np.broadcast_to(np.asarray(radius, np.float64), (a.shape[0],))
    end, unit = capsule_template()
    rot = frames_from_directions(b - a)                          # (N, 3, 3)
    offs = np.einsum("nij,kj->nki", rot, unit)                   # (N, K, 3)
    base = np.where(end[None, :, None] == 1, b[:, None], a[:, None])
    pos = base + offs * r[:, None, None]
    return pos.reshape(-1, 3).astype(np.float32), offs.reshape(-1, 3).astype(np.float32)


@functools.lru_cache(maxsize=1)
def sphere_template() -> np.ndarray:
    """(K, 3) unit-sphere triangle soup: the capsule template without its cylinder band."""
    end, unit = capsule_template()
    band = end.reshape(-1, 3).min(1) != end.reshape(-1, 3).max(1)
    return unit.reshape(-1, 3, 3)[~band].reshape(-1, 3)


def spheres(centers: np.ndarray, radius) -> tuple[np.ndarray, np.ndarray]:
    """Spheres at ``centers`` (N, 3) with ``radius`` (N,) or scalar."""
    c = np.asarray(centers, np.float64).reshape(-1, 3)
    r = np.broadcast_to(np.asarray(radius, np.float64), (c.shape[0],))
    unit = sphere_template()
    pos = c[:, None] + unit[None] * r[:, None, None]
    nrm = np.broadcast_to(unit, pos.shape)
    return pos.reshape(-1, 3).astype(np.float32), nrm.reshape(-1, 3).astype(np.float32)


@functools.lru_cache(maxsize=4)
def cone_template(segments: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Unit cone (base radius 1 at y=0, apex at y=1) with its base disc: (K, 3) points, normals."""
    lo = np.linspace(0.0, 2 * np.pi, segments + 1)
    c, s = np.cos(lo), np.sin(lo)
    pts, nrm = [], []
    for i in range(segments):
        p0 = np.array([s[i], 0.0, c[i]])
        p1 = np.array([s[i + 1], 0.0, c[i + 1]])
        apex = np.array([0.0, 1.0, 0.0])
        n0 = np.array([s[i], 0.7, c[i]]) / np.sqrt(1.49)
        n1 = np.array([s[i + 1], 0.7, c[i + 1]]) / np.sqrt(1.49)
        pts += [p0, p1, apex]
        nrm += [n0, n1, (n0 + n1) / np.linalg.norm(n0 + n1)]
        pts += [p1, p0, np.zeros(3)]
        nrm += [np.array([0.0, -1.0, 0.0])] * 3
    pts, nrm = np.array(pts), np.array(nrm)
    order = _outward_order(pts, nrm)
    return pts[order], nrm[order]


def cones(base: np.ndarray, apex: np.ndarray, radius) -> tuple[np.ndarray, np.ndarray]:
    """Cones from base centres (N, 3) to apexes (N, 3) with base ``radius`` (N,) or scalar."""
    base = np.asarray(base, np.float64).reshape(-1, 3)
    apex = np.asarray(apex, np.float64).reshape(-1, 3)
    r = np.broadcast_to(np.asarray(radius, np.float64), (base.shape[0],))
    h = np.linalg.norm(apex - base, axis=-1)
    pts, nrm = cone_template()
    rot = frames_from_directions(apex - base)
    scale = np.stack([r, h, r], -1)                               # (N, 3)
    local = pts[None] * scale[:, None]                            # (N, K, 3)
    pos = base[:, None] + np.einsum("nij,nkj->nki", rot, local)
    nor = np.einsum("nij,kj->nki", rot, nrm)
    return pos.reshape(-1, 3).astype(np.float32), nor.reshape(-1, 3).astype(np.float32)


@functools.lru_cache(maxsize=1)
def box_template() -> tuple[np.ndarray, np.ndarray]:
    """Unit cube (-0.5..0.5): (36, 3) points, (36, 3) normals."""
    pts, nrm = [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            n = np.zeros(3)
            n[axis] = sign
            u = np.zeros(3)
            u[(axis + 1) % 3] = 1.0
            v = np.cross(n, u)
            c = n * 0.5
            quad = [c - u * 0.5 - v * 0.5, c + u * 0.5 - v * 0.5, c + u * 0.5 + v * 0.5, c - u * 0.5 + v * 0.5]
            for i in (0, 1, 2, 0, 2, 3):
                pts.append(quad[i])
                nrm.append(n)
    pts, nrm = np.array(pts), np.array(nrm)
    order = _outward_order(pts, nrm)
    return pts[order], nrm[order]


def boxes(transforms: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boxes with (N, 4, 4) world transforms and (N, 3) full edge lengths."""
    t = np.asarray(transforms, np.float64).reshape(-1, 4, 4)
    s = np.broadcast_to(np.asarray(sizes, np.float64), (t.shape[0], 3))
    pts, nrm = box_template()
    local = pts[None] * s[:, None]
    pos = np.einsum("nij,nkj->nki", t[:, :3, :3], local) + t[:, None, :3, 3]
    nor = np.einsum("nij,kj->nki", t[:, :3, :3], nrm)
    nor /= np.linalg.norm(nor, axis=-1, keepdims=True)
    return pos.reshape(-1, 3).astype(np.float32), nor.reshape(-1, 3).astype(np.float32)
