"""Engine loop: headless frames per second with 1,000 spinning entities in a 3-level hierarchy.

Every frame each entity turns about its local Y axis and every world transform is brought
up to date (as a renderer would need it). Cases:

* kinema, one ``Spin`` component per entity (the plain object-oriented way);
* kinema, one batched component that turns all entities with one array operation;
* peer "dict objects": a plain Python loop over dict-based entities doing the same maths
  with Python floats, world transforms in one parents-first pass per frame (no engine);
* peer "4x4 matrix per entity": AI4AnimationPy's representation, a NumPy matrix product
  per entity per turn and per parent composition;
* building the scene: kinema's ``create_entity`` (amortised O(1)) against appending by
  re-concatenating the transform arrays on every add (AI4AnimationPy's O(N^2) scheme).

Each kinema case runs ``--frames`` (10,000) headless frames as 10 ``app.run(1000)`` calls on one
App, interleaved with chunks of the peers so that load swings on a shared machine hit all
cases alike. Run: ``.venv/bin/python benchmarks/bench_engine.py [--frames 10000] [--entities 1000]``.
"""
from __future__ import annotations

import argparse
import gc
import math

import numpy as np

from common import print_table, timeit
from kinema.engine import App, Component, Scene
from kinema.maths import quat

SPEED = 0.7  # rad/s


def _shape(n: int) -> list[int]:
    """Parent index per entity for a 3-level tree of ``n`` entities (1% roots, 9% middle)."""
    roots = max(1, n // 100)
    mids = max(1, n * 9 // 100)
    parents = [-1] * roots
    parents += [i % roots for i in range(mids)]
    parents += [roots + i % mids for i in range(n - roots - mids)]
    return parents


def _offset(i: int) -> tuple[float, float, float]:
    return (1.0 + (i % 7) * 0.3, 0.1 * (i % 3), 0.0)


class Spin(Component):
    def update(self, dt: float) -> None:
        half = 0.5 * SPEED * dt
        self.entity.rotate((math.cos(half), 0.0, math.sin(half), 0.0))


class SpinAll(Component):
    """Turns every entity of the scene at once (data-oriented: one array op per frame)."""

    def on_start(self) -> None:
        self.slots = self.scene.slots(self.scene.entities)

    def update(self, dt: float) -> None:
        t = self.scene.transforms
        half = 0.5 * SPEED * dt
        dq = np.array([math.cos(half), 0.0, math.sin(half), 0.0], np.float32)
        r = quat.mul(t.local_rot[self.slots], dq)
        t.set_local(self.slots, rotation=r / np.linalg.norm(r, axis=-1, keepdims=True))


class SyncWorld:
    """Program: bring every world transform up to date after each step (a renderer would)."""

    def start(self, app: App) -> None:
        self.app = app

    def late_update(self, dt: float) -> None:
        self.app.scene.transforms.update_world()


def build_kinema(n: int, per_entity: bool) -> Scene:
    scene = Scene(capacity=n + 1)
    ents = []
    for i, p in enumerate(_shape(n)):
        e = scene.create_entity(f"e{i}", parent=None if p < 0 else ents[p], position=_offset(i))
        if per_entity:
            e.add(Spin())
        ents.append(e)
    if not per_entity:
        ents[0].add(SpinAll())
    return scene


def kinema_app(n: int, per_entity: bool) -> App:
    """A headless App over the benchmark scene (``app.run(frames)`` continues its clock)."""
    return App(build_kinema(n, per_entity), SyncWorld(), mode="headless", profile=False)


# ------------------------------------------------------------------ naive peer
def _qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)


def _qrot(q, v):
    w, x, y, z = q
    vx, vy, vz = v
    tx, ty, tz = 2 * (y * vz - z * vy), 2 * (z * vx - x * vz), 2 * (x * vy - y * vx)
    return (vx + w * tx + y * tz - z * ty, vy + w * ty + z * tx - x * tz, vz + w * tz + x * ty - y * tx)


class NaiveWorld:
    """Entities as dicts in a list (parents before children), Python-float maths."""

    def __init__(self, n: int) -> None:
        self.ents: list[dict] = []
        for i, p in enumerate(_shape(n)):
            self.ents.append({"parent": None if p < 0 else self.ents[p], "pos": _offset(i),
                              "rot": (1.0, 0.0, 0.0, 0.0), "wpos": (0.0, 0.0, 0.0), "wrot": (1.0, 0.0, 0.0, 0.0)})

    def run(self, frames: int) -> None:
        half = 0.5 * SPEED / 60
        dq = (math.cos(half), 0.0, math.sin(half), 0.0)
        ents = self.ents
        for _ in range(frames):
            for e in ents:
                w, x, y, z = _qmul(e["rot"], dq)
                s = math.sqrt(w * w + x * x + y * y + z * z)
                e["rot"] = (w / s, x / s, y / s, z / s)
            for e in ents:
                p = e["parent"]
                if p is None:
                    e["wpos"], e["wrot"] = e["pos"], e["rot"]
                else:
                    e["wrot"] = _qmul(p["wrot"], e["rot"])
                    r = _qrot(p["wrot"], e["pos"])
                    e["wpos"] = (p["wpos"][0] + r[0], p["wpos"][1] + r[1], p["wpos"][2] + r[2])

    def world_positions(self) -> np.ndarray:
        return np.array([e["wpos"] for e in self.ents], np.float32)


class MatrixWorld:
    """AI4AnimationPy-style: a 4x4 NumPy matrix per entity, one matrix product per turn and
    per parent-to-child composition, Python loop over entities."""

    def __init__(self, n: int) -> None:
        self.parents = _shape(n)
        self.local = np.tile(np.eye(4, dtype=np.float32), (n, 1, 1))
        self.local[:, :3, 3] = [_offset(i) for i in range(n)]
        self.world = self.local.copy()
        half = SPEED / 60
        self.turn = np.eye(4, dtype=np.float32)
        self.turn[[0, 0, 2, 2], [0, 2, 0, 2]] = [math.cos(half), math.sin(half), -math.sin(half), math.cos(half)]

    def run(self, frames: int) -> None:
        local, world, turn = self.local, self.world, self.turn
        for _ in range(frames):
            for i in range(len(local)):
                local[i] = local[i] @ turn
            for i, p in enumerate(self.parents):
                world[i] = local[i] if p < 0 else world[p] @ local[i]

    def world_positions(self) -> np.ndarray:
        return self.world[:, :3, 3].copy()


def build_concat(n: int) -> np.ndarray:
    """AI4AnimationPy's scheme: every add concatenates the global (N, 4, 4) transform array."""
    transforms = np.zeros((0, 4, 4), np.float32)
    for _ in range(n):
        transforms = np.concatenate([transforms, np.eye(4, dtype=np.float32)[None]], 0)
    return transforms


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=10_000)
    ap.add_argument("--entities", type=int, default=1_000)
    ap.add_argument("--peer-frames", type=int, default=1_000, help="frames for the (slower) naive peer")
    args = ap.parse_args(argv)
    n, frames = args.entities, args.frames

    # every loop computes the same world transforms
    check = [kinema_app(n, True), kinema_app(n, False), NaiveWorld(n), MatrixWorld(n)]
    for world in check:
        world.run(50)
    ref = check[2].world_positions()
    for pos in (check[0].scene.snapshot()["world_pos"], check[1].scene.snapshot()["world_pos"],
                check[3].world_positions()):
        np.testing.assert_allclose(pos, ref, atol=1e-3)
    del check

    # the machine is shared: run the cases in interleaved chunks so load swings hit all alike
    rounds = 10
    cases = [("kinema, Spin component per entity", kinema_app(n, True), frames // rounds),
             ("kinema, one batched component", kinema_app(n, False), frames // rounds),
             ("peer: dict objects, Python loop", NaiveWorld(n), args.peer_frames // rounds),
             ("peer: 4x4 NumPy matrix per entity", MatrixWorld(n), max(1, args.peer_frames // (4 * rounds)))]
    seconds = [0.0] * len(cases)
    gc.collect()
    for _ in range(rounds):
        for k, (_, world, chunk) in enumerate(cases):
            seconds[k] += timeit(lambda: world.run(chunk), repeat=1, warmup=0)
    per_frame = [sec / (chunk * rounds) for sec, (_, _, chunk) in zip(seconds, cases)]
    peer = per_frame[2]
    rows = [[name, chunk * rounds, n, sec, 1 / t, peer / t]
            for (name, _, chunk), sec, t in zip(cases, seconds, per_frame)]
    print_table(f"engine: headless frames/s, {n} entities, 3-level hierarchy, {rounds} interleaved runs per case "
                "(ratio = speed-up over the dict-object loop)",
                ["case", "frames", "entities", "seconds", "frames/s", "ratio"], rows)

    build_rows = []
    for count in (1_000, 10_000, 30_000):
        gc.collect()
        gc.disable()  # like the timeit module: time the work, not collections of earlier garbage
        try:
            t_k = timeit(lambda: build_kinema(count, False), repeat=3 if count < 30_000 else 1, warmup=1)
            t_c = timeit(lambda: build_concat(count), repeat=3 if count < 30_000 else 1, warmup=1)
        finally:
            gc.enable()
        build_rows.append([count, t_k * 1e3, t_c * 1e3, t_c / t_k])
    print_table("engine: building the scene, ms, GC paused (ratio = concat-per-add / kinema)",
                ["entities", "kinema create_entity", "peer: concat per add", "ratio"], build_rows)


if __name__ == "__main__":
    main()
