"""Scene-graph helpers shared by the glTF and FBX importers.

A scene file holds a tree of nodes with arbitrary order and arbitrary transforms
(scale, non-joint ancestors such as an ``Armature`` node). kinema's skeletons need
joints in parent-before-child order, rigid local transforms and metres. These helpers
turn per-node 4x4 world matrices into that form:

* :func:`joint_tree` picks the joint nodes in depth-first order and links each to its
  nearest joint ancestor, so non-joint nodes in between (and above the root) are folded
  into the joints' transforms;
* :func:`rigid_from_matrices` strips (uniform) scale from world matrices and returns
  unit quaternions (w, x, y, z) and positions;
* :func:`local_from_world` converts world transforms to local ones with
  :func:`kinema.motion.kinematics.inverse` and makes quaternions continuous over time.

Matrices act on column vectors: ``p_world = M @ [p, 1]``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kinema.maths import quat
from kinema.motion import kinematics

#: Frame rates the apparent source rate is snapped to when within 5 %.
COMMON_RATES = (12.0, 15.0, 24.0, 25.0, 30.0, 48.0, 50.0, 60.0, 100.0, 120.0)


def trs_matrix(translation: np.ndarray, rotation: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(..., 4, 4) matrices ``T @ R @ S`` from translations (..., 3), unit quaternions
    (..., 4) in (w, x, y, z) and scales (..., 3)."""
    t = np.asarray(translation, np.float64)
    r = quat.to_matrix(np.asarray(rotation, np.float64))
    s = np.asarray(scale, np.float64)
    shape = np.broadcast_shapes(t.shape[:-1], r.shape[:-2], s.shape[:-1])
    m = np.zeros(shape + (4, 4))
    m[..., :3, :3] = r * s[..., None, :]
    m[..., :3, 3] = t
    m[..., 3, 3] = 1.0
    return m


def rigid_from_matrices(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split affine matrices (..., 4, 4) into rotation, position and scale.

    Returns:
        (rotations (..., 4) w,x,y,z, positions (..., 3), scales (..., 3): the column
        lengths of the linear part). Shear is discarded.
    """
    m = np.asarray(m, np.float64)
    lin = m[..., :3, :3]
    scale = np.linalg.norm(lin, axis=-2)
    rot = lin / np.maximum(scale, 1e-12)[..., None, :]
    return quat.abs(quat.normalize(quat.from_matrix(rot))), m[..., :3, 3].copy(), scale


def rigid_matrices(rotations: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """(..., 4, 4) rigid matrices from rotations (..., 4) w,x,y,z and positions (..., 3)."""
    return trs_matrix(positions, rotations, np.ones(np.shape(positions)))


def world_matrices(local: np.ndarray, node_parents: Sequence[int], order: Sequence[int]) -> np.ndarray:
    """World matrices of nodes from local ones.

    Args:
        local: (..., N, 4, 4) local matrices.
        node_parents: (N,) parent node of each node, -1 for scene roots (any order).
        order: nodes to compute, each listed after its parent (only these are filled).
    Returns:
        (..., N, 4, 4) world matrices (identity for nodes not in ``order``).
    """
    world = np.broadcast_to(np.eye(4), local.shape).copy()
    for n in order:
        p = node_parents[n]
        world[..., n, :, :] = local[..., n, :, :] if p < 0 else world[..., p, :, :] @ local[..., n, :, :]
    return world


def depth_first(node_parents: Sequence[int], children: Sequence[Sequence[int]] | None = None) -> list[int]:
    """All nodes in depth-first pre-order (parents before children, siblings in file order).

    Raises ValueError on a cycle.
    """
    n = len(node_parents)
    if children is None:
        children = [[] for _ in range(n)]
        for c, p in enumerate(node_parents):
            if p >= 0:
                children[p].append(c)
    out: list[int] = []
    seen = np.zeros(n, bool)
    stack = [r for r in range(n) if node_parents[r] < 0][::-1]
    while stack:
        v = stack.pop()
        if seen[v]:
            raise ValueError(f"node {v} is reached twice (the node graph is not a tree)")
        seen[v] = True
        out.append(v)
        stack.extend(reversed(list(children[v])))
    if len(out) != n:
        raise ValueError("the node graph has a cycle (some nodes are not reachable from a root)")
    return out


def ancestors(node: int, node_parents: Sequence[int]) -> list[int]:
    """Ancestors of ``node``, nearest first."""
    out = []
    p = node_parents[node]
    while p >= 0:
        out.append(p)
        p = node_parents[p]
        if len(out) > len(node_parents):
            raise ValueError("the node graph has a cycle")
    return out


def joint_tree(node_parents: Sequence[int], joint_nodes: Sequence[int]) -> tuple[list[int], np.ndarray]:
    """Order joint nodes parent-first and link each to its nearest joint ancestor.

    Args:
        node_parents: (N,) parent node per node, -1 for scene roots.
        joint_nodes: the nodes that are joints (any order, duplicates ignored).
    Returns:
        (nodes: the joint nodes in depth-first order, parents: (J,) int index into
        ``nodes`` of each joint's nearest joint ancestor, -1 when it has none).
    """
    is_joint = {int(j) for j in joint_nodes}
    nodes = [v for v in depth_first(node_parents) if v in is_joint]
    index = {v: i for i, v in enumerate(nodes)}
    parents = np.full(len(nodes), -1, np.int64)
    for i, v in enumerate(nodes):
        for a in ancestors(v, node_parents):
            if a in index:
                parents[i] = index[a]
                break
    return nodes, parents


def continuous(q: np.ndarray, axis: int = 0) -> np.ndarray:
    """Flip quaternion signs along ``axis`` (time) so consecutive ones lie in one hemisphere."""
    q = np.moveaxis(np.array(q, np.float64), axis, 0)
    if q.shape[0] > 1:
        dots = np.sum(q[1:] * q[:-1], axis=-1)
        flips = np.cumprod(np.where(dots < 0, -1.0, 1.0), axis=0)
        q[1:] *= flips[..., None]
    return np.moveaxis(q, 0, axis)


def local_from_world(world: np.ndarray, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local rotations and positions of joints from their world matrices.

    Args:
        world: (F, J, 4, 4) world matrices of the joints (scale is stripped).
        parents: (J,) joint parents, -1 for roots, parents first.
    Returns:
        (rotations (F, J, 4) float64 w,x,y,z continuous over frames, positions (F, J, 3)).
    """
    grot, gpos, _ = rigid_from_matrices(world)
    rot, pos = kinematics.inverse(grot, gpos, parents)
    rot = np.asarray(rot, np.float64)
    rot /= np.linalg.norm(rot, axis=-1, keepdims=True)
    rot *= np.where(rot[..., :1] < 0, -1.0, 1.0)
    return continuous(rot, axis=0), np.asarray(pos, np.float64)


def apparent_fps(times: Sequence[np.ndarray], default: float = 30.0) -> float:
    """The source frame rate implied by key times.

    Uses the median interval between distinct consecutive keys over all channels and
    snaps it to a :data:`COMMON_RATES` value within 5 %, else rounds to an integer.
    """
    gaps = []
    for t in times:
        d = np.diff(np.unique(np.asarray(t, np.float64)))
        gaps.append(d[d > 1e-6])
    gaps = np.concatenate(gaps) if gaps else np.zeros(0)
    if gaps.size == 0:
        return float(default)
    rate = 1.0 / float(np.median(gaps))
    for r in COMMON_RATES:
        if abs(rate - r) <= 0.05 * r:
            return r
    return float(max(1, round(rate)))


def unique_names(names: Sequence[str | None], prefix: str = "node") -> list[str]:
    """Names made unique (``name``, ``name.1``, ...); empty names become ``{prefix}{i}``."""
    out, seen = [], set()
    for i, n in enumerate(names):
        base = str(n) if n else f"{prefix}{i}"
        name, k = base, 1
        while name in seen:
            name = f"{base}.{k}"
            k += 1
        seen.add(name)
        out.append(name)
    return out
