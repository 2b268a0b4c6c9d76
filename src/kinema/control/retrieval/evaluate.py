"""Evaluation of a retrieval controller checkpoint on held-out clips (NOTES.md 3.4).

Windows start every ``stride`` frames of each clip: ``context`` ground-truth frames warm the
state, then ``frames`` frames are predicted

- **teacher forced**: every input pose is the ground truth, candidates come from the
  ground-truth queries (refreshed every ``refresh`` frames, advancing in between);
- **free running**: :func:`kinema.control.retrieval.rollout.rollout`: predictions fed back,
  joystick re-expressed relative to the predicted root, retrieval from the predicted state.

Each regime is run with the retrieved candidates (``with``) and with only the learned null
token (``without``) on the same model; the retrieval gain is ``loss(without) -
loss(with)`` per window (loss: MSE of the normalised pose vector, the training loss), with
a 95% percentile-bootstrap interval over windows. Metrics: character-space joint position
error (cm), foot skating (horizontal toe speed while the toe is within 2.5 cm of the
floor, cm/s), root position (m) and heading (degrees) error against the clip's root, NPSS
of the root-space joint rotations (6D) over 60-frame chunks, divergence rate (share of
windows whose per-frame joint error exceeds 20 cm), motion energy (``joint_speed_ratio``: the
prediction's mean character-space joint speed over the truth's; 1 moves as much as the
actor, the frozen pose 0) and collapse toward the average pose (``mean_pose_collapse_cm``:
how much nearer the training mean pose the prediction is than the truth, in cm; 0: as
far from it as the actor), the joint error over the first 15, 30, 60,
120 and 300 frames with paired bootstrap intervals against every baseline, the mean joint
error of every predicted frame (``free_running.frame_joint_error_cm``, the curves that
:mod:`kinema.control.retrieval.plot` draws), and optionally a
stability run (20-s rollouts: finite, error not growing). Baselines: copying the previous pose, the nearest
candidate's successor (search every frame), motion-matching playback (search every
``refresh`` frames, play successors; no inertialization), the same model fed random
database rows as candidates (control), and optionally a model trained without retrieval.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from kinema.control.retrieval.rollout import playback_rollout, rollout, teacher_forced_candidates
from kinema.control.retrieval.sequences import PoseNormaliser, RandomRetriever, Retriever
from kinema.errors import KinemaError
from kinema.features.root import yaw_rotate
from kinema.matching.database import Database
from kinema.nn.checkpoint import load_checkpoint

DIVERGED_CM = 20.0
NPSS_WINDOW = 60
HORIZONS = (15, 30, 60, 120, 300)   # frames at 60 Hz (NOTES.md 3.4)


def bootstrap_ci(values: np.ndarray, n: int = 2000, seed: int = 0) -> list[float]:
    """95% percentile-bootstrap interval of the mean of ``values`` (W,)."""
    values = np.asarray(values, np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (n, len(values)))].mean(1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def npss(pred: np.ndarray, true: np.ndarray) -> float:
    """Normalised power spectrum similarity (LaFAN1's ``fast_npss``) of (B, T, D) arrays:
    EMD between the per-dimension cumulative power spectra (Re(FFT)^2), weighted by the
    true power."""
    tp = np.real(np.fft.fft(true, axis=1)) ** 2
    pp = np.real(np.fft.fft(pred, axis=1)) ** 2
    tn = tp / np.maximum(tp.sum(1, keepdims=True), 1e-12)
    pn = pp / np.maximum(pp.sum(1, keepdims=True), 1e-12)
    emd = np.abs(np.cumsum(tn, 1) - np.cumsum(pn, 1)).sum(1)          # (B, D)
    w = tp.sum(1)
    return float((emd * w).sum() / max(w.sum(), 1e-12))


def npss_windows(pred: np.ndarray, true: np.ndarray, window: int = NPSS_WINDOW) -> float:
    """NPSS of (T, D) sequences over consecutive ``window``-frame chunks (NOTES.md 3.4),
    so the value does not grow with the rollout length; the whole sequence when shorter."""
    n = max(1, len(pred) // window)
    size = window if len(pred) >= window else len(pred)
    p = pred[:n * size].reshape(n, size, -1)
    t = true[:n * size].reshape(n, size, -1)
    return npss(p, t)


def pose_slice(db: Database, name: str) -> slice:
    """The columns of pose segment ``name`` (see :func:`kinema.matching.database.pose_layout`)."""
    a, b = {n: (a, b) for n, a, b in db.pose_layout}[name]
    return slice(a, b)


def joint_positions(db: Database, poses: np.ndarray) -> np.ndarray:
    """Root-space joint positions (..., J, 3) of raw pose vectors (..., P)."""
    return poses[..., pose_slice(db, "joint_positions")].reshape(*poses.shape[:-1], db.num_joints, 3)


def joint_speed(positions: np.ndarray, fps: float) -> np.ndarray:
    """Mean joint speed (W,) in cm/s of root-space joint positions (W, H, J, 3) in metres."""
    return np.linalg.norm(np.diff(positions, axis=1), axis=-1).mean((1, 2)) * 100.0 * fps


def mean_pose_distance_cm(db: Database, norm: PoseNormaliser, positions: np.ndarray) -> np.ndarray:
    """Mean distance (W,) in cm of joint positions (W, H, J, 3) from the training mean pose."""
    return np.linalg.norm(positions - joint_positions(db, norm.mean), axis=-1).mean((1, 2)) * 100.0


def window_metrics(pred: np.ndarray, true: np.ndarray, norm: PoseNormaliser, db: Database,
                   floor: float, roots: tuple[np.ndarray, ...] | None = None) -> dict[str, np.ndarray]:
    """Per-window metrics (each (W,)) of raw pose vectors (W, H, P) against the truth;
    ``roots`` = (pred pos, pred dir, true pos, true dir) (W, H, 3) for the free-running
    metrics."""
    pn, tn = norm.normalise(pred), norm.normalise(true)
    out = {"loss": ((pn - tn) ** 2).mean((1, 2))}
    pj, tj = joint_positions(db, pred), joint_positions(db, true)
    err = np.linalg.norm(pj - tj, axis=-1) * 100.0                                          # (W, H, J) cm
    out["joint_error_cm"] = err.mean((1, 2))
    out["_frame_joint_error_cm"] = err.mean(2)                                              # (W, H)
    out["joint_error_max_cm"] = err.mean(2).max(1)
    out["diverged_rate"] = (~(err.mean(2).max(1) <= DIVERGED_CM)).astype(np.float64)
    # Motion energy and collapse toward the training mean pose: a predictor that hedges
    # (moves less than the actor, or drifts to the average pose) lowers joint error without
    # animating better, so both are reported next to it.
    out["joint_speed_ratio"] = joint_speed(pj, db.fps) / np.maximum(joint_speed(tj, db.fps), 1e-9)
    out["mean_pose_collapse_cm"] = mean_pose_distance_cm(db, norm, tj) - mean_pose_distance_cm(db, norm, pj)
    rot = pose_slice(db, "joint_rotations_6d")
    out["npss"] = np.array([npss_windows(pred[w, :, rot], true[w, :, rot]) for w in range(len(pred))])
    if roots is not None:
        rp, rd, tp, td = roots
        out["root_error_m"] = np.linalg.norm((rp - tp)[..., [0, 2]], axis=-1).mean(1)
        cosang = np.clip((rd * td).sum(-1), -1, 1)
        out["heading_error_deg"] = np.degrees(np.arccos(cosang)).mean(1)
        toes = [db.roles["left_toe"], db.roles["right_toe"]]
        local = pj[:, :, toes]                                     # (W, H, 2, 3)
        world = yaw_rotate(rd[:, :, None], local) + rp[:, :, None]
        speed = np.linalg.norm(np.diff(world[..., [0, 2]], axis=1), axis=-1) * db.fps * 100.0   # (W, H-1, 2)
        low = local[:, 1:, :, 1] < floor
        out["foot_skate_cm_s"] = np.array([speed[w][low[w]].mean() if low[w].any() else 0.0 for w in range(len(pred))])
    return out


def _summary(metrics: dict[str, np.ndarray]) -> dict[str, float]:
    return {k: float(np.nanmean(v)) for k, v in metrics.items() if not k.startswith("_")}


def horizon_table(with_m: dict, others: dict[str, dict], frames: int, seed: int = 0) -> dict:
    """Joint error (cm) averaged over the first h frames for h in HORIZONS (<= ``frames``),
    for the model (``with``) and each of ``others``; and, per other method, the 95% paired
    bootstrap interval (over windows) of ``other - model`` (above 0: the model is better)."""
    hs = [h for h in HORIZONS if h <= frames] or [frames]
    err = {"with": with_m["_frame_joint_error_cm"], **{k: v["_frame_joint_error_cm"] for k, v in others.items()}}
    table = {name: [float(e[:, :h].mean()) for h in hs] for name, e in err.items()}
    diff = {name: [bootstrap_ci(e[:, :h].mean(1) - err["with"][:, :h].mean(1), seed=seed) for h in hs]
            for name, e in err.items() if name != "with"}
    return {"frames": hs, "joint_error_cm": table, "other_minus_model_ci95": diff}


@torch.no_grad()
def stability(model, retriever: Retriever, source: Database, db: Database, frames: int, context: int,
              exclude: np.ndarray | None, windows: int = 4) -> dict:
    """Long free-running rollouts (``frames`` frames, e.g. 1200 = 20 s) from up to
    ``windows`` starts spread over the clips: whether every output is finite, the largest
    per-frame joint error, and the mean joint error of the first and the last 300 frames
    (no growth = no divergence). Empty when no clip is long enough."""
    starts = window_starts(source, context + frames + 1, 1)
    if len(starts) == 0:
        return {"frames": frames, "windows": 0}
    starts = starts[np.linspace(0, len(starts) - 1, min(windows, len(starts))).astype(int)]
    r = rollout(model, retriever, source, starts, context, frames, exclude=exclude)
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
            idx, _ = retriever.search(db.normalize(source.raw_features[rows[:, t]]), exclude)
            best, since = idx[:, 0], 0
        since += 1
        out[:, t] = db.pose[db.successor(best, since)]
    return out


def evaluate(checkpoint: str | Path, db: str | Path | Database, clips: Sequence[str | Path], *, frames: int = 300,
             context: int = 32, stride: int = 120, baseline: str | Path | None = None, max_windows: int | None = None,
             mirror: bool = False, seed: int = 0, stability_frames: int = 0, random_rows: bool = False) -> dict:
    """Evaluate ``checkpoint`` on ``clips`` with retrieval from ``db`` (see module docstring).

    ``frames`` is shortened to what the longest clip allows (reported as ``frames``);
    ``mirror`` also evaluates the mirrored clips (more windows from few clips);
    ``random_rows`` feeds the model uniformly random rows as its candidates (for a model
    trained that way: the control of the ablations).
    """
    model, meta = load_checkpoint(checkpoint)
    db_path = db if not isinstance(db, Database) else "<database>"
    db = db if isinstance(db, Database) else open_database(db, meta)
    check_fingerprint(meta, db, db_path)
    norm = PoseNormaliser.from_json(meta["normalisation"]["pose"])
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
    own = db.clip_ids(source.clip_names)
    exclude = np.broadcast_to(own, (len(starts), len(own))) if len(own) else None
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    floor = float(np.percentile(joint_positions(db, db.pose)[:, toes, 1], 5)) + 0.025
    base_model = None
    if baseline is not None:
        base_model, base_meta = load_checkpoint(baseline)
        check_fingerprint(base_meta, db, db_path)

    # Teacher forced: the windows' predicted part (after the context) is scored.
    length = context + frames
    rows = starts[:, None] + np.arange(length)[None]
    true_tf = source.pose[rows + 1][:, context:]
    sl = slice(context, None)
    tf = {}
    own = randomised if random_rows else retriever
    tf_with = window_metrics(teacher_forced(model, own, source, starts, length, exclude, True)[:, sl], true_tf, norm, db, floor)
    tf_without = window_metrics(teacher_forced(model, retriever, source, starts, length, exclude, False)[:, sl], true_tf, norm, db, floor)
    tf_base = {
        "copy_previous": window_metrics(source.pose[rows][:, context:], true_tf, norm, db, floor),
        "nearest_candidate": window_metrics(_nearest_tf(retriever, source, rows, exclude, 1)[:, sl], true_tf, norm, db, floor),
        "motion_matching": window_metrics(_nearest_tf(retriever, source, rows, exclude, retriever.refresh)[:, sl], true_tf, norm, db, floor),
    }
    if model.use_retrieval:
        tf_base["random_candidates"] = window_metrics(
            teacher_forced(model, randomised, source, starts, length, exclude, True)[:, sl], true_tf, norm, db, floor)
    if base_model is not None:
        tf_base["no_retrieval_model"] = window_metrics(
            teacher_forced(base_model, retriever, source, starts, length, exclude, False)[:, sl], true_tf, norm, db, floor)
    tf = _regime(tf_with, tf_without, tf_base, seed)

    # Free running.
    def run(m, use, retr=retriever):
        with torch.no_grad():
            r = rollout(m, retr, source, starts, context, frames, retrieval=use, exclude=exclude)
        pred = norm.denormalise(r.pose.numpy())
        return window_metrics(pred, source.pose[r.rows], norm, db, floor, (r.root_pos, r.root_dir, r.true_pos, r.true_dir))

    true_rows = (starts + context)[:, None] + np.arange(frames)[None]
    truth = source.pose[true_rows]
    troots = (source.root_positions[true_rows], source.root_directions[true_rows])

    def play(every):
        p, rp, rd = playback_rollout(retriever, source, starts, context, frames, every, exclude)
        return window_metrics(p, truth, norm, db, floor, (rp, rd) + troots)

    frozen = np.repeat(source.pose[starts + context - 1][:, None], frames, 1)
    fpos = np.repeat(source.root_positions[starts + context - 1][:, None], frames, 1)
    fdir = np.repeat(source.root_directions[starts + context - 1][:, None], frames, 1)
    fr_base = {"copy_previous": window_metrics(frozen, truth, norm, db, floor, (fpos, fdir) + troots),
               "nearest_candidate": play(1), "motion_matching": play(retriever.refresh)}
    if model.use_retrieval:
        fr_base["random_candidates"] = run(model, True, randomised)
    if base_model is not None:
        fr_base["no_retrieval_model"] = run(base_model, False)
    fr_with, fr_without = run(model, True, own), run(model, False)
    fr = _regime(fr_with, fr_without, fr_base, seed)
    fr["horizons"] = horizon_table(fr_with, {"without": fr_without, **fr_base}, frames, seed)
    fr["frame_joint_error_cm"] = {name: m["_frame_joint_error_cm"].mean(0).tolist()
                                  for name, m in {"with": fr_with, "without": fr_without, **fr_base}.items()}
    out = {"checkpoint": str(checkpoint), "database": db.fingerprint, "fps": float(db.fps),
           "clips": [str(c) for c in clips],
           "windows": int(len(starts)), "mirrored": mirror, "context": context, "frames": int(frames), "stride": stride,
           "skate_height_m": floor, "teacher_forced": tf, "free_running": fr}
    if stability_frames:
        out["stability"] = stability(model, retriever, source, db, stability_frames, context, exclude)
    return out


def _regime(with_m: dict, without_m: dict, base: dict, seed: int) -> dict:
    gain = without_m["loss"] - with_m["loss"]
    mean_without = float(np.mean(without_m["loss"]))
    return {"with": _summary(with_m), "without": _summary(without_m), "gain": float(np.mean(gain)),
            "gain_ci95": bootstrap_ci(gain, seed=seed), "gain_relative": float(np.mean(gain)) / max(mean_without, 1e-12),
            "gain_per_window": gain.tolist(), "baselines": {k: _summary(v) for k, v in base.items()}}
