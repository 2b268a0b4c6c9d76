"""The engine's App drives kinema.render.Renderer: an Actor with a skinned character and one
with a procedural body render where their joints are."""
from __future__ import annotations

import numpy as np
import pytest
from render_util import neighbourhood, render


def test_app_renders_actors_through_the_renderer(fresh, geno, lafan_walk, tmp_path):
    pytest.importorskip("kinema.engine.app")
    from kinema.engine.actor import Actor
    from kinema.engine.app import App

    app = App(mode="manual", renderer=fresh, capture_dir=tmp_path, width=480, height=320)
    hips = lafan_walk.global_positions()[400, 0]
    skinned = app.scene.create_entity("geno", position=[hips[0] + 1.3, 0.0, hips[2]])
    skinned.add(Actor(character=geno))
    body = app.scene.create_entity("walker")
    body.add(Actor(motion=lafan_walk[400:420], time=0.0))
    app.start()
    app.step_frames(3)
    fresh.camera.set_fixed([hips[0] + 0.6, 1.6, hips[2] + 5.0], [hips[0] + 0.6, 0.9, hips[2]])
    fresh.camera.snap()
    img = app.render()
    assert img is not None and img.shape == (320, 480, 3)
    assert fresh.gl_errors() == []
    assert len(list(tmp_path.glob("frame_*.png"))) == 1
    empty = render(fresh, lambda r: None)        # same camera, no actors
    for actor in (skinned.get(Actor), body.get(Actor)):
        px, _, vis = fresh.project(actor.global_positions())
        assert vis.all()
        diff = np.abs(neighbourhood(img, px, 1).astype(int) - neighbourhood(empty, px, 1).astype(int)).max(-1)
        assert (diff > 12).any(axis=1).mean() > 0.9            # the actor covers its joints
        far, _, _ = fresh.project(actor.global_positions() + [0, 0, -30.0])
        far_diff = np.abs(neighbourhood(img, far, 0).astype(int) - neighbourhood(empty, far, 0).astype(int))
        assert far_diff.max() < 10                              # background elsewhere unchanged
