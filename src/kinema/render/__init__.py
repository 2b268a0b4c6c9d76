"""kinema's renderer on raylib: window or offscreen, GPU-skinned characters, procedural
bodies, shadows, SSAO, bloom, FXAA, cameras, batched debug drawing, GUI, recording.

The only layer that imports raylib. Needs an OpenGL 3.3 context: a display, or Xvfb with
Mesa (``xvfb-run``) for headless rendering.
"""
from kinema.render.camera import Camera, CameraRig, look_at, perspective, project
from kinema.render.debug import DebugDraw
from kinema.render.pipeline import Effects
from kinema.render.recorder import Recorder
from kinema.render.renderer import Renderer, display_available

__all__ = ["Renderer", "Effects", "Camera", "CameraRig", "DebugDraw", "Recorder",
           "look_at", "perspective", "project", "display_available"]
