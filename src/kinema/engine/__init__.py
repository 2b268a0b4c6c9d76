"""The engine: entities with components in a scene, and an App that runs the update loop.

``App(scene, program, mode="standalone"|"headless"|"manual"|"auto")`` drives a
:class:`Scene` with a fixed time step; the renderer plugs in through
:class:`~kinema.engine.protocols.RendererBackend`, so this package never imports raylib.
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
