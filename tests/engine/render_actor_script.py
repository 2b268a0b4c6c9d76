"""Run by test_actor.py in a subprocess (raylib keeps one GL context per process): an Actor
playing a real BVH clip in a headless App, drawn by kinema.render; prints JSON with the
projected joints and two captures (with and without the actor)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

import kinema.io
from kinema.data import sample_path
from kinema.engine import App, Scene
from kinema.engine.actor import Actor
from kinema.render import Renderer


def main(out: Path) -> None:
    walk = kinema.io.load(sample_path("games105", "walk60.bvh"), scale=1.0)  # this file is in metres
    scene = Scene()
    actor = scene.create_entity("walker").add(Actor(motion=walk))
    r = Renderer(show_fps=False)
    r.open(480, 320, "engine actor test", headless=True)  # opened by the caller: the App must not close it
    root = walk.global_positions()[30, 0]
    r.camera.halflife = 0.0
    r.camera.set_fixed(root + np.array([2.5, 0.6, 3.5]), root)
    r.camera.snap()
    app = App(scene, mode="headless", renderer=r, render_every=30, capture_dir=out)
    stats = app.run(frames=30)
    pixels, _, visible = r.project(actor.global_positions())
    actor.enabled = False
    app.capture_dir = out / "empty"
    app.render()
    print(json.dumps({"captures": [str(p) for p in stats.captures], "empty": str(out / "empty" / "frame_000030.png"),
                      "pixels": np.asarray(pixels).tolist(), "visible": np.asarray(visible).tolist(),
                      "still_open": r.is_open(), "frame": actor.frame}))
    r.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
