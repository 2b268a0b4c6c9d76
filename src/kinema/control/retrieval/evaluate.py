"""Evaluation of a retrieval controller checkpoint on held-out clips (NOTES.md 3.4, 3.5).

Windows start every ``stride`` frames of each clip: ``context`` ground-truth frames warm the
state, then ``frames`` frames are predicted

- **teacher forced**: every input pose is the ground truth, candidates come from the
  ground-truth queries (refreshed every ``refresh`` frames, advancing in between);
- **free running**: :func:`kinema.control.retrieval.rollout.rollout`: predictions fed back,
  joystick re-expressed relative to the predicted root, retrieval from the predicted state;
  with ``rigid`` (the default, as the runtime draws them) every predicted pose has its joint
  positions rebuilt from its rotations and lifted above the data's lowest toe
  (:func:`kinema.control.retrieval.pose.rigid_pose`).

Each regime is run with the retrieved candidates (``with``) and with only the learned null
token (``without``) on the same model. The headline retrieval gain is ``gain_vs_twin``:
the loss reduction against ``no_retrieval_model``, a separately trained model of the same
recipe (``--baseline``); the null-token gain (``gain``, ``loss(without) - loss(with)``) is
an ablation of the same model, reported beside it. Loss: MSE of the normalised pose vector
(the training loss). Intervals: 95% percentile bootstrap that resamples whole takes, then
windows within them (:func:`kinema.control.retrieval.metrics.grouped_bootstrap_ci`; a
mirror counts with its take), so they cover the spread between takes.

Metrics (:mod:`kinema.control.retrieval.metrics`, each chosen so that a frozen or damped
character cannot win it alone): character-space and world joint error (cm), root (m) and
heading (degrees) error against the requested path, motion energy (``joint_speed_ratio``,
``accel_ratio``, ``energy_window_fraction``), collapse toward the mean pose, foot skating
(horizontal toe speed weighted by how near the toe is to the floor, averaged over every
frame, cm/s: :func:`kinema.control.retrieval.metrics.foot_skate`), ``frechet`` (the
distribution of per-frame positions and velocities against the truth's), NPSS of joint
positions over 60-frame chunks, divergence rate; ``ground_truth`` gives the truth's own
skating and the Fréchet floor (``frechet_split_half``); ``per_clip`` every method per
take; ``horizons`` the joint error over the first 15 ... 300 frames with paired intervals
against every baseline; ``frame_joint_error_cm`` the per-frame curves
(:mod:`kinema.control.retrieval.plot`). Optionally ``stability`` (20-s rollouts: finite,
error not growing) and ``scenarios`` (scripted sticks through the runtime:
:mod:`kinema.control.retrieval.scenarios`). :mod:`kinema.control.retrieval.targets`
checks the controller targets on the result.

Baselines: ``motion_matching``, the runtime motion-matching controller
(:class:`~kinema.control.matching.MotionMatchingController`, inertialized transitions)
started from the actor's pose and following the same path; ``motion_matching_playback``
(search every ``refresh`` frames, play successors, no inertialization); copying the
previous pose (a reference: it wins joint error past 0.5 s by not moving, and loses every
energy figure); the nearest candidate's successor; the same model fed random database rows
(control); and optionally ``no_retrieval_model``. With ``oracle`` the model and motion
matching also retrieve from a database that holds the evaluated clips (``oracle``: the
model's uptake of candidates that carry the exact future, :func:`oracle_summary`).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from kinema.control.inertialize import PoseState
from kinema.control.matching import MatchingConfig, MotionMatchingController, row_pose_state
from kinema.control.retrieval.metrics import (
    floor_height,
    frechet,
    grouped_bootstrap_ci,
    joint_positions,
    select,
    summary,
    window_metrics,
)
from kinema.control.retrieval.rollout import (
    RootMover,
    control_at,
    playback_rollout,
    rollout,
    teacher_forced_candidates,
)
from kinema.control.retrieval.sequences import RandomRetriever, Retriever
from kinema.data import portable_path
from kinema.errors import KinemaError
from kinema.features.normalisation import Normaliser
from kinema.matching.database import Database
from kinema.maths import quat
from kinema.nn.checkpoint import load_checkpoint, read_metadata

HORIZONS = (15, 30, 60, 120, 300)   # frames at 60 Hz (NOTES.md 3.4)


def horizon_table(with_m: dict, others: dict[str, dict], frames: int, seed: int = 0,
                  groups: np.ndarray | None = None) -> dict:
    """Joint error (cm) averaged over the first h frames for h in HORIZONS (<= ``frames``),
    for the model (``with``) and each of ``others``; and, per other method, the 95% paired
    bootstrap interval (clips, then windows within them: :func:`grouped_bootstrap_ci`) of
    ``other - model`` (above 0: the model is better)."""
    hs = [h for h in HORIZONS if h <= frames] or [frames]
    err = {"with": with_m["_frame_joint_error_cm"], **{k: v["_frame_joint_error_cm"] for k, v in others.items()}}
    table = {name: [float(e[:, :h].mean()) for h in hs] for name, e in err.items()}
    diff = {name: [grouped_bootstrap_ci(e[:, :h].mean(1) - err["with"][:, :h].mean(1), groups, seed=seed) for h in hs]
            for name, e in err.items() if name != "with"}
    return {"frames": hs, "joint_error_cm": table, "other_minus_model_ci95": diff}


@torch.no_grad()
def stability(model, retriever: Retriever, source: Database, db: Database, frames: int, context: int,
              exclude: np.ndarray | None, windows: int = 4, rigid: bool = False, planted: float | None = None,
              unit: bool = False, velocities: bool = False) -> dict:
    """Long free-running rollouts (``frames`` frames, e.g. 1200 = 20 s) from up to
    ``windows`` starts spread over the clips: whether every output is finite, the largest
    per-frame joint error, and the mean joint error of the first and the last 300 frames
    (no growth = no divergence). A :class:`KinemaError` when no clip is long enough (a
    check that ran on nothing must not pass)."""
    starts = window_starts(source, context + frames + 1, 1)
    if len(starts) == 0:
        longest = int((source.ranges[:, 1] - source.ranges[:, 0]).max())
        raise KinemaError(f"stability: no evaluation clip is long enough for {context} + {frames} frames "
                          f"(the longest has {longest}); ask for fewer frames")
    starts = starts[np.linspace(0, len(starts) - 1, min(windows, len(starts))).astype(int)]
    r = rollout(model, retriever, source, starts, context, frames, exclude=exclude, rigid=rigid, unit=unit,
                velocities=velocities, planted=planted)
    pred = retriever.norm.denormalise(r.pose.numpy())
    err = np.linalg.norm(joint_positions(db, pred) - joint_positions(db, source.pose[r.rows]), axis=-1).mean(-1) * 100
    chunk = min(300, frames // 2)
    # the same figures for the frozen last context pose over the same frames (a scale for "bounded")
    frozen = source.pose[starts + context - 1][:, None]
    ref = np.linalg.norm(joint_positions(db, frozen) - joint_positions(db, source.pose[r.rows]), axis=-1).mean(-1) * 100
    return {"frames": frames, "windows": int(len(starts)), "finite": bool(np.isfinite(pred).all()),
            "max_frame_joint_error_cm": float(err.max()), "first_joint_error_cm": float(err[:, :chunk].mean()),
            "last_joint_error_cm": float(err[:, -chunk:].mean()), "chunk_frames": chunk,
            "copy_previous_max_frame_joint_error_cm": float(ref.max()),
            "copy_previous_last_joint_error_cm": float(ref[:, -chunk:].mean()),
            "root_error_end_m": float(np.linalg.norm((r.root_pos[:, -1] - r.true_pos[:, -1])[:, [0, 2]], axis=-1).mean())}


def window_starts(source: Database, length: int, stride: int) -> np.ndarray:
    """First rows of the windows of ``length`` rows every ``stride`` rows inside each clip."""
    starts = [np.arange(lo, hi - length, stride) for lo, hi in source.ranges if hi - lo > length]
    return np.concatenate(starts) if starts else np.zeros(0, np.int64)


def open_database(path: str | Path | None, meta: dict) -> Database:
    """A database file (.npz), or, for None or a training config (.toml/.json), the
    training database rebuilt from that config (the checkpoint's own when None)."""
    from kinema.control.retrieval.training import build_databases, load_config

    if path is not None and Path(path).suffix == ".npz":
        return Database.load(path)   # e.g. written by ``kinema db build``
    cfg = meta["config"] if path is None else load_config(path)
    return build_databases(cfg)[0]


def cached_database(checkpoint: Path, cache: Path, data: str | None = None):
    """The checkpoint's database: from ``cache`` when its fingerprint matches, else rebuilt
    from the checkpoint's training config (``data`` replaces a ``shared:`` data root)."""
    from kinema.control.retrieval.training import build_databases

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


def check_fingerprint(meta: dict, db: Database, path: str | Path = "") -> None:
    want = meta.get("fingerprint")
    if want != db.fingerprint:
        raise KinemaError(f"database {path} has fingerprint {db.fingerprint} but the checkpoint was trained "
                          f"on {want}: rebuild the database the checkpoint was made with")


@torch.no_grad()
def teacher_forced(model, retriever: Retriever, source: Database, starts: np.ndarray, length: int,
                   exclude: np.ndarray | None, use: bool) -> np.ndarray:
    """Raw predicted next poses (W, L, P) with ground-truth inputs."""
    rows = starts[:, None] + np.arange(length)[None]
    norm = retriever.norm
    cands = None
    if use and getattr(model, "use_retrieval", False):
        cands = torch.as_tensor(teacher_forced_candidates(retriever, source, rows, exclude, None))
    out, _ = model(torch.as_tensor(source.trajectory[rows]), torch.as_tensor(norm.normalise(source.pose[rows])), cands)
    return norm.denormalise(out["pose"].numpy())


def _nearest_tf(retriever: Retriever, source: Database, rows: np.ndarray, exclude, every: int) -> np.ndarray:
    """Successor playback of the best candidate of ground-truth queries (search every ``every``)."""
    db = retriever.db
    out = np.empty(rows.shape + (db.pose_width,), np.float32)
    best = None
    for t in range(rows.shape[1]):
        if t % every == 0:
            idx, _ = retriever.search(db.normalise(source.raw_features[rows[:, t]]), exclude)
            best, since = idx[:, 0], 0
        since += 1
        out[:, t] = db.pose[db.successor(best, since)]
    return out


def matching_rollout(db: Database, source: Database, starts: np.ndarray, context: int, horizon: int,
                     exclude: np.ndarray | None = None, config: MatchingConfig | None = None,
                     planted: float | None = None, controller: MotionMatchingController | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The runtime motion-matching controller (:class:`MotionMatchingController`, with
    inertialization and its transition rule) driven like :func:`rollout`: it starts from
    the true pose of each window's last context row (inertialized into the best match),
    then every frame follows the clip's future root re-expressed relative to its own root.
    Returns raw pose vectors (B, H, P) (root-space positions, rotations and velocities
    as inertialized), root positions and directions (B, H, 3), and the toe contact labels
    (B, H, 2) of the rows played (what its runtime foot lock reads). ``planted``: toe floor
    height (m) of the planted-foot root correction applied after each of its steps, as for
    the networks (:func:`kinema.control.planted.planted_root`). ``controller``: the one
    character controller to drive (e.g. a subclass that chooses its own transitions;
    default: a fresh :class:`MotionMatchingController` of ``db`` with ``config``)."""
    lay = {name: (a, b) for name, a, b in db.pose_layout}
    out = np.empty((len(starts), horizon, db.pose_width), np.float32)
    rps = np.empty((len(starts), horizon, 3), np.float32)
    rds = np.empty((len(starts), horizon, 3), np.float32)
    contacts = np.empty((len(starts), horizon, 2), bool)
    ctl = MotionMatchingController(db, config=config) if controller is None else controller
    dt = 1.0 / db.fps
    for w, start in enumerate(starts):
        last = int(start + context - 1)
        clips = None if exclude is None else exclude[w]
        first = control_at(source, np.array([last]), source.root_positions[last:last + 1],
                           source.root_directions[last:last + 1])[0]
        ctl.start_from(row_pose_state(source, last), source.raw_features[last], first,
                       source.root_positions[last], source.root_directions[last], clips)
        mover = RootMover(db, planted)
        mover.start(source.pose[last:last + 1], source.root_positions[last:last + 1],
                    source.root_directions[last:last + 1])
        for h in range(horizon):
            row = last + h
            req = control_at(source, np.array([row]), ctl.root_position[None].astype(np.float32),
                             ctl.root_direction[None].astype(np.float32))[0]
            state: PoseState = ctl.follow(req, dt, clips)
            pose = db.pose[ctl.frame].copy()
            pose[slice(*lay["joint_positions"])] = state.positions.reshape(-1)
            pose[slice(*lay["joint_rotations_6d"])] = quat.to_6d(state.rotations).reshape(-1)
            pose[slice(*lay["joint_velocities"])] = state.velocities.reshape(-1)
            if planted is not None:
                ctl.root_position = mover.plant(ctl.root_position[None], ctl.root_direction[None], pose[None])[0]
            out[w, h] = pose
            rps[w, h], rds[w, h] = ctl.root_position, ctl.root_direction
            contacts[w, h] = db.contacts[ctl.frame] > 0.5
    return out, rps, rds, contacts


def take_groups(source: Database, starts: np.ndarray) -> np.ndarray:
    """(W,) the take of each window: its clip's index, a mirror counted with its original."""
    clips = source.clip_of(starts)
    return np.minimum(clips, source.twins[clips])


def evaluate(checkpoint: str | Path, db: str | Path | Database, clips: Sequence[str | Path], *, frames: int = 300,
             context: int = 32, stride: int = 120, baseline: str | Path | None = None, max_windows: int | None = None,
             mirror: bool = False, seed: int = 0, stability_frames: int = 0, random_rows: bool = False,
             rigid: bool = True, scenarios: Sequence[str] | None = None, scenario_frames: int = 3600,
             foot_lock: bool = False, planted: bool | None = None, oracle: bool = False) -> dict:
    """Evaluate ``checkpoint`` on ``clips`` with retrieval from ``db`` (see module docstring).

    ``frames`` is shortened to what the longest clip allows (reported as ``frames``);
    ``mirror`` also evaluates the mirrored clips (more windows from few clips);
    ``random_rows`` feeds the model uniformly random rows as its candidates (for a model
    trained that way: the control of the ablations); ``rigid``: every method's free-running
    poses have their joint positions rebuilt from their rotations, as the runtime draws them
    (:func:`kinema.control.retrieval.pose.rigid_pose`; False scores the networks' raw
    positions); ``scenarios``: also drive the runtime controller with these scripted sticks
    (:mod:`kinema.control.retrieval.scenarios`) for ``scenario_frames`` frames each, its
    searches (and motion matching's) restricted to :func:`kinema.matching.database.upright_mask`
    as in the demos, and a crowd of 64 on wandering sticks for 10 s
    (:func:`kinema.control.retrieval.scenarios.run_crowd`, ``crowd`` and
    ``crowd_motion_matching``); motion matching there is the inertialized runtime controller
    (:class:`~kinema.control.retrieval.matching_driver.MatchingDriver`), as a user runs it;
    ``foot_lock``: also score every free-running method's skating after the runtime foot
    lock (``foot_skate_locked_cm_s``, :func:`kinema.control.retrieval.metrics.locked_world_toes`,
    each method locked on its own contact labels as its runtime is: the networks' predicted
    contacts, the rows' labels for motion matching, the truth's for the truth, detected from
    the drawn motion for the playback baselines and the frozen pose; about 1 ms per drawn
    frame per method); ``planted``: every free-running method's root (the networks', the
    playback baselines', motion matching's, the scenarios' runtime) is moved by the
    planted-foot rule (:func:`kinema.control.planted.planted_root`: toes on the floor stay
    put), the same way for all; None: as the checkpoint was trained (its ``train.planted``),
    as its runtime controller moves it by default;
    ``oracle``: also run the model and motion matching with a database that holds the
    evaluated clips themselves, nothing excluded (``free_running.oracle``,
    :func:`oracle_summary`): how much of what its candidates carry the model uses.
    """
    from kinema.control.retrieval.controller import RetrievalController, trained_planted, trained_rebuilt_velocities, trained_unit_6d

    model, meta = load_checkpoint(checkpoint)
    if planted is None:
        planted = trained_planted(meta)
    db_path = db if not isinstance(db, Database) else "<database>"
    db = db if isinstance(db, Database) else open_database(db, meta)
    check_fingerprint(meta, db, db_path)
    norm = Normaliser.from_json(meta["normalisation"]["pose"])
    retriever = Retriever.for_checkpoint(db, norm, meta)
    randomised = RandomRetriever.for_checkpoint(db, norm, meta, seed=seed)
    from kinema.control.retrieval.training import build_clips
    source = build_clips([Path(c) for c in clips], db.config, mirror, like=db)
    if not source.skeleton_matches(db):
        raise KinemaError(f"the evaluation clips' skeleton differs from the database's {db.fingerprint}")
    longest = int((source.ranges[:, 1] - source.ranges[:, 0]).max())
    frames = max(8, min(frames, longest - context - 2))
    starts = window_starts(source, context + frames + 1, stride)
    if len(starts) == 0:
        raise KinemaError(f"no clip is long enough for {context} + {frames} frames")
    if max_windows:
        starts = starts[:max_windows]
    groups = take_groups(source, starts)
    own = db.clip_ids(source.clip_names)
    exclude = np.broadcast_to(own, (len(starts), len(own))) if len(own) else None
    floor = floor_height(db)
    plant = floor if planted else None
    base_model = None
    # each network's poses are fed back as in its training (rigid_pose's unit and prev)
    unit, velocities = trained_unit_6d(meta), trained_rebuilt_velocities(meta)
    if baseline is not None:
        base_model, base_meta = load_checkpoint(baseline)
        check_fingerprint(base_meta, db, db_path)

    # Teacher forced: the windows' predicted part (after the context) is scored.
    length = context + frames
    rows = starts[:, None] + np.arange(length)[None]
    true_tf = source.pose[rows + 1][:, context:]
    sl = slice(context, None)
    own = randomised if random_rows else retriever
    tf_with = window_metrics(teacher_forced(model, own, source, starts, length, exclude, True)[:, sl], true_tf, norm, db, floor)
    tf_without = window_metrics(teacher_forced(model, retriever, source, starts, length, exclude, False)[:, sl], true_tf, norm, db, floor)
    tf_base = {
        "copy_previous": window_metrics(source.pose[rows][:, context:], true_tf, norm, db, floor),
        "nearest_candidate": window_metrics(_nearest_tf(retriever, source, rows, exclude, 1)[:, sl], true_tf, norm, db, floor),
        "motion_matching_playback": window_metrics(_nearest_tf(retriever, source, rows, exclude, retriever.refresh)[:, sl],
                                                   true_tf, norm, db, floor),
    }
    if model.use_retrieval:
        tf_base["random_candidates"] = window_metrics(
            teacher_forced(model, randomised, source, starts, length, exclude, True)[:, sl], true_tf, norm, db, floor)
    if base_model is not None:
        tf_base["no_retrieval_model"] = window_metrics(
            teacher_forced(base_model, retriever, source, starts, length, exclude, False)[:, sl], true_tf, norm, db, floor)
    tf_truth = window_metrics(true_tf, true_tf, norm, db, floor)
    tf = _regime(tf_with, tf_without, tf_base, tf_truth, groups, seed)

    # Free running.
    def run(m, use, retr=retriever, unit=unit, velocities=velocities, exclude=exclude):
        with torch.no_grad():
            r = rollout(m, retr, source, starts, context, frames, retrieval=use, exclude=exclude, rigid=rigid,
                        unit=unit, velocities=velocities, planted=plant)
        pred = norm.denormalise(r.pose.numpy())
        return window_metrics(pred, source.pose[r.rows], norm, db, floor, (r.root_pos, r.root_dir, r.true_pos, r.true_dir),
                              foot_lock, r.contact_logits.numpy() > 0.0)

    true_rows = (starts + context)[:, None] + np.arange(frames)[None]
    truth = source.pose[true_rows]
    troots = (source.root_positions[true_rows], source.root_directions[true_rows])

    def play(every):
        p, rp, rd = playback_rollout(retriever, source, starts, context, frames, every, exclude, plant)
        return window_metrics(p, truth, norm, db, floor, (rp, rd) + troots, foot_lock)

    frozen = np.repeat(source.pose[starts + context - 1][:, None], frames, 1)
    fpos = np.repeat(source.root_positions[starts + context - 1][:, None], frames, 1)
    fdir = np.repeat(source.root_directions[starts + context - 1][:, None], frames, 1)
    mm_pose, mm_pos, mm_dir, mm_contacts = matching_rollout(db, source, starts, context, frames, exclude,
                                                            planted=plant)
    # motion matching is scored as its runtime draws it: inertialized positions (its rows are
    # real poses; rebuilding positions from the per-joint inertialized rotations would
    # compound their offsets down every chain)
    fr_base = {"copy_previous": window_metrics(frozen, truth, norm, db, floor, (fpos, fdir) + troots, foot_lock),
               "nearest_candidate": play(1), "motion_matching_playback": play(retriever.refresh),
               "motion_matching": window_metrics(mm_pose, truth, norm, db, floor, (mm_pos, mm_dir) + troots, foot_lock,
                                                 mm_contacts)}
    if model.use_retrieval:
        fr_base["random_candidates"] = run(model, True, randomised)
    if base_model is not None:
        fr_base["no_retrieval_model"] = run(base_model, False, unit=trained_unit_6d(base_meta),
                                            velocities=trained_rebuilt_velocities(base_meta))
    fr_with, fr_without = run(model, True, own), run(model, False)
    fr_truth = window_metrics(truth, truth, norm, db, floor, troots + troots, foot_lock, source.contacts[true_rows] > 0.5)
    fr = _regime(fr_with, fr_without, fr_base, fr_truth, groups, seed)
    fr["horizons"] = horizon_table(fr_with, {"without": fr_without, **fr_base}, frames, seed, groups)
    fr["frame_joint_error_cm"] = {name: m["_frame_joint_error_cm"].mean(0).tolist()
                                  for name, m in {"with": fr_with, "without": fr_without, **fr_base}.items()}
    fr["per_clip"] = _per_clip(source, groups, {"with": fr_with, "without": fr_without, **fr_base}, fr_truth)
    if oracle and model.use_retrieval:
        odb = oracle_database(meta, clips, db)
        fr_oracle = run(model, True, Retriever.for_checkpoint(odb, norm, meta), exclude=None)
        mm_oracle = window_metrics(matching_rollout(odb, source, starts, context, frames, None, planted=plant)[0],
                                   truth, norm, db, floor)
        fr["oracle"] = oracle_summary(fr_with, fr_oracle, mm_oracle, frames, groups, seed)
    out = {"checkpoint": portable_path(checkpoint), "database": db.fingerprint, "fps": float(db.fps),
           "clips": [portable_path(c) for c in clips],
           "windows": int(len(starts)), "mirrored": mirror, "context": context, "frames": int(frames), "stride": stride,
           "skate_height_m": floor, "rigid": rigid, "foot_lock": foot_lock, "planted": planted, "teacher_forced": tf, "free_running": fr}
    if stability_frames:
        out["stability"] = stability(model, retriever, source, db, stability_frames, context, exclude, rigid=rigid,
                                     planted=plant, unit=unit, velocities=velocities)
    if scenarios is not None:
        from kinema.control.retrieval.scenarios import (
            database_feet_down_share,
            database_stride_ratio,
            database_support_height,
            run_scenarios,
        )
        from kinema.matching.database import upright_mask
        names = list(scenarios) or None
        # searches restricted to the rows that stay on their feet, as in the demos (None for
        # databases where every row, or none, does)
        mask = upright_mask(db)
        ctl = RetrievalController(checkpoint, db, rigid=rigid, planted=planted, search_mask=mask)
        out["scenarios"] = run_scenarios(ctl, names, scenario_frames)
        # motion matching as a user runs it (the inertialized controller: its springs,
        # searches, root pull and clamp, the same search mask and foot lock) on the same
        # sticks; before session 32 this was bare playback, which skated more
        from kinema.control.retrieval.scenarios import run_crowd

        def matching(**kw) -> MotionMatchingController:
            return MotionMatchingController(db, search_mask=mask, **kw)

        mm = matching_runtime(db, matching, names, scenario_frames)
        out["scenarios_motion_matching"] = mm["scenarios"]
        out["scenarios_upright_search"] = mask is not None
        # a crowd on wandering sticks (kinema demo crowd's): does anyone lie down or sink?
        crowd, seeds = evaluation_crowd(checkpoint, db, "retrieval", rigid=rigid, planted=planted, search_mask=mask)
        out["crowd"] = run_crowd(crowd, seeds, CROWD_FRAMES)
        out["crowd_motion_matching"] = mm["crowd"]
        out["database_stride_ratio"] = database_stride_ratio(db)
        out["database_feet_down_share"] = database_feet_down_share(db)
        out["database_support_height_m"] = database_support_height(db)
    return out


def oracle_database(meta: dict, clips: Sequence[str | Path], db: Database) -> Database:
    """The checkpoint's training clips and the evaluated ``clips`` in one database (with the
    training's mirroring): the exact future of every evaluation window is retrievable."""
    from kinema.control.retrieval.training import build_clips, split_clips
    from kinema.matching.database import expand_paths

    cfg = meta["config"]
    train = split_clips(cfg)[0]
    known = {p.stem for p in train}
    extra = [p for p in expand_paths([Path(c) for c in clips]) if p.stem not in known]
    return build_clips(train + extra, db.config, bool(cfg["data"].get("mirror", True)), like=db)


def oracle_summary(with_m: dict, oracle_m: dict, mm_oracle: dict, frames: int, groups: np.ndarray,
                   seed: int = 0) -> dict:
    """Joint error (cm, over the first h frames for h in HORIZONS) of the model with its
    database (``with``), with the oracle database (``oracle``, :func:`oracle_database`) and
    of motion matching with the oracle database (``motion_matching``: near 0, it finds the
    exact rows); ``drop_ci95`` the paired interval of ``with - oracle``, and ``uptake`` the
    share of the way from ``with`` to motion matching's oracle error that the oracle
    candidates take the model: about 0 for a model that ignores what they carry (however
    much it loses without them), 1 for one that follows exact candidates like motion
    matching; None at a horizon where motion matching's oracle error is not at least 10%
    below the model's (short clips whose ends motion matching may not retrieve)."""
    hs = [h for h in HORIZONS if h <= frames] or [frames]
    err = {"with": with_m["_frame_joint_error_cm"], "oracle": oracle_m["_frame_joint_error_cm"],
           "motion_matching": mm_oracle["_frame_joint_error_cm"]}
    table = {name: [float(e[:, :h].mean()) for h in hs] for name, e in err.items()}
    # undefined (None) where motion matching's oracle error is not clearly below the model's:
    # the database then holds no better future than the model already draws
    uptake = [(w - o) / (w - m) if w - m > 0.1 * w else None
              for w, o, m in zip(table["with"], table["oracle"], table["motion_matching"])]
    drop = [grouped_bootstrap_ci(err["with"][:, :h].mean(1) - err["oracle"][:, :h].mean(1), groups, seed=seed)
            for h in hs]
    return {"frames": hs, "joint_error_cm": table, "drop_ci95": drop, "uptake": uptake}


CROWD_COUNT, CROWD_FRAMES = 64, 600   # the scenarios' crowd: 64 characters for 10 s


def evaluation_crowd(checkpoint: str | Path, db: Database, mode: str = "retrieval", seed: int = 0,
                     rigid: bool = True, planted: bool | None = None, search_mask: np.ndarray | None = None):
    """(crowd, stick seeds (N, 4)): the evaluation's crowd of :data:`CROWD_COUNT` characters
    (a :class:`~kinema.control.retrieval.controller.RetrievalCrowd` in ``mode``, phases
    staggered over the refresh interval) at the start rows and sticks
    :func:`~kinema.control.retrieval.scenarios.crowd_starts` draws with ``seed`` (0: the
    evaluation's draw), for :func:`~kinema.control.retrieval.scenarios.run_crowd`."""
    from kinema.control.retrieval.controller import RetrievalCrowd
    from kinema.control.retrieval.scenarios import crowd_starts

    seeds, rows = crowd_starts(db, CROWD_COUNT, seed)
    crowd = RetrievalCrowd(checkpoint, db, CROWD_COUNT, start_row=rows, mode=mode, rigid=rigid, planted=planted,
                           phase=np.arange(CROWD_COUNT) % 6, search_mask=search_mask)
    return crowd, seeds


def matching_runtime(db: Database, make, names: Sequence[str] | None = None, scenario_frames: int = 3600) -> dict:
    """A motion-matching recipe through the evaluation's runtime checks: ``scenarios`` (the
    scripted sticks ``names``, None: all, :func:`~kinema.control.retrieval.scenarios.run_scenarios`)
    and ``crowd`` (:data:`CROWD_COUNT` characters on :func:`evaluation_crowd`'s draw for
    :data:`CROWD_FRAMES` frames), each driven through
    :class:`~kinema.control.retrieval.matching_driver.MatchingDriver`; ``make(start_frame=,
    batch=)`` builds the controller (plain motion matching, or a subclass that picks its own
    transitions)."""
    from kinema.control.retrieval.matching_driver import MatchingDriver
    from kinema.control.retrieval.scenarios import crowd_starts, run_crowd, run_scenarios

    seeds, rows = crowd_starts(db, CROWD_COUNT, 0)   # evaluation_crowd's draw
    return {"scenarios": run_scenarios(MatchingDriver(make, db), names, scenario_frames),
            "crowd": run_crowd(MatchingDriver(make, db, CROWD_COUNT, rows), seeds, CROWD_FRAMES)}


def ground_truth_summary(truth: dict[str, np.ndarray]) -> dict[str, float]:
    """The truth's own figures on the evaluated windows: its foot skating under the same
    detector, its motion energy, and ``frechet_split_half``, the Fréchet distance of one
    half of its windows (even) to the other (odd): the floor any method's ``frechet`` is
    read against (with one window, its two halves in time)."""
    feats = truth["_motion_features"]
    d = feats.shape[-1]
    if len(feats) >= 2:
        a, b = feats[0::2].reshape(-1, d), feats[1::2].reshape(-1, d)
    else:
        half = feats.shape[1] // 2
        a, b = feats[0, :half], feats[0, half:]
    out = {k: float(np.mean(truth[k])) for k in ("foot_skate_cm_s", "foot_skate_locked_cm_s", "joint_speed_ratio")
           if k in truth}
    if "_motion_features" in truth:
        out["frechet_split_half"] = frechet(a, b, feats.reshape(-1, d), groups=2)
    return out


def _per_clip(source: Database, groups: np.ndarray, methods: dict[str, dict], truth: dict) -> dict:
    """Summaries of every method on each take's windows (a mirror counted with its take)."""
    out = {}
    for g in np.unique(groups):
        sel = groups == g
        t = select(truth, sel)
        out[source.clip_names[int(g)]] = {"windows": int(sel.sum()), "ground_truth": ground_truth_summary(t),
                                          **{k: summary(select(m, sel), t) for k, m in methods.items()}}
    return out


def _regime(with_m: dict, without_m: dict, base: dict, truth: dict, groups: np.ndarray, seed: int) -> dict:
    gain = without_m["loss"] - with_m["loss"]
    mean_without = float(np.mean(without_m["loss"]))
    out = {"with": summary(with_m, truth), "without": summary(without_m, truth), "gain": float(np.mean(gain)),
           "gain_ci95": grouped_bootstrap_ci(gain, groups, seed=seed),
           "gain_relative": float(np.mean(gain)) / max(mean_without, 1e-12),
           "gain_per_window": gain.tolist(), "baselines": {k: summary(v, truth) for k, v in base.items()},
           "ground_truth": ground_truth_summary(truth)}
    twin = base.get("no_retrieval_model")
    if twin is not None:
        # the headline gain: against a separately trained model of the same recipe without
        # retrieval (the null token of the same model is an ablation the model may never
        # have learned to use well)
        diff = twin["loss"] - with_m["loss"]
        out["gain_vs_twin"] = float(np.mean(diff)) / max(float(np.mean(twin["loss"])), 1e-12)
        out["gain_vs_twin_ci95"] = grouped_bootstrap_ci(diff, groups, seed=seed)
    return out
