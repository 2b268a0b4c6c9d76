"""Local and world transforms of a scene's entities, stored as contiguous arrays.

Every entity owns one *slot* in a :class:`TransformStore`: rows of structure-of-arrays
buffers for its local position ``(3,)``, rotation ``(4,)`` (unit quaternion, w, x, y, z)
and scale ``(3,)``, and the matching world transform. Buffers grow by doubling and freed
slots are reused, so adding N entities costs O(N) in total.

World transforms are computed lazily and in batches: writing a local transform marks the
slot dirty; the next world read recomputes the dirty slots and their descendants one
hierarchy depth at a time, vectorised over all slots at that depth. The composition is
the usual non-shearing TRS rule (scale is kept per axis and does not skew children)::

    world_scale[j] = world_scale[p] * local_scale[j]
    world_rot[j]   = world_rot[p] * local_rot[j]
    world_pos[j]   = world_pos[p] + rotate(world_rot[p], world_scale[p] * local_pos[j])
"""
from __future__ import annotations

import numpy as np

from kinema.maths import quat

_GROW = 2


class TransformStore:
    """Structure-of-arrays storage for the transforms of one scene (float32).

    Attributes:
        local_pos, world_pos: (C, 3) metres.
        local_rot, world_rot: (C, 4) unit quaternions (w, x, y, z).
        local_scale, world_scale: (C, 3).
        parent: (C,) int slot of the parent, -1 for a root.
        depth: (C,) int, 0 for roots.
        alive: (C,) bool.

    ``C`` is the capacity; only slots with ``alive`` hold entities. Write local transforms
    through :meth:`set_local` (or the entity properties) so the dirty flags stay right.
    """

    def __init__(self, capacity: int = 64) -> None:
        capacity = max(1, int(capacity))
        self.local_pos = np.zeros((capacity, 3), np.float32)
        self.local_rot = np.zeros((capacity, 4), np.float32)
        self.local_scale = np.ones((capacity, 3), np.float32)
        self.world_pos = np.zeros((capacity, 3), np.float32)
        self.world_rot = np.zeros((capacity, 4), np.float32)
        self.world_scale = np.ones((capacity, 3), np.float32)
        self.local_rot[:, 0] = 1
        self.world_rot[:, 0] = 1
        self.parent = np.full(capacity, -1, np.int64)
        self.depth = np.zeros(capacity, np.int64)
        self.alive = np.zeros(capacity, bool)
        self.dirty = np.zeros(capacity, bool)
        self._any_dirty = False
        self._size = 0  # slots ever handed out (high-water mark)
        self._free: list[int] = []
        self._levels: list[dict[int, None]] = []  # depth -> slots (insertion ordered)
        self._level_arrays: list[np.ndarray | None] = []

    # ----------------------------------------------------------------- slots
    @property
    def capacity(self) -> int:
        return int(self.alive.shape[0])

    @property
    def count(self) -> int:
        """Number of live slots."""
        return self._size - len(self._free)

    def allocate(self, parent: int = -1) -> int:
        """A fresh slot with the identity local transform under ``parent`` (-1: root)."""
        if self._free:  # a reused slot: reset it (fresh slots are initialised by _grow)
            slot = self._free.pop()
            self.local_pos[slot] = 0
            self.local_rot[slot] = (1, 0, 0, 0)
            self.local_scale[slot] = 1
        else:
            if self._size == self.capacity:
                self._grow(self.capacity * _GROW)
            slot = self._size
            self._size += 1
        self.alive[slot] = True
        self.parent[slot] = parent
        self.depth[slot] = 0 if parent < 0 else self.depth[parent] + 1
        self._level_add(slot)
        self.mark_dirty(slot)
        return slot

    def release(self, slot: int) -> None:
        """Free ``slot`` (its children must have been released or re-parented first)."""
        self._level_remove(slot)
        self.alive[slot] = False
        self.dirty[slot] = False
        self.parent[slot] = -1
        self._free.append(slot)

    def set_parent(self, slot: int, parent: int, subtree: list[int]) -> None:
        """Re-parent ``slot``; ``subtree`` lists its descendants (their depths change too)."""
        self.parent[slot] = parent
        base = 0 if parent < 0 else int(self.depth[parent]) + 1
        shift = base - int(self.depth[slot])
        for s in [slot, *subtree]:
            if shift:
                self._level_remove(s)
                self.depth[s] += shift
                self._level_add(s)
        self.mark_dirty(slot)

    def _grow(self, capacity: int) -> None:
        n = self.capacity
        for name in ("local_pos", "local_rot", "local_scale", "world_pos", "world_rot",
                     "world_scale", "parent", "depth", "alive", "dirty"):
            old = getattr(self, name)
            new = np.empty((capacity,) + old.shape[1:], old.dtype)
            new[:n] = old
            setattr(self, name, new)
        self.local_scale[n:] = 1
        self.world_scale[n:] = 1
        self.local_pos[n:] = 0
        self.world_pos[n:] = 0
        self.local_rot[n:] = (1, 0, 0, 0)
        self.world_rot[n:] = (1, 0, 0, 0)
        self.parent[n:] = -1
        self.depth[n:] = 0
        self.alive[n:] = False
        self.dirty[n:] = False

    def _level_add(self, slot: int) -> None:
        d = int(self.depth[slot])
        while len(self._levels) <= d:
            self._levels.append({})
            self._level_arrays.append(None)
        self._levels[d][slot] = None
        self._level_arrays[d] = None

    def _level_remove(self, slot: int) -> None:
        d = int(self.depth[slot])
        del self._levels[d][slot]
        self._level_arrays[d] = None

    def _level(self, d: int) -> np.ndarray:
        arr = self._level_arrays[d]
        if arr is None:
            arr = np.fromiter(self._levels[d], np.int64, len(self._levels[d]))
            self._level_arrays[d] = arr
        return arr

    # ---------------------------------------------------------------- writes
    def mark_dirty(self, slots: int | np.ndarray) -> None:
        """Flag ``slots`` so their (and their descendants') world transforms are recomputed."""
        self.dirty[slots] = True
        self._any_dirty = True

    def set_local(self, slots: int | np.ndarray, position: np.ndarray | None = None,
                  rotation: np.ndarray | None = None, scale: np.ndarray | None = None) -> None:
        """Write local transforms of one slot or an index array of slots.

        Args:
            slots: an int or (N,) int array.
            position: (3,) or (N, 3) metres, parent space.
            rotation: (4,) or (N, 4) unit quaternions (w, x, y, z), parent space.
            scale: (3,) or (N, 3) per-axis scale (a scalar broadcasts).
        """
        if position is not None:
            self.local_pos[slots] = position
        if rotation is not None:
            self.local_rot[slots] = rotation
        if scale is not None:
            self.local_scale[slots] = scale
        self.dirty[slots] = True
        self._any_dirty = True

    # ----------------------------------------------------------------- reads
    def update_world(self) -> None:
        """Recompute world transforms of dirty slots and their descendants (no-op when clean)."""
        if not self._any_dirty:
            return
        changed = self.dirty.copy()
        for d in range(len(self._levels)):
            if not self._levels[d]:
                continue
            idx = self._level(d)
            if d == 0:
                sel = idx[changed[idx]]
                self.world_pos[sel] = self.local_pos[sel]
                self.world_rot[sel] = self.local_rot[sel]
                self.world_scale[sel] = self.local_scale[sel]
                continue
            par = self.parent[idx]
            mask = changed[idx] | changed[par]
            if not mask.any():
                continue
            sel, par = idx[mask], par[mask]
            changed[sel] = True
            prot = self.world_rot[par]
            pscale = self.world_scale[par]
            self.world_scale[sel] = pscale * self.local_scale[sel]
            self.world_rot[sel] = quat.mul(prot, self.local_rot[sel])
            self.world_pos[sel] = self.world_pos[par] + quat.rotate(prot, pscale * self.local_pos[sel])
        self.dirty[:] = False
        self._any_dirty = False
