"""The engine: entities with components in a scene, and an App that runs the update loop.

``App(scene, program, mode="standalone"|"headless"|"manual"|"auto")`` drives a
:class:`Scene` with a fixed time step; the renderer plugs in through
:class:`~kinema.engine.protocols.RendererBackend`, so this package never imports raylib.

Example::

    from kinema.engine import App, Component, Scene, ScriptedInput, stick

    class Walk(Component):
        def update(self, dt):
            x, y = stick(self.app.input)            # WASD / arrows / left stick
            self.entity.translate((2 * x * dt, 0, 2 * y * dt))

    scene = Scene()
    scene.create_entity("player").add(Walk())
    App(scene, mode="headless", input=ScriptedInput.load("walk.json")).run(frames=600)

Many entities at once: ``slots = scene.slots(entities)`` then
``scene.transforms.set_local(slots, position=..., rotation=...)`` (one array write; the
world transforms update in one batched pass per hierarchy depth).
"""
from kinema.engine.actor import Actor
from kinema.engine.app import App, RunStats
from kinema.engine.component import Component
from kinema.engine.entity import Entity
from kinema.engine.input import InputRecorder, ScriptedInput, dead_zone, stick
from kinema.engine.profiler import Profiler
from kinema.engine.protocols import InputFrame, RendererBackend
from kinema.engine.scene import Scene
from kinema.engine.time import Time
from kinema.engine.transforms import TransformStore

__all__ = ["Actor", "App", "Component", "Entity", "InputFrame", "InputRecorder", "Profiler", "RendererBackend",
           "RunStats", "Scene", "ScriptedInput", "Time", "TransformStore", "dead_zone", "stick"]
