"""Renderer frame rate, headless, with skinned Geno characters.

Measures frames per second at 640x360 and 1280x720 with 1, 10 and 50 GPU-skinned Geno
characters, each effect alone, all effects and none. The peer, measured in the same run,
is the same pipeline with GenoView-style effect settings (SSAO at full resolution with 16
samples, bloom at half resolution, a 2048 shadow map): the ratio column is kinema's
default settings against it. CPU milliseconds per frame (all threads of the process, so
software GL's worker threads count) are less disturbed by other processes than wall time.
Before/after images of both settings are written to ``--out`` (default ``benchmarks/out/render``) with their pixel difference.

Run: ``.venv/bin/python benchmarks/run.py render``. Without a display the renderer uses
an OSMesa context (no X server); with one (a real GPU, or Xvfb) a hidden window's context.
Each measurement waits for the GPU (glFinish) after every frame; configurations are measured
in interleaved rounds and each keeps its best round, so a burst of load from other processes does not land on one configuration only.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from common import print_table

HERE = Path(__file__).resolve().parent
EFFECTS = ("shadows", "ssao", "bloom", "fxaa")
GENOVIEW_STYLE = {"ssao_scale": 1.0, "ssao_samples": 16, "bloom_scale": 0.5, "shadow_size": 2048}


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="640x360,1280x720")
    p.add_argument("--counts", default="1,10,50")
    p.add_argument("--frames", type=int, default=4, help="measured frames per configuration and round")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best one kept)")
    p.add_argument("--out", default=str(HERE / "out" / "render"))
    return p.parse_args(argv)


def _fps(renderer, draw, frames: int) -> tuple[float, float]:
    """(frames per second, CPU milliseconds per frame of the whole process, all threads)."""
    from kinema.render.gl import libgl
    finish = libgl().glFinish

    def frame():
        renderer.begin_frame()
        draw()
        renderer.end_frame()
        finish()

    frame()
    frame()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(frames):
        frame()
    return frames / (time.perf_counter() - t0), (time.process_time() - c0) / frames * 1000.0


def _set(renderer, on: set[str], **settings) -> None:
    from kinema.render import Effects
    renderer.effects.__dict__.update(Effects().__dict__)
    for k in EFFECTS:
        setattr(renderer.effects, k, k in on)
    for k, v in settings.items():
        setattr(renderer.effects, k, v)


def main(argv=None) -> int:
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    import imageio.v2 as imageio

    import kinema
    from kinema.data import sample_path, shared_path
    from kinema.render import Renderer, display_available

    geno_path = shared_path("characters", "geno", "geno.glb") or sample_path("geno", "geno.glb")
    geno = kinema.load_character(geno_path)
    from kinema.render.gl import gl_info
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    counts = [int(c) for c in args.counts.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, peer_rows = [], []
    for w, h in sizes:
        r = Renderer(show_fps=False)
        r.open(w, h, "kinema bench", headless=True)
        print(f"  context: {gl_info()['renderer']} ({'X display' if display_available() else 'OSMesa, no display'})")
        model = r.load_character(geno)
        rot, pos = model.bind_pose()
        r.camera.halflife = 0.0
        for n in counts:
            side = int(np.ceil(np.sqrt(n)))
            offsets = np.array([[(i % side - (side - 1) / 2) * 0.9, 0.0, -(i // side) * 0.9] for i in range(n)])
            depth = (side - 1) * 0.9
            r.camera.set_fixed([0.25 * side + 1.0, 1.3 + 0.2 * side, 3.2 + 0.6 * side], [0.0, 0.9, -depth / 2])
            r.camera.snap()
            r.effects.shadow_extent = max(5.0, 0.6 * side + 2.0)

            def draw():
                for o in offsets:
                    r.draw_character(model, rot, pos + o)

            configs = [("none", set(), {}), ("all", set(EFFECTS), {}), ("all", set(EFFECTS), GENOVIEW_STYLE)]
            if n == counts[0]:
                configs[1:1] = [(e, {e}, {}) for e in EFFECTS]
            best = [0.0] * len(configs)
            cpu = [float("inf")] * len(configs)
            for _ in range(args.rounds):
                for k, (_name, on, extra) in enumerate(configs):
                    _set(r, on, shadow_extent=r.effects.shadow_extent, **extra)
                    fps, ms = _fps(r, draw, args.frames)
                    best[k], cpu[k] = max(best[k], fps), min(cpu[k], ms)
            peer_fps, peer_cpu = best[-1], cpu[-1]
            for (name, _on, _extra), fps, ms in zip(configs[:-1], best[:-1], cpu[:-1]):
                is_all = name == "all"
                rows.append([f"{w}x{h}", n, name, fps, ms, peer_fps if is_all else "", peer_cpu if is_all else "",
                             fps / peer_fps if is_all else "", peer_cpu / ms if is_all else ""])
                print(f"  {w}x{h} chars={n:3d} {name:8s} {fps:7.2f} FPS {ms:7.1f} CPU ms/frame", flush=True)
            if n == counts[0]:
                shots = {}
                for label, extra in (("kinema", {}), ("genoview_style", GENOVIEW_STYLE)):
                    _set(r, set(EFFECTS), shadow_extent=r.effects.shadow_extent, **extra)
                    r.begin_frame()
                    draw()
                    r.end_frame()
                    shots[label] = r.capture()
                    imageio.imwrite(out / f"{label}_{w}x{h}.png", shots[label])
                d = np.abs(shots["kinema"].astype(int) - shots["genoview_style"].astype(int))
                peer_rows.append([f"{w}x{h}", float(d.mean()), float(np.percentile(d.max(-1), 99)),
                                  str(out / f"kinema_{w}x{h}.png")])
        r.close()
    print_table("kinema.render FPS (headless, Geno, glFinish per frame) vs GenoView-style settings",
                ["size", "characters", "effects", "FPS", "CPU ms/frame", "GenoView-style FPS",
                 "GenoView-style CPU ms", "FPS ratio", "CPU ratio"], rows)
    print_table("full pipeline images: kinema settings vs GenoView-style (0-255 per channel)",
                ["size", "mean abs diff", "p99 max-channel diff", "image"], peer_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
