"""Fixtures for rendering tests: one offscreen renderer per session (raylib has one context)."""
from __future__ import annotations

import pytest

from kinema.data import shared_path


@pytest.fixture(scope="session")
def renderer():
    """An open headless :class:`kinema.render.Renderer` (480x320), effects reset per test.

    Skips (saying why) only when no OpenGL 3.3 context can be made: neither a display
    (real or Xvfb) nor OSMesa."""
    from kinema.render import Renderer
    from kinema.render.gl import RenderError
    r = Renderer(show_fps=False)
    try:
        r.open(480, 320, "kinema tests", headless=True)
    except RenderError as exc:
        pytest.skip(f"no OpenGL context for rendering tests: {exc}")
    yield r
    r.close()


@pytest.fixture
def fresh(renderer):
    """The session renderer with default effects, a fixed camera and no recording."""
    from kinema.render import Effects
    from kinema.render.camera import CameraRig
    renderer.effects.__dict__.update(Effects().__dict__)
    renderer.camera = CameraRig(halflife=0.0)   # no mode, focus, distance or fov left by another test
    renderer.camera.set_fixed([1.6, 1.3, 3.6], [0.0, 0.9, 0.0])
    renderer.camera.snap()
    renderer.show_fps = False
    renderer.stop_recording()
    renderer.gl_errors()
    yield renderer
    renderer.stop_recording()


@pytest.fixture(scope="session")
def geno(shared_data):
    import kinema
    path = shared_path("characters", "geno", "geno.glb")
    if path is None:
        pytest.skip("geno.glb not in the shared data folder")
    return kinema.load_character(path)


@pytest.fixture(scope="session")
def lafan_walk(shared_data):
    import kinema
    return kinema.load(shared_data / "lafan1" / "push1_subject2.bvh")
