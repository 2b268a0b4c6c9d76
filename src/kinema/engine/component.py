"""The base class of behaviour attached to entities.

A component overrides any of the lifecycle hooks below; the scene calls only the hooks a
class overrides, so empty hooks cost nothing. Per fixed step the order is: ``on_start``
of components added since the last step, then every ``update(dt)``, then every
``late_update(dt)``. Per rendered frame: ``draw(renderer)`` then ``gui(ui)``.
``on_destroy`` runs when the component's entity is removed (deferred to the end of the
step when destroyed during an update).

Within a phase, components run grouped by class: classes by ``order`` (lower first; ties
by the order they first appeared in the scene), components of a class in the order they
were added. That makes runs deterministic and lets the profiler time each class at once.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from kinema.engine.entity import Entity
    from kinema.engine.scene import Scene

# lifecycle states
ADDED, STARTED, STOPPING, DESTROYED = 0, 1, 2, 3  # STOPPING: removal requested, pending


class Component:
    """Behaviour and data attached to one :class:`~kinema.engine.Entity`.

    Subclasses may define their own ``__init__`` (no need to call ``super().__init__``);
    ``entity`` is set when the component is added with ``entity.add(component)``.

    Attributes:
        order: class-level execution order within each phase (lower runs first).
        entity: the entity this component is attached to.
        enabled: when False, update/late_update/draw/gui are skipped.
    """

    order: ClassVar[int] = 0
    entity: Entity | None = None
    enabled: bool = True
    _state: int = ADDED

    @property
    def scene(self) -> Scene:
        """The scene of this component's entity."""
        return self.entity.scene

    @property
    def app(self) -> Any:
        """The App running this component's scene (None when the scene is driven directly);
        ``self.app.input`` is the current :class:`~kinema.engine.protocols.InputFrame`."""
        return self.entity.scene.app

    @property
    def started(self) -> bool:
        return self._state == STARTED

    # lifecycle hooks (override what you need)
    def on_add(self) -> None:
        """Called right after the component is attached (``self.entity`` is set)."""

    def on_start(self) -> None:
        """Called once, before the component's first update."""

    def update(self, dt: float) -> None:
        """Called every fixed step; ``dt`` is the scaled step in seconds."""

    def late_update(self, dt: float) -> None:
        """Called every fixed step after every component's ``update``."""

    def draw(self, renderer: Any) -> None:
        """Draw with the renderer's debug-draw methods (check they exist with ``getattr``)."""

    def gui(self, ui: Any) -> None:
        """Immediate-mode GUI for this component."""

    def on_destroy(self) -> None:
        """Called when the entity (or the component) is removed from the scene."""


HOOKS = ("update", "late_update", "draw", "gui")


def overrides(cls: type, hook: str) -> bool:
    """True when ``cls`` overrides ``Component.<hook>``."""
    return getattr(cls, hook) is not getattr(Component, hook)
