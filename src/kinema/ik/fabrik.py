"""FABRIK (Aristidou and Lasenby 2011) on joint positions, batched over leading dims.

Positions only: a chain or tree of joints is pulled toward end-effector targets by
alternating backward (from the effectors) and forward (from the fixed root) passes that
place every joint at its exact bone length from the previous one, so bone lengths are
preserved to rounding. Several effectors may share a root (a tree): in the backward pass
a joint with several children moves to the centroid of their proposals (the
multiple-end-effector rule of the paper). A pole target turns every inner joint of a
chain about the line through its neighbours toward the pole, which keeps both of its
bone lengths and the effector position.

Each iteration ends by placing every effector's last two bones in closed form (law of
cosines, keeping their bend plane) when the target is within their reach from the joint
above them, and, for a single chain still short of its target, by turning two rigid
halves of the chain (split where the law of cosines has most slack) onto the target.
Both keep every bone length; they make two-bone limbs exact in one iteration and remove
FABRIK's slow convergence near full extension and for folded chains.

The loop runs over iterations and over the joints of the tree, each step vectorised over
the batch; converged batch items are frozen.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kinema.errors import KinemaError
from kinema.maths import quat


@dataclass(eq=False)
class FabrikResult:
    """Solved positions and how the solve went.

    Attributes:
        positions: (..., J, 3) solved positions (float64), same layout as the input.
        iterations: iterations run (the most any batch item needed).
        errors: (..., E) distance of each effector from its target, metres.
    """

    positions: np.ndarray
    iterations: int
    errors: np.ndarray


def path(parents: Sequence[int], root: int, end: int) -> list[int]:
    """Joints from ``root`` down to ``end`` (inclusive); raises when ``end`` is not below ``root``."""
    out = [int(end)]
    while out[-1] != root:
        p = int(parents[out[-1]])
        if p < 0:
            raise KinemaError(f"joint {end} is not a descendant of the IK root {root}")
        out.append(p)
    return out[::-1]


def _unit(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    ok = n > 1e-12
    return np.where(ok, v / np.where(ok, n, 1.0), fallback)


def _apply_pole(p: np.ndarray, a: int, j: int, b: int, pole: np.ndarray, mask: np.ndarray) -> None:
    """Turn joint ``j`` about the line from ``a`` to ``b`` toward ``pole`` (in place)."""
    axis = p[:, b] - p[:, a]
    n = np.linalg.norm(axis, axis=-1, keepdims=True)
    axis = axis / np.maximum(n, 1e-12)
    u = p[:, j] - p[:, a]
    w = pole - p[:, a]
    ua = (u * axis).sum(-1, keepdims=True)
    u_perp = u - ua * axis
    w_perp = w - (w * axis).sum(-1, keepdims=True) * axis
    lu = np.linalg.norm(u_perp, axis=-1, keepdims=True)
    lw = np.linalg.norm(w_perp, axis=-1, keepdims=True)
    ok = mask & (n[:, 0] > 1e-9) & (lu[:, 0] > 1e-9) & (lw[:, 0] > 1e-9)
    new = p[:, a] + ua * axis + lu * w_perp / np.maximum(lw, 1e-12)
    p[:, j] = np.where(ok[:, None], new, p[:, j])


def between(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Smallest rotation (..., 4) taking directions ``u`` to ``v`` (..., 3) (any length)."""
    u = u / np.maximum(np.linalg.norm(u, axis=-1, keepdims=True), 1e-12)
    v = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
    w = 1.0 + (u * v).sum(-1, keepdims=True)
    axis = np.cross(u, v)
    # opposite directions: a half turn about any axis perpendicular to u
    opposite = w[..., 0] < 1e-9
    if opposite.any():
        other = np.where(np.abs(u[..., :1]) < 0.9, np.array([1.0, 0, 0]), np.array([0, 1.0, 0]))
        perp = np.cross(u, other)
        perp /= np.maximum(np.linalg.norm(perp, axis=-1, keepdims=True), 1e-12)
        axis = np.where(opposite[..., None], perp, axis)
        w = np.where(opposite[..., None], 0.0, w)
    q = np.concatenate([w, axis], -1)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _rigid_split(p: np.ndarray, chain: list[int], target: np.ndarray, mask: np.ndarray,
                 straighten: bool = False) -> None:
    """Reach ``target`` exactly by turning two rigid halves of a single chain (in place).

    For a split joint m the halves root..m and m..end have chords a and b; when
    ``|a - b| <= d <= a + b`` (d: root to target) the first half turns about the root and
    the second about m (law of cosines, keeping the bend plane), which keeps every bone
    length and reaches the target. The split with the most slack is used. This finishes
    chains near full extension, where FABRIK converges slowly. With ``straighten``, a chain
    too bent for every split (all ``a + b < d``) whose full length reaches is first made
    straight toward the target, then split near its middle.
    """
    root = p[:, chain[0]]
    to_t = target - root
    d = np.linalg.norm(to_t, axis=-1)
    best = np.full(p.shape[0], -np.inf)
    split = np.full(p.shape[0], -1)
    too_bent = np.ones(p.shape[0], bool)
    for m in chain[1:-1]:
        a = np.linalg.norm(p[:, m] - root, axis=-1)
        b = np.linalg.norm(p[:, chain[-1]] - p[:, m], axis=-1)
        too_bent &= a + b < d
        slack = np.minimum(a + b - d, d - np.abs(a - b))
        better = mask & (slack >= 0) & (slack > best) & (d > 1e-9) & (a > 1e-9) & (b > 1e-9)
        best = np.where(better, slack, best)
        split = np.where(better, m, split)
    # a chain too bent for any split, with the target within its full length: make it
    # straight toward the target and split it near the middle, bending in the plane the
    # split joint had
    lengths = np.linalg.norm(np.diff(p[:, chain], axis=1), axis=-1)
    cum = np.cumsum(lengths, axis=1)
    total = cum[:, -1]
    stuck = straighten & mask & (split < 0) & too_bent & (d <= total) & (d > 1e-9)
    if stuck.any():
        mid = 1 + np.argmin(np.abs(2 * cum[:, :-1] - total[:, None]), axis=1)
        split = np.where(stuck, np.array(chain)[mid], split)
    rows = np.nonzero(split >= 0)[0]
    ref = np.zeros_like(root)
    ref[rows] = p[rows, split[rows]]
    if stuck.any():
        u = to_t[stuck] / d[stuck, None]
        p[np.ix_(np.nonzero(stuck)[0], chain[1:])] = root[stuck, None] + cum[stuck][:, :, None] * u[:, None]
    for m in np.unique(split[split >= 0]):
        i = np.nonzero(split == m)[0]
        k = chain.index(int(m))
        q = p[i]
        r = root[i]
        u = to_t[i] / d[i, None]
        a = np.linalg.norm(q[:, m] - r, axis=-1, keepdims=True)
        bvec = q[:, chain[-1]] - q[:, m]
        b = np.linalg.norm(bvec, axis=-1, keepdims=True)
        dd = d[i, None]
        bend = ref[i] - r
        v = bend - (bend * u).sum(-1, keepdims=True) * u
        nv = np.linalg.norm(v, axis=-1, keepdims=True)
        other = np.where(np.abs(u[:, :1]) < 0.9, np.array([1.0, 0, 0]), np.array([0, 1.0, 0]))
        v = np.where(nv > 1e-9, v / np.maximum(nv, 1e-12), np.cross(u, other))
        v /= np.linalg.norm(v, axis=-1, keepdims=True)
        cos = np.clip((a * a + dd * dd - b * b) / (2 * a * dd), -1.0, 1.0)
        pm = r + a * (cos * u + np.sqrt(1 - cos * cos) * v)
        qa = between(q[:, m] - r, pm - r)
        first = np.array(chain[:k + 1])
        second = np.array(chain[k:])
        turned = quat.rotate(qa[:, None], q[:, second] - q[:, m][:, None])
        qb = between(turned[:, -1], target[i] - pm)
        q[:, first] = r[:, None] + quat.rotate(qa[:, None], q[:, first] - r[:, None])
        q[:, second] = pm[:, None] + quat.rotate(qb[:, None], turned)
        p[i] = q


def two_bone(p: np.ndarray, a: int, m: int, e: int, target: np.ndarray, la: np.ndarray, lb: np.ndarray) -> None:
    """Place joints ``m`` and ``e`` of positions ``p`` (B, J, 3) exactly (law of cosines)
    when ``target`` (B, 3) is within reach of the two bones of lengths ``la`` and ``lb``
    (B, 1) hanging from joint ``a``; ``m`` keeps its bend plane. In place; a character whose
    target is out of reach keeps its joints."""
    to_t = target - p[:, a]
    d = np.linalg.norm(to_t, axis=-1, keepdims=True)
    ok = ((d >= np.abs(la - lb)) & (d <= la + lb) & (d > 1e-9))[:, 0]
    if not ok.any():
        return
    u = to_t / np.maximum(d, 1e-12)
    bend = p[:, m] - p[:, a]
    v = bend - (bend * u).sum(-1, keepdims=True) * u
    nv = np.linalg.norm(v, axis=-1, keepdims=True)
    other = np.where(np.abs(u[:, :1]) < 0.9, np.array([1.0, 0, 0]), np.array([0, 1.0, 0]))
    v = np.where(nv > 1e-9, v / np.maximum(nv, 1e-12), np.cross(u, other))
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    cos = np.clip((la * la + d * d - lb * lb) / (2 * la * np.maximum(d, 1e-12)), -1.0, 1.0)
    mid = p[:, a] + la * (cos * u + np.sqrt(1 - cos * cos) * v)
    end = mid + lb * _unit(target - mid, u)
    p[:, m] = np.where(ok[:, None], mid, p[:, m])
    p[:, e] = np.where(ok[:, None], end, p[:, e])


def solve(positions: np.ndarray, parents: Sequence[int], root: int, targets: Mapping[int, np.ndarray], *,
          poles: Mapping[int, np.ndarray] | None = None, max_iterations: int = 20,
          tolerance: float = 1e-4) -> FabrikResult:
    """Move the joints between ``root`` and the effectors so the effectors reach their targets.

    Args:
        positions: (..., J, 3) world joint positions, metres.
        parents: (J,) parent indices (each parent before its child).
        root: the joint that stays fixed (the chains' shared root).
        targets: effector joint -> target position (..., 3) (broadcast over the batch).
        poles: inner joint -> pole position (..., 3): after solving, that joint turns
            about the line through its parent and its (single, solved) child toward it.
        max_iterations: at most this many backward/forward passes.
        tolerance: stop when every effector is this close to its target (metres).
    Returns:
        :class:`FabrikResult`; joints outside the root -> effector paths keep their
        positions (see :func:`kinema.ik.pose.solve_pose` for rigidly carried descendants).
        A single effector whose target is out of reach ends on the straight line from the
        root toward the target, fully stretched.
    """
    pos = np.asarray(positions, np.float64)
    if pos.ndim < 2 or pos.shape[-1] != 3:
        raise KinemaError(f"IK positions must be (..., J, 3), got {pos.shape}")
    parents = np.asarray(parents, np.int64)
    nj = pos.shape[-2]
    if parents.shape != (nj,):
        raise KinemaError(f"parents has {parents.shape[0]} entries for {nj} joints")
    if not targets:
        raise KinemaError("IK needs at least one target")
    batch = pos.shape[:-2]
    p = pos.reshape(-1, nj, 3).copy()
    b = p.shape[0]
    effectors = [int(e) for e in targets]
    tgt = np.stack([np.broadcast_to(np.asarray(targets[e], np.float64), batch + (3,)).reshape(b, 3)
                    for e in effectors], 1)
    chains = [path(parents, root, e) for e in effectors]
    joints = sorted({j for c in chains for j in c})
    inner = [j for j in joints if j != root]
    children = {j: [c for c in inner if parents[c] == j] for j in joints}
    lengths = {j: np.linalg.norm(p[:, j] - p[:, parents[j]], axis=-1, keepdims=True) for j in inner}
    rest_dir = {j: _unit(p[:, j] - p[:, parents[j]], np.array([0.0, 1.0, 0.0])) for j in inner}
    base = p[:, root].copy()

    def errors(q: np.ndarray) -> np.ndarray:
        return np.linalg.norm(q[:, effectors] - tgt, axis=-1)

    active = np.ones(b, bool)
    if len(effectors) == 1:
        # out of reach: stretch straight toward the target, no iterations needed
        total = sum(lengths[j] for j in chains[0][1:])[:, 0]
        to_target = tgt[:, 0] - base
        far = np.linalg.norm(to_target, axis=-1) >= total
        if far.any():
            d = _unit(to_target, rest_dir[chains[0][1]])
            acc = np.zeros((b, 1))
            for j in chains[0][1:]:
                acc = acc + lengths[j]
                p[:, j] = np.where(far[:, None], base + acc * d, p[:, j])
            active &= ~far
    iterations = 0
    for _ in range(max_iterations):
        active &= (errors(p) > tolerance).any(-1)
        if not active.any():
            break
        iterations += 1
        q = p[active]
        t = tgt[active]
        back = q.copy()
        for k, e in enumerate(effectors):
            back[:, e] = t[:, k]
        # backward: from the effectors toward the root; a joint with several solved
        # children moves to the centroid of their proposals
        for j in reversed(inner):
            if j in effectors:
                continue
            kids = children[j]
            if kids:
                prop = [back[:, c] + lengths[c][active] * _unit(q[:, j] - back[:, c], -rest_dir[c][active])
                        for c in kids]
                back[:, j] = sum(prop) / len(prop)
        # forward: from the fixed root outward, exact bone lengths
        new = q.copy()
        new[:, root] = base[active]
        for j in inner:
            pj = parents[j]
            new[:, j] = new[:, pj] + lengths[j][active] * _unit(back[:, j] - new[:, pj], rest_dir[j][active])
        # finish each effector's last two bones in closed form when the target is within
        # their reach (FABRIK converges slowly for folded chains and near the reach limits)
        for k, (e, chain) in enumerate(zip(effectors, chains)):
            if len(chain) >= 3 and not children[e] and len(children[chain[-2]]) == 1:
                two_bone(new, chain[-3], chain[-2], e, t[:, k], lengths[chain[-2]][active], lengths[e][active])
        if len(effectors) == 1 and len(chains[0]) >= 3:
            _rigid_split(new, chains[0], t[:, 0], np.linalg.norm(new[:, effectors[0]] - t[:, 0], axis=-1) > tolerance,
                         straighten=iterations >= 3)
        p[active] = new
    if poles:
        for j, pole in poles.items():
            j = int(j)
            kids = children.get(j, [])
            if j == root or j not in children or len(kids) != 1:
                raise KinemaError(f"pole joint {j} must be an inner joint of a solved chain with one solved child")
            pole = np.broadcast_to(np.asarray(pole, np.float64), batch + (3,)).reshape(b, 3)
            _apply_pole(p, int(parents[j]), j, kids[0], pole, np.ones(b, bool))
    return FabrikResult(p.reshape(pos.shape), iterations, errors(p).reshape(batch + (len(effectors),)))


def fabrik(chain: np.ndarray, target: np.ndarray, *, pole: np.ndarray | None = None,
           max_iterations: int = 20, tolerance: float = 1e-4) -> FabrikResult:
    """Solve one chain (..., N, 3) (joint 0 fixed, joint N-1 the effector) for ``target``
    (..., 3). ``pole`` (..., 3) bends every inner joint toward it. See :func:`solve`."""
    chain = np.asarray(chain, np.float64)
    n = chain.shape[-2]
    if n < 2:
        raise KinemaError(f"a chain needs at least 2 joints, got {n}")
    parents = np.arange(-1, n - 1)
    poles = None if pole is None else dict.fromkeys(range(1, n - 1), pole)
    return solve(chain, parents, 0, {n - 1: target}, poles=poles, max_iterations=max_iterations,
                 tolerance=tolerance)
