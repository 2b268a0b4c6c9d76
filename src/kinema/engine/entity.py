"""Entities: a named node in a scene's hierarchy with a transform, tags and components.

An entity's transform lives in its scene's :class:`~kinema.engine.transforms.TransformStore`
(slot ``entity.slot``); the properties here read and write it. Local values are relative
to the parent; world values go through the hierarchy. Getters return copies.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from kinema.engine.component import DESTROYED, Component
from kinema.errors import KinemaError
from kinema.maths import quat

if TYPE_CHECKING:
    from kinema.engine.scene import Scene

C = TypeVar("C", bound=Component)


def _mul_unit(a: Iterable[float], b: Iterable[float]) -> tuple[float, float, float, float]:
    """Normalised Hamilton product of two (w, x, y, z) quaternions given as Python floats
    (one entity's rotation: scalar maths beats array dispatch by ~10x here)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    w = aw * bw - ax * bx - ay * by - az * bz
    x = aw * bx + ax * bw + ay * bz - az * by
    y = aw * by - ax * bz + ay * bw + az * bx
    z = aw * bz + ax * by - ay * bx + az * bw
    n = math.sqrt(w * w + x * x + y * y + z * z)
    return w / n, x / n, y / n, z / n


class Entity:
    """A node of a :class:`~kinema.engine.Scene`; create with ``scene.create_entity(...)``.

    Attributes:
        name: not necessarily unique (``scene.find`` returns the first).
        scene: the owning scene.
        slot: row in ``scene.transforms``.
        parent: the parent entity or None.
        children: child entities in the order they were attached (a new list per access).
        components: attached components in the order added.
    """

    __slots__ = ("name", "scene", "slot", "parent", "_children", "components", "_tags", "alive", "__weakref__")

    def __init__(self, scene: Scene, name: str, slot: int, parent: Entity | None) -> None:
        self.name = name
        self.scene = scene
        self.slot = slot
        self.parent = parent
        self._children: dict[Entity, None] = {}  # ordered, O(1) removal
        self.components: list[Component] = []
        self._tags: set[str] = set()
        self.alive = True

    def __repr__(self) -> str:
        return f"Entity({self.name!r}, slot={self.slot}{'' if self.alive else ', destroyed'})"

    @property
    def children(self) -> list[Entity]:
        return list(self._children)

    # ------------------------------------------------------------ components
    def add(self, component: C | type[C], *args, **kwargs) -> C:
        """Attach ``component`` (an instance, or a class constructed with ``*args, **kwargs``).

        Returns the component. Its ``on_add`` runs now, ``on_start`` before its first update.
        """
        if isinstance(component, type):
            component = component(*args, **kwargs)
        elif args or kwargs:
            raise KinemaError("entity.add: arguments are only accepted with a component class")
        if not isinstance(component, Component):
            raise KinemaError(f"entity.add: {type(component).__name__} is not a kinema.engine.Component")
        if component.entity is not None:
            raise KinemaError(f"entity.add: {type(component).__name__} is already attached to {component.entity!r}")
        if not self.alive:
            raise KinemaError(f"entity.add: {self!r} has been destroyed")
        component.entity = self
        self.components.append(component)
        self.scene._register(component)
        component.on_add()
        return component

    def get(self, kind: type[C]) -> C | None:
        """The first component that is an instance of ``kind``, or None."""
        for c in self.components:
            if isinstance(c, kind):
                return c
        return None

    def get_all(self, kind: type[C]) -> list[C]:
        """Every attached component that is an instance of ``kind``."""
        return [c for c in self.components if isinstance(c, kind)]

    def require(self, kind: type[C]) -> C:
        """Like :meth:`get` but raises :class:`KinemaError` when absent."""
        c = self.get(kind)
        if c is None:
            raise KinemaError(f"{self!r} has no {kind.__name__} component")
        return c

    def remove(self, component: Component) -> None:
        """Detach one component (deferred to the end of the step during an update)."""
        if not isinstance(component, Component) or component.entity is not self or component._state == DESTROYED:
            raise KinemaError(f"{type(component).__name__} is not attached to {self!r}")
        self.scene._remove_component(component)

    # -------------------------------------------------------------- hierarchy
    def create_child(self, name: str = "entity", **kwargs) -> Entity:
        """Shortcut for ``scene.create_entity(name, parent=self, **kwargs)``."""
        return self.scene.create_entity(name, parent=self, **kwargs)

    def set_parent(self, parent: Entity | None, keep_world: bool = False) -> None:
        """Move this entity under ``parent`` (None: make it a root).

        With ``keep_world`` the local transform is changed so the world transform stays.
        """
        if parent is self.parent:
            return
        if not self.alive or (parent is not None and not parent.alive):
            raise KinemaError(f"set_parent: {self!r} or {parent!r} has been destroyed")
        if parent is not None:
            if parent.scene is not self.scene:
                raise KinemaError("set_parent: the parent belongs to another scene")
            node = parent
            while node is not None:
                if node is self:
                    raise KinemaError(f"set_parent: {parent!r} is a descendant of {self!r}")
                node = node.parent
        if keep_world:
            wp, wr, ws = self.world_position, self.world_rotation, self.world_scale
        if self.parent is not None:
            del self.parent._children[self]
        else:
            self.scene._roots.pop(self, None)
        self.parent = parent
        if parent is not None:
            parent._children[self] = None
        else:
            self.scene._roots[self] = None
        self.scene.transforms.set_parent(self.slot, -1 if parent is None else parent.slot,
                                         [e.slot for e in self.descendants()])
        if keep_world:
            self.world_scale = ws
            self.world_rotation = wr
            self.world_position = wp

    def descendants(self) -> Iterator[Entity]:
        """Every entity below this one, depth first (pre-order)."""
        stack = list(reversed(self._children))
        while stack:
            e = stack.pop()
            yield e
            stack.extend(reversed(e._children))

    def destroy(self) -> None:
        """Remove this entity, its descendants and their components from the scene.

        Safe to call from any callback: during an update the removal is deferred to the end
        of the step (the entities stop receiving callbacks at once).
        """
        self.scene.destroy(self)

    # ------------------------------------------------------------------- tags
    @property
    def tags(self) -> frozenset[str]:
        return frozenset(self._tags)

    def add_tag(self, *tags: str) -> None:
        for t in tags:
            if t not in self._tags:
                self._tags.add(t)
                self.scene._tag_index.setdefault(t, {})[self] = None

    def remove_tag(self, tag: str) -> None:
        if tag in self._tags:
            self._tags.discard(tag)
            self.scene._tag_index[tag].pop(self, None)

    def has_tag(self, tag: str) -> bool:
        return tag in self._tags

    # -------------------------------------------------------------- transform
    @property
    def position(self) -> np.ndarray:
        """(3,) local position in metres (parent space)."""
        return self.scene.transforms.local_pos[self.slot].copy()

    @position.setter
    def position(self, value: Iterable[float]) -> None:
        self.scene.transforms.set_local(self.slot, position=value)

    @property
    def rotation(self) -> np.ndarray:
        """(4,) local rotation, unit quaternion (w, x, y, z)."""
        return self.scene.transforms.local_rot[self.slot].copy()

    @rotation.setter
    def rotation(self, value: Iterable[float]) -> None:
        self.scene.transforms.set_local(self.slot, rotation=value)

    @property
    def scale(self) -> np.ndarray:
        """(3,) local per-axis scale."""
        return self.scene.transforms.local_scale[self.slot].copy()

    @scale.setter
    def scale(self, value: float | Iterable[float]) -> None:
        self.scene.transforms.set_local(self.slot, scale=value)

    def translate(self, delta: Iterable[float]) -> None:
        """Move by ``delta`` (3,) metres in parent space."""
        t = self.scene.transforms
        t.set_local(self.slot, position=t.local_pos[self.slot] + np.asarray(delta, np.float32))

    def rotate(self, q: Iterable[float]) -> None:
        """Apply rotation ``q`` (4,) in the entity's own frame: ``rotation = rotation * q``
        (renormalised, so repeated small rotations do not drift)."""
        t, slot = self.scene.transforms, self.slot
        t.local_rot[slot] = _mul_unit(t.local_rot[slot].tolist(), q)
        t.mark_dirty(slot)

    @property
    def world_position(self) -> np.ndarray:
        """(3,) position in world space (metres)."""
        t = self.scene.transforms
        t.update_world()
        return t.world_pos[self.slot].copy()

    @world_position.setter
    def world_position(self, value: Iterable[float]) -> None:
        value = np.asarray(value, np.float32)
        if self.parent is None:
            self.position = value
            return
        t = self.scene.transforms
        t.update_world()
        p = self.parent.slot
        local = quat.inv_rotate(t.world_rot[p], value - t.world_pos[p]) / t.world_scale[p]
        t.set_local(self.slot, position=local)

    @property
    def world_rotation(self) -> np.ndarray:
        """(4,) rotation in world space, unit quaternion (w, x, y, z)."""
        t = self.scene.transforms
        t.update_world()
        return t.world_rot[self.slot].copy()

    @world_rotation.setter
    def world_rotation(self, value: Iterable[float]) -> None:
        value = np.asarray(value, np.float32)
        if self.parent is None:
            self.rotation = value
            return
        t = self.scene.transforms
        t.update_world()
        t.set_local(self.slot, rotation=quat.mul(quat.inv(t.world_rot[self.parent.slot]), value))

    @property
    def world_scale(self) -> np.ndarray:
        """(3,) per-axis scale in world space."""
        t = self.scene.transforms
        t.update_world()
        return t.world_scale[self.slot].copy()

    @world_scale.setter
    def world_scale(self, value: float | Iterable[float]) -> None:
        value = np.broadcast_to(np.asarray(value, np.float32), (3,))
        if self.parent is None:
            self.scale = value
            return
        t = self.scene.transforms
        t.update_world()
        t.set_local(self.slot, scale=value / t.world_scale[self.parent.slot])

    @property
    def world_matrix(self) -> np.ndarray:
        """(4, 4) float32 world matrix ``T @ R @ S`` (column vectors)."""
        t = self.scene.transforms
        t.update_world()
        m = np.eye(4, dtype=np.float32)
        m[:3, :3] = quat.to_matrix(t.world_rot[self.slot]) * t.world_scale[self.slot][None, :]
        m[:3, 3] = t.world_pos[self.slot]
        return m
