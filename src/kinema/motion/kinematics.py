"""Forward and inverse kinematics over a joint hierarchy, on NumPy or torch.

``q_world[j] = q_world[parent[j]] * q_local[j]`` and
``p_world[j] = p_world[parent[j]] + rotate(q_world[parent[j]], p_local[j])``.

Forward kinematics is vectorised over frames *and* over the joints of one depth level:
the Python loop runs once per level of the hierarchy (about 7 to 12 for a human), not
once per joint or frame, which keeps NumPy's per-call overhead off the hot path. NumPy
float32 or float64 inputs go through a compiled kernel instead
(:mod:`kinema.motion.kinematics_kernels`: one pass per pose, the same operations in the same
order, so the same bits), and so does :func:`positions_from_rotations`; torch tensors and
mixed dtypes take the level loop.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from kinema.maths import quat
from kinema.maths.backend import Array, cat, is_torch, where


@lru_cache(maxsize=64)
def _levels(parents: tuple[int, ...]) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """Joints grouped by depth, each level's parents as positions in the level above,
    and the permutation that puts level-ordered joints back into skeleton order."""
    parents_a = np.asarray(parents)
    depth = np.zeros(len(parents), np.int64)
    for j, p in enumerate(parents):
        if p >= 0:
            depth[j] = depth[p] + 1
    levels = [np.nonzero(depth == d)[0] for d in range(int(depth.max(initial=0)) + 1)]
    pos_in_level = np.zeros(len(parents), np.int64)
    for lv in levels:
        pos_in_level[lv] = np.arange(len(lv))
    parent_pos = [pos_in_level[parents_a[lv]] if d > 0 else np.empty(0, np.int64)
                  for d, lv in enumerate(levels)]
    order = np.concatenate(levels)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return levels, parent_pos, inverse


def _index(x: Array, idx: np.ndarray) -> Array:
    """x[..., idx, :] for NumPy or torch."""
    if is_torch(x):
        import torch
        return x.index_select(-2, torch.as_tensor(idx, device=x.device))
    return x[..., idx, :]


# NumPy inputs with more poses than this are processed in blocks of this many poses, so
# each level's temporaries stay in cache: ~1.4x faster on 30k-frame LaFAN1 (bench_fk).
_BLOCK = 2048


def forward(local_rot: Array, local_pos: Array, parents) -> tuple[Array, Array]:
    """World rotations and positions from local ones.

    Args:
        local_rot: (..., J, 4) local rotations (w, x, y, z).
        local_pos: (..., J, 3) local translations (offset from the parent), metres.
        parents: (J,) parent indices, -1 for roots, each parent before its child.
    Returns:
        (global_rot (..., J, 4), global_pos (..., J, 3)); torch in -> torch out
        (differentiable).
    """
    key = tuple(parents.tolist()) if isinstance(parents, np.ndarray) else tuple(int(p) for p in parents)
    if _compiled_fits(local_rot, local_pos, key):
        return _forward_compiled(local_rot, local_pos, key)
    levels, parent_pos, inverse = _levels(key)
    if not is_torch(local_rot):
        lead = np.broadcast_shapes(local_rot.shape[:-2], local_pos.shape[:-2])
        count = int(np.prod(lead))
        if count > _BLOCK:
            return _forward_blocks(local_rot, local_pos, lead, levels, parent_pos, inverse)
    return _forward_levels(local_rot, local_pos, levels, parent_pos, inverse)


@lru_cache(maxsize=64)
def _parents_array(parents: tuple[int, ...]) -> np.ndarray | None:
    """(J,) int64 parents when every parent precedes its child (the compiled kernel's one
    pass in index order needs it), else None."""
    if any(p >= j for j, p in enumerate(parents)):
        return None
    a = np.asarray(parents, np.int64).reshape(-1)
    a.flags.writeable = False
    return a


def _compiled_fits(local_rot, local_pos, parents: tuple[int, ...]) -> bool:
    """NumPy float32 (or float64) arrays of one dtype and the same leading shape: the case
    :mod:`kinema.motion.kinematics_kernels` computes bit for bit like the level loop."""
    return (type(local_rot) is np.ndarray and type(local_pos) is np.ndarray
            and local_rot.dtype == local_pos.dtype and local_rot.dtype in _COMPILED_DTYPES
            and local_rot.ndim >= 2 and local_rot.shape[:-2] == local_pos.shape[:-2]
            and local_rot.shape[-2:] == (len(parents), 4) and local_pos.shape[-1] == 3
            and local_pos.shape[-2] == len(parents) and _parents_array(parents) is not None)


_COMPILED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _forward_compiled(local_rot: np.ndarray, local_pos: np.ndarray, parents: tuple[int, ...]):
    """:func:`forward` through the compiled kernel (same results, one pass per pose)."""
    from kinema.motion import kinematics_kernels
    joints = len(parents)
    rot = np.ascontiguousarray(local_rot).reshape(-1, joints, 4)
    pos = np.ascontiguousarray(local_pos).reshape(-1, joints, 3)
    out_rot = np.empty(local_rot.shape, local_rot.dtype)
    out_pos = np.empty(local_pos.shape, local_pos.dtype)
    kinematics_kernels.forward(rot, pos, _parents_array(parents), out_rot.reshape(-1, joints, 4),
                               out_pos.reshape(-1, joints, 3))
    return out_rot, out_pos


def _forward_blocks(local_rot, local_pos, lead, levels, parent_pos, inverse):
    """:func:`forward` for big NumPy batches, block by block into preallocated outputs."""
    joints = len(inverse)
    rot = np.broadcast_to(local_rot, lead + (joints, 4)).reshape(-1, joints, 4)
    pos = np.broadcast_to(local_pos, lead + (joints, 3)).reshape(-1, joints, 3)
    dtype = np.result_type(rot.dtype, pos.dtype)
    out_rot = np.empty(rot.shape, dtype)
    out_pos = np.empty(pos.shape, dtype)
    for i in range(0, rot.shape[0], _BLOCK):
        out_rot[i:i + _BLOCK], out_pos[i:i + _BLOCK] = _forward_levels(
            rot[i:i + _BLOCK], pos[i:i + _BLOCK], levels, parent_pos, inverse)
    return out_rot.reshape(lead + (joints, 4)), out_pos.reshape(lead + (joints, 3))


def _forward_levels(local_rot, local_pos, levels, parent_pos, inverse):
    rots = [_index(local_rot, levels[0])]
    poss = [_index(local_pos, levels[0])]
    for lv, pp in zip(levels[1:], parent_pos[1:]):
        prot = _index(rots[-1], pp)
        ppos = _index(poss[-1], pp)
        poss.append(ppos + quat.rotate(prot, _index(local_pos, lv)))
        rots.append(quat.mul(prot, _index(local_rot, lv)))
    if len(levels) == 1:
        return _index(rots[0], inverse), _index(poss[0], inverse)
    return _index(cat(rots, axis=-2), inverse), _index(cat(poss, axis=-2), inverse)


def inverse(global_rot: Array, global_pos: Array, parents) -> tuple[Array, Array]:
    """Local rotations and positions from world ones (the inverse of :func:`forward`).

    Args:
        global_rot: (..., J, 4) world rotations (w, x, y, z).
        global_pos: (..., J, 3) world positions, metres.
        parents: (J,) parent indices, -1 for roots.
    Returns:
        (local_rot (..., J, 4), local_pos (..., J, 3)).
    """
    parents = np.asarray(parents, dtype=np.int64)
    is_root = parents < 0
    safe = np.where(is_root, 0, parents)
    prot = _index(global_rot, safe)
    ppos = _index(global_pos, safe)
    local_rot = quat.mul(quat.inv(prot), global_rot)
    local_pos = quat.inv_rotate(prot, global_pos - ppos)
    if is_root.any():
        if is_torch(global_rot):
            import torch
            mask = torch.as_tensor(is_root, device=global_rot.device)[:, None]
        else:
            mask = is_root[:, None]
        local_rot = where(mask, global_rot, local_rot)
        local_pos = where(mask, global_pos, local_pos)
    return local_rot, local_pos



def positions_from_rotations(global_rot: Array, given_pos: Array, parents, offsets: Array,
                             anchors=()) -> Array:
    """World positions of a skeleton whose world rotations are known: each joint sits at
    its parent plus the parent's rotation of its rest offset, so every bone keeps its rest
    length whatever the rotations (a pose predicted as rotations cannot stretch a bone).

    Args:
        global_rot: (..., J, 4) world (or character-space) rotations (w, x, y, z).
        given_pos: (..., J, 3) positions; those of the roots (parent -1) and of
            ``anchors`` are kept, the others are ignored.
        parents: (J,) parent indices, -1 for roots, each parent before its child.
        offsets: (J, 3) rest offsets from the parent, metres.
        anchors: joints that translate (e.g. the hips below a static BVH root): their
            position is taken from ``given_pos`` too.
    Returns:
        (..., J, 3) positions; torch in -> torch out (differentiable).
    """
    key = tuple(int(p) for p in parents)
    if _compiled_fits(global_rot, given_pos, key):
        return _positions_compiled(global_rot, given_pos, key, offsets, anchors)
    levels, parent_pos, inverse = _levels(key)
    if is_torch(global_rot):
        import torch
        if not torch.is_tensor(offsets):   # a copy: a read-only array (a database's) cannot be shared
            offsets = torch.tensor(np.asarray(offsets), dtype=global_rot.dtype, device=global_rot.device)
        offsets = offsets.to(global_rot.dtype).to(global_rot.device)
    else:
        offsets = np.asarray(offsets, np.result_type(global_rot.dtype, np.float32))
    anchored = np.zeros(len(parents), bool)
    anchored[list(anchors)] = True
    poss = [_index(given_pos, levels[0])]
    for lv, pp in zip(levels[1:], parent_pos[1:]):
        parent = np.asarray(parents)[lv]
        pos = _index(poss[-1], pp) + quat.rotate(_index(global_rot, parent), _index(offsets, lv))
        if anchored[lv].any():
            mask = anchored[lv][:, None]
            if is_torch(pos):
                mask = torch.as_tensor(mask, device=pos.device)
            pos = where(mask, _index(given_pos, lv), pos)
        poss.append(pos)
    if len(levels) == 1:
        return _index(poss[0], inverse)
    return _index(cat(poss, axis=-2), inverse)


def _positions_compiled(global_rot: np.ndarray, given_pos: np.ndarray, parents: tuple[int, ...], offsets,
                        anchors) -> np.ndarray:
    """:func:`positions_from_rotations` through the compiled kernel (same results)."""
    from kinema.motion import kinematics_kernels
    joints = len(parents)
    offsets = np.ascontiguousarray(np.asarray(offsets, global_rot.dtype).reshape(joints, 3))
    anchored = np.zeros(joints, bool)
    anchored[list(anchors)] = True
    out = np.empty(given_pos.shape, given_pos.dtype)
    kinematics_kernels.positions(np.ascontiguousarray(global_rot).reshape(-1, joints, 4),
                                 np.ascontiguousarray(given_pos).reshape(-1, joints, 3),
                                 _parents_array(parents), offsets, anchored, out.reshape(-1, joints, 3))
    return out


def positions_with_lengths(positions: np.ndarray, parents, lengths: np.ndarray, anchors=(),
                           placed: np.ndarray | None = None) -> np.ndarray:
    """Positions whose bones point where the given ones do and have the given lengths: each
    joint sits at its (corrected) parent plus ``lengths[j]`` along the direction from the
    given parent to the given joint. Unlike :func:`positions_from_rotations` it reads no
    rotations, so it holds for poses whose rotations are no skeleton's (an inertialized
    blend between a clip and a mirrored clip, whose rest offsets differ).

    Args:
        positions: (..., J, 3) positions (NumPy).
        parents: (J,) parent indices, -1 for roots, each parent before its child.
        lengths: (..., J) bone lengths, metres (any value for roots and anchors; broadcast).
        anchors: joints kept where ``placed`` puts them (e.g. the hips below a static root).
        placed: (..., J, 3) where the roots and the anchors go (None: ``positions``); the
            other joints hang from them along the directions of ``positions``.
    Returns:
        (..., J, 3) float64 positions.
    """
    given = np.asarray(positions, np.float64)
    lengths = np.asarray(lengths, np.float64)
    out = given.copy() if placed is None else np.array(placed, np.float64)
    keep = {int(a) for a in anchors}
    for j, p in enumerate(parents):   # parents come first: a level loop would not save much on ~25 joints
        if p < 0 or j in keep:
            continue
        bone = given[..., j, :] - given[..., p, :]
        norm = np.linalg.norm(bone, axis=-1, keepdims=True)
        out[..., j, :] = out[..., p, :] + bone * (lengths[..., j, None] / np.maximum(norm, 1e-12))
    return out
