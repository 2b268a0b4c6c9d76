"""A scene: the entities of one world, their components, and one simulation step.

Everything lives on the instance (no module state), so any number of scenes can exist in
one process. ``scene.update(dt)`` runs one fixed step; an :class:`~kinema.engine.App`
calls it, but tests and tools can drive a scene directly.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, TypeVar

import numpy as np

from kinema.engine.component import ADDED, DESTROYED, HOOKS, STARTED, STOPPING, Component, overrides
from kinema.engine.entity import Entity
from kinema.engine.transforms import TransformStore
from kinema.errors import KinemaError

C = TypeVar("C", bound=Component)


class PhaseTimer(Protocol):
    """What the scene reports timings to (see :class:`kinema.engine.profiler.Profiler`)."""

    def add(self, name: str, phase: str, seconds: float) -> None: ...


def _mark_leaving(component: Component) -> None:
    """A started component stops (its on_stop runs at the flush); one never started is dropped."""
    if component._state == STARTED:
        component._state = STOPPING
    elif component._state == ADDED:
        component._state = DESTROYED


class Scene:
    """Entities in a hierarchy with components; queries by name, tag and component type.

    Args:
        name: label for messages and the profiler.
        capacity: initial transform capacity (grows by doubling).
    """

    def __init__(self, name: str = "scene", capacity: int = 64) -> None:
        self.name = name
        self.app: Any = None  # the App running this scene (set by the App), for components
        self.transforms = TransformStore(capacity)
        self._entities: dict[Entity, None] = {}
        self._roots: dict[Entity, None] = {}
        self._names: dict[str, dict[Entity, None]] = {}
        self._tag_index: dict[str, dict[Entity, None]] = {}
        self._by_type: dict[type, dict[Component, None]] = {}
        self._type_rank: dict[type, int] = {}
        self._phases: dict[str, list[tuple[type, list[tuple[Component, Any]]]]] | None = None
        self._to_start: list[Component] = []
        self._busy = 0  # > 0 while callbacks run: removals are deferred
        self._pending_entities: list[Entity] = []
        self._pending_components: list[Component] = []

    def __repr__(self) -> str:
        return f"Scene({self.name!r}, {len(self._entities)} entities)"

    def __len__(self) -> int:
        return len(self._entities)

    def __iter__(self) -> Iterator[Entity]:
        return iter(list(self._entities))

    # -------------------------------------------------------------- entities
    def create_entity(self, name: str = "entity", parent: Entity | None = None,
                      position: Iterable[float] | None = None, rotation: Iterable[float] | None = None,
                      scale: float | Iterable[float] | None = None, tags: Iterable[str] = ()) -> Entity:
        """Add an entity (amortised O(1)).

        Args:
            name: entity name.
            parent: parent entity of this scene, or None for a root.
            position: (3,) local position, metres. rotation: (4,) local quaternion (w, x, y, z).
            scale: (3,) or scalar local scale.
            tags: initial tags.
        """
        if parent is not None and (parent.scene is not self or not parent.alive):
            raise KinemaError(f"create_entity({name!r}): parent {parent!r} is not a live entity of {self!r}")
        slot = self.transforms.allocate(-1 if parent is None else parent.slot)
        e = Entity(self, name, slot, parent)
        self._entities[e] = None
        if parent is None:
            self._roots[e] = None
        else:
            parent._children[e] = None
        self._names.setdefault(name, {})[e] = None
        if position is not None or rotation is not None or scale is not None:
            self.transforms.set_local(slot, position, rotation, scale)
        if tags:
            e.add_tag(*tags)
        return e

    @property
    def entities(self) -> list[Entity]:
        """Every live entity in creation order."""
        return list(self._entities)

    @property
    def roots(self) -> list[Entity]:
        """Entities without a parent."""
        return list(self._roots)

    def find(self, name: str) -> Entity | None:
        """The first live entity called ``name`` (creation order), or None."""
        for e in self._names.get(name, ()):
            if e.alive:
                return e
        return None

    def find_all(self, name: str) -> list[Entity]:
        return [e for e in self._names.get(name, ()) if e.alive]

    def with_tag(self, tag: str) -> list[Entity]:
        """Live entities that carry ``tag``."""
        return [e for e in self._tag_index.get(tag, ()) if e.alive]

    def components(self, kind: type[C] = Component) -> list[C]:
        """Every live component that is an instance of ``kind`` (classes in first-seen order)."""
        out: list[C] = []
        for cls, comps in self._by_type.items():
            if issubclass(cls, kind):
                out.extend(c for c in comps if c._state in (ADDED, STARTED))
        return out

    def slots(self, entities: Iterable[Entity]) -> np.ndarray:
        """(N,) int transform slots of ``entities`` (for batched ``transforms.set_local``)."""
        return np.fromiter((e.slot for e in entities), np.int64)

    # ----------------------------------------------------------- destruction
    def destroy(self, entity: Entity) -> None:
        """Remove ``entity`` and its subtree (deferred to the end of the step inside callbacks)."""
        if entity.scene is not self:
            raise KinemaError(f"destroy: {entity!r} belongs to another scene")
        if not entity.alive:
            return
        doomed = [entity, *entity.descendants()]
        for e in doomed:
            e.alive = False
            for c in e.components:
                _mark_leaving(c)
        self._pending_entities.append(entity)
        if not self._busy:
            self.flush()

    def _remove_subtree(self, entity: Entity, doomed: list[Entity]) -> None:
        for e in reversed(doomed):  # children before parents
            for c in list(e.components):
                self._drop_component(c)
        if entity.parent is not None:
            if entity.parent in self._entities:
                del entity.parent._children[entity]
        else:
            self._roots.pop(entity, None)
        for e in reversed(doomed):
            self.transforms.release(e.slot)
            del self._entities[e]
            self._names[e.name].pop(e, None)
            for t in e._tags:
                self._tag_index[t].pop(e, None)

    def _remove_component(self, component: Component) -> None:
        if component._state == DESTROYED:
            return
        _mark_leaving(component)
        self._pending_components.append(component)
        if not self._busy:
            self.flush()

    def _drop_component(self, c: Component) -> None:
        was_started = c._state in (STARTED, STOPPING)
        c._state = DESTROYED
        if was_started:
            c.on_destroy()
        self._by_type[type(c)].pop(c, None)
        if c.entity is not None and c in c.entity.components:
            c.entity.components.remove(c)
        self._phases = None

    def flush(self) -> None:
        """Apply removals requested during callbacks (the App calls this after each step)."""
        self._busy += 1
        try:
            while self._pending_entities or self._pending_components:
                ents, self._pending_entities = self._pending_entities, []
                comps, self._pending_components = self._pending_components, []
                for e in ents:
                    if e in self._entities:
                        self._remove_subtree(e, [e, *e.descendants()])
                for c in comps:
                    self._drop_component(c)
        finally:
            self._busy -= 1

    # ------------------------------------------------------------ components
    def _register(self, c: Component) -> None:
        cls = type(c)
        if cls not in self._by_type:
            self._by_type[cls] = {}
            self._type_rank.setdefault(cls, len(self._type_rank))
        self._by_type[cls][c] = None
        c._state = ADDED
        self._to_start.append(c)
        self._phases = None

    def _phase(self, hook: str) -> list[tuple[type, list[tuple[Component, Any]]]]:
        """Per hook: (class, [(component, bound hook)]) in run order, rebuilt after changes."""
        if self._phases is None:
            ordered = sorted(self._by_type, key=lambda k: (k.order, self._type_rank[k]))
            self._phases = {h: [(k, [(c, getattr(c, h)) for c in self._by_type[k]]) for k in ordered
                                if overrides(k, h) and self._by_type[k]] for h in HOOKS}
        return self._phases[hook]

    def start(self) -> None:
        """Run ``on_start`` of every component added since the last call (in order added)."""
        self._busy += 1
        try:
            while self._to_start:
                batch, self._to_start = self._to_start, []
                for c in batch:
                    if c._state == ADDED:
                        c._state = STARTED
                        c.on_start()
        finally:
            self._busy -= 1

    def _run(self, hook: str, arg: Any, timer: PhaseTimer | None) -> None:
        self._busy += 1
        try:
            for cls, comps in self._phase(hook):
                t0 = time.perf_counter() if timer is not None else 0.0
                for c, fn in comps:
                    if c._state == STARTED and c.enabled:
                        fn(arg)
                if timer is not None:
                    timer.add(cls.__name__, hook, time.perf_counter() - t0)
        finally:
            self._busy -= 1

    def update(self, dt: float, timer: PhaseTimer | None = None) -> None:
        """One fixed step: pending ``on_start``, every ``update(dt)``, every ``late_update(dt)``,
        then the deferred removals. ``timer`` (e.g. a Profiler) receives per-class timings."""
        self.start()
        self._run("update", dt, timer)
        self._run("late_update", dt, timer)
        self.flush()

    def draw(self, renderer: Any, timer: PhaseTimer | None = None) -> None:
        """Call every started component's ``draw(renderer)``."""
        self._run("draw", renderer, timer)
        self.flush()

    def gui(self, ui: Any, timer: PhaseTimer | None = None) -> None:
        """Call every started component's ``gui(ui)``."""
        self._run("gui", ui, timer)
        self.flush()

    # -------------------------------------------------------------- snapshot
    def snapshot(self) -> dict[str, np.ndarray]:
        """The transform state of every entity (creation order) as arrays, for comparisons.

        Returns keys ``names`` (N,) str, ``local_pos``/``world_pos`` (N, 3),
        ``local_rot``/``world_rot`` (N, 4), ``local_scale``/``world_scale`` (N, 3).
        """
        t = self.transforms
        t.update_world()
        slots = self.slots(self._entities)
        out = {"names": np.array([e.name for e in self._entities], dtype=str)}
        for k in ("local_pos", "local_rot", "local_scale", "world_pos", "world_rot", "world_scale"):
            out[k] = getattr(t, k)[slots].copy()
        return out
