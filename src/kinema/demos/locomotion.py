"""``kinema demo locomotion``: a biped driven by the retrieval-augmented Mamba controller.

A stick (gamepad left stick, or WASD/arrows) moves a spring-damped simulation object
(:class:`kinema.control.trajectory.TrajectoryController`, walk speeds unless shift/``rb``
is held); its predicted trajectory at +20/+40/+60 frames, relative to the character's own
root, is the controller's 12-d joystick. Keys 1/2/3 (or gamepad x/y/b) switch live between
the retrieval controller, the no-retrieval model and motion-matching playback.

The model: ``--checkpoint``, else the LaFAN1 model in ``models/`` when ``--data`` points at
LaFAN1 BVH files, else the model trained on the bundled GAMES-105 sample. Its database is
rebuilt from the checkpoint's training clips on first run (checked against the
checkpoint's fingerprint) and cached.

Headless (``--headless --frames N --out DIR``): a scripted stick track (walk, turn left,
turn right, stop, walk back) is run with every controller in turn from the same start;
``metrics.json`` gets, per controller, the distance between the character's root and the
simulation object (trajectory following; by default the root is pulled toward the
simulation object as Motion Matching does, :func:`adjust_root`), heading error, foot skating (horizontal toe
speed while the toe is within 2.5 cm of the floor), speed and time per frame. With
``--render`` (needs kinema.render) each controller's run is also written as an MP4.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from kinema.errors import KinemaError

DESCRIPTION = "biped locomotion with the retrieval-augmented Mamba controller (switch to no-retrieval / motion matching)"
MODEL_DIR = Path(__file__).resolve().parents[3] / "models"
SAMPLE_MODEL = "retrieval_sample_games105.safetensors"
SAMPLE_BASELINE = "retrieval_sample_games105_noretrieval.safetensors"
LAFAN1_MODEL = "retrieval_lafan1.safetensors"
LAFAN1_BASELINE = "retrieval_lafan1_noretrieval.safetensors"
SWITCH_KEYS = {"1": "retrieval", "2": "no_retrieval", "3": "matching"}
SWITCH_BUTTONS = {"x": "retrieval", "y": "no_retrieval", "b": "matching"}

# (seconds, stick x, stick y): +y forward, +x right (kinema.control.trajectory conventions)
TRACK = [(2.0, 0.0, 1.0), (2.5, -0.8, 0.6), (2.5, 0.8, 0.6), (1.5, 0.0, 0.0), (2.0, 0.0, -1.0), (1.5, 0.0, 1.0)]


def scripted_stick(t: float) -> np.ndarray:
    """The headless stick at time ``t`` seconds (the TRACK, repeated)."""
    total = sum(d for d, _, _ in TRACK)
    t = t % total
    for d, x, y in TRACK:
        if t < d:
            return np.array([x, y], np.float64)
        t -= d
    return np.zeros(2)


def pick_models(args) -> tuple[Path, Path | None]:
    """(checkpoint, no-retrieval baseline or None) from the arguments (module docstring)."""
    if args.checkpoint:
        return Path(args.checkpoint), Path(args.baseline) if args.baseline else None
    names = (LAFAN1_MODEL, LAFAN1_BASELINE) if args.data else (SAMPLE_MODEL, SAMPLE_BASELINE)
    model = MODEL_DIR / names[0]
    if not model.is_file():
        raise KinemaError(f"{model}: model not found (train it with `kinema train configs/...` or pass --checkpoint)")
    base = MODEL_DIR / names[1]
    return model, base if base.is_file() else None


def cached_database(checkpoint: Path, cache: Path, data: str | None = None):
    """The checkpoint's database: from ``cache`` when its fingerprint matches, else rebuilt
    from the checkpoint's training config (``data`` replaces a ``shared:`` data root)."""
    from kinema.control.retrieval.database import Database
    from kinema.control.retrieval.training import build_databases
    from kinema.nn.checkpoint import read_metadata

    meta = read_metadata(checkpoint)
    want = meta["fingerprint"]
    path = cache / f"retrieval_db_{want}.npz"
    if path.is_file():
        try:
            return Database.load(path)
        except KinemaError:
            pass
    cfg = json.loads(json.dumps(meta["config"]))
    if data:
        cfg["data"]["clips"] = [c.replace("shared:lafan1/", str(Path(data)) + "/") for c in cfg["data"]["clips"]]
    print(f"building the retrieval database from {len(cfg['data']['clips'])} clip pattern(s) (first run) ...")
    db = build_databases(cfg)[0]
    if db.fingerprint != want:
        raise KinemaError(f"the rebuilt database has fingerprint {db.fingerprint}, the checkpoint needs {want}: "
                          "different data or build code")
    db.save(path)
    return db


ADJUST_HALFLIFE = 0.2   # s, position and facing pulled toward the simulation object
ADJUST_CLAMP = 0.5      # m, the root never lags the simulation object by more


def adjust_root(ctl, position: np.ndarray, direction: np.ndarray, dt: float) -> None:
    """Motion Matching's adjustment and clamping (NOTES.md 1.5): the character's root moves
    toward the simulation object with a damper of ADJUST_HALFLIFE and never lags it by
    more than ADJUST_CLAMP; its facing turns toward the simulation's the same way. Applied
    to every controller alike (``--no-adjust`` turns it off)."""
    a = 1.0 - 0.5 ** (dt / ADJUST_HALFLIFE)
    pos = ctl.root_pos[0] + a * (np.asarray(position, np.float32) * [1, 0, 1] - ctl.root_pos[0])
    off = pos - np.asarray(position, np.float32) * [1, 0, 1]
    dist = float(np.linalg.norm(off))
    if dist > ADJUST_CLAMP:
        pos = pos - off * (1 - ADJUST_CLAMP / dist)
    yaw = np.arctan2(ctl.root_dir[0, 0], ctl.root_dir[0, 2])
    goal = np.arctan2(direction[0], direction[2])
    yaw += a * ((goal - yaw + np.pi) % (2 * np.pi) - np.pi)
    ctl.root_pos[0] = pos.astype(np.float32)
    ctl.root_dir[0] = np.array([np.sin(yaw), 0.0, np.cos(yaw)], np.float32)


class Locomotion:
    """The program: stick -> simulation springs -> joystick -> controller -> drawn skeleton."""

    def __init__(self, controller, script=None, walk: bool = True, adjust: bool = True):
        from kinema.control.trajectory import TrajectoryController

        self.ctl, self.script, self.walk, self.adjust = controller, script, walk, adjust
        self.traj = TrajectoryController()
        self.t = 0.0
        self.log: list[tuple] = []

    def start(self, app) -> None:
        self.app = app

    def reset(self) -> None:
        from kinema.control.trajectory import TrajectoryController

        self.ctl.reset(0)
        self.traj = TrajectoryController()
        self.t = 0.0
        self.log = []

    def update(self, dt: float) -> None:
        walk = self.walk
        if self.script is not None:
            s = self.script(self.t)
        else:
            from kinema.engine import stick
            inp = self.app.input
            s = np.asarray(stick(inp), np.float64)
            for key, mode in SWITCH_KEYS.items():
                if key in inp.keys_pressed:
                    self.ctl.set_mode(mode)
            for button, mode in SWITCH_BUTTONS.items():
                if button in inp.gamepad_buttons:
                    self.ctl.set_mode(mode)
            walk = not ({"left_shift", "right_shift"} & set(inp.keys_down) or "rb" in inp.gamepad_buttons)
        self.step(s, dt, walk)

    def step(self, s: np.ndarray, dt: float, walk: bool) -> None:
        sim = self.traj.update(s, dt, walk=walk)
        root_pos, root_dir = self.ctl.root
        control = self.traj.predict().features(root_pos, root_dir)
        t0 = time.perf_counter()
        self.ctl.step(control)
        cost = time.perf_counter() - t0
        if self.adjust:
            adjust_root(self.ctl, sim.position, sim.direction, dt)
        self.log.append((self.ctl.root_pos[0].copy(), self.ctl.root_dir[0].copy(), sim.position.copy(),
                         sim.direction.copy(), self.ctl.joint_positions(), cost))
        self.t += dt

    def draw(self, renderer) -> None:
        debug = getattr(renderer, "debug", None)
        if debug is None:
            return
        joints = self.ctl.joint_positions()
        debug.skeleton(joints, self.ctl.db.parents)
        pred = self.traj.predict()
        debug.trajectory(np.vstack([self.traj.sim.position[None], pred.positions]),
                         np.vstack([self.traj.sim.direction[None], pred.directions]))
        cam = getattr(renderer, "camera", None)
        if cam is not None and hasattr(cam, "set_focus"):
            cam.set_focus(joints[0])

    def gui(self, ui) -> None:
        panel, label = getattr(ui, "panel", None), getattr(ui, "label", None)
        if panel is None or label is None:
            return
        with panel("locomotion", x=10, y=40, width=360):
            label(f"controller: {self.ctl.mode}  (1 retrieval, 2 no retrieval, 3 matching)")
            label("stick / WASD: move, shift: run")

    def metrics(self, floor: float) -> dict:
        rp = np.array([r[0] for r in self.log])
        rd = np.array([r[1] for r in self.log])
        sp = np.array([r[2] for r in self.log])
        sd = np.array([r[3] for r in self.log])
        joints = np.array([r[4] for r in self.log])
        dist = np.linalg.norm((rp - sp)[:, [0, 2]], axis=1)
        heading = np.degrees(np.arccos(np.clip((rd * sd).sum(1), -1, 1)))
        db = self.ctl.db
        toes = joints[:, [db.joints["left_toe"], db.joints["right_toe"]]]
        speed = np.linalg.norm(np.diff(toes[..., [0, 2]], axis=0), axis=-1) * 60.0 * 100.0
        low = toes[1:, :, 1] < floor
        travelled = np.linalg.norm(np.diff(rp[:, [0, 2]], axis=0), axis=1).sum()
        return {"frames": len(self.log), "finite": bool(np.isfinite(joints).all()),
                "trajectory_error_m": float(dist.mean()), "trajectory_error_max_m": float(dist.max()),
                "heading_error_deg": float(heading.mean()), "foot_skate_cm_s": float(speed[low].mean()) if low.any() else 0.0,
                "distance_travelled_m": float(travelled), "simulation_travelled_m":
                    float(np.linalg.norm(np.diff(sp[:, [0, 2]], axis=0), axis=1).sum()),
                "ms_per_frame": 1e3 * float(np.mean([r[5] for r in self.log]))}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=["auto", "standalone", "headless"], default="auto")
    parser.add_argument("--headless", action="store_true", help="same as --mode headless")
    parser.add_argument("--frames", type=int, default=None, help="frames per controller (headless default 720)")
    parser.add_argument("--out", type=Path, default=Path("out/demo_locomotion"), help="folder for metrics.json / MP4")
    parser.add_argument("--checkpoint", help="retrieval controller checkpoint (default: the shipped model)")
    parser.add_argument("--baseline", help="no-retrieval checkpoint for mode 2 (default: the shipped one)")
    parser.add_argument("--data", help="folder of LaFAN1 BVH files: use the LaFAN1 model")
    parser.add_argument("--controller", choices=["all", "retrieval", "no_retrieval", "matching"], default="all",
                        help="headless: which controllers to run (default all, one after the other)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kinema",
                        help="where the rebuilt database is cached")
    parser.add_argument("--render", action="store_true", help="headless: also write an MP4 per controller")
    parser.add_argument("--no-adjust", action="store_true",
                        help="do not pull the character's root toward the simulation object")
    parser.add_argument("--width", type=int, default=960)
    parser.add_argument("--height", type=int, default=540)


def _render_run(program, frames: int, path: Path, width: int, height: int) -> Path | None:
    try:
        from kinema.render import Renderer
        from kinema.render.recorder import Recorder
    except Exception as e:  # noqa: BLE001 - renderer optional
        print(f"kinema demo locomotion: no renderer ({e}); metrics only")
        return None
    r = Renderer()
    r.open(width, height, "kinema: locomotion", headless=True)
    rec = Recorder(path, fps=30)
    try:
        for f in range(frames):
            program.step(scripted_stick(program.t), 1 / 60, True)
            if f % 2 == 0:
                r.begin_frame()
                program.draw(r)
                r.end_frame()
                rec.add(r.capture())
    finally:
        rec.close()
        r.close()
    return path


def run(args: argparse.Namespace) -> int:
    from kinema.control.retrieval.controller import MODES, RetrievalController
    from kinema.control.retrieval.evaluate import _positions

    checkpoint, baseline = pick_models(args)
    db = cached_database(checkpoint, args.cache, args.data)
    ctl = RetrievalController(checkpoint, db, baseline)
    headless = args.headless or args.mode == "headless"
    if not headless:
        from kinema.engine import App, Scene
        from kinema.render import Renderer
        app = App(Scene("locomotion"), Locomotion(ctl, walk=True, adjust=not args.no_adjust), mode="standalone", fps=60.0,
                  renderer=Renderer(), title="kinema: locomotion", width=args.width, height=args.height)
        app.run(args.frames)
        return 0
    frames = args.frames or 720
    floor = float(np.percentile(_positions(db.poses, db.num_joints)[:, [db.joints["left_toe"], db.joints["right_toe"]], 1], 5)) + 0.025
    modes = MODES if args.controller == "all" else (args.controller,)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"checkpoint": str(checkpoint), "baseline": None if baseline is None else str(baseline),
              "root_adjustment": None if args.no_adjust else {"halflife_s": ADJUST_HALFLIFE, "clamp_m": ADJUST_CLAMP},
              "database": db.fingerprint, "frames": frames, "track": TRACK, "controllers": {}}
    for mode in modes:
        ctl.set_mode(mode)
        program = Locomotion(ctl, script=scripted_stick, adjust=not args.no_adjust)
        program.reset()
        ctl.set_mode(mode)
        video = None
        if args.render:
            video = _render_run(program, frames, args.out / f"locomotion_{mode}.mp4", args.width, args.height)
        if video is None:
            for _ in range(frames):
                program.step(scripted_stick(program.t), 1 / 60, True)
        m = program.metrics(floor)
        m["video"] = None if video is None else str(video)
        result["controllers"][mode] = m
        print(f"{mode:>13}: trajectory error {m['trajectory_error_m']:.3f} m (max {m['trajectory_error_max_m']:.3f}), "
              f"heading {m['heading_error_deg']:.1f} deg, skate {m['foot_skate_cm_s']:.1f} cm/s, "
              f"{m['ms_per_frame']:.2f} ms/frame")
    (args.out / "metrics.json").write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out / 'metrics.json'}")
    return 0
