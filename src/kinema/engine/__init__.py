"""The engine: entities with components in a scene, and an App that runs the update loop.

``App(scene, program, mode="standalone"|"headless"|"manual"|"auto")`` drives a
:class:`Scene` with a fixed time step; the renderer plugs in through
:class:`~kinema.engine.protocols.RendererBackend`, so this package never imports raylib.
"""
from kinema.engine.component import Component
from kinema.engine.entity import Entity
from kinema.engine.protocols import InputFrame, RendererBackend
from kinema.engine.scene import Scene
from kinema.engine.transforms import TransformStore

__all__ = ["Component", "Entity", "InputFrame", "RendererBackend", "Scene", "TransformStore"]
