"""Metrics of predicted motion against the truth, per window (NOTES.md 3.4 and 3.5).

Every metric here is chosen so that a useless controller cannot win it alone: joint error
rewards hedging (a frozen or damped pose lowers it past 0.5 s), so it is always reported
beside motion energy (``joint_speed_ratio``, ``accel_ratio``, ``energy_window_fraction``:
a frozen pose scores 0 and fails the energy gate), contacts (``foot_skate_cm_s``), the
distribution of poses and velocities (``frechet``: a still or averaged pose has the wrong
velocity covariance) and, for joystick control, the root against the requested path.

Inputs are raw pose vectors of a :class:`~kinema.matching.database.Database` layout
(:func:`kinema.matching.database.pose_layout`): root-space joint positions in metres,
root-space joint rotations in 6D, joint velocities, root motion. Frame rate: ``db.fps``.
"""
from __future__ import annotations

import numpy as np

from kinema.control.footlock import FootLock
from kinema.control.planted import plant_weights
from kinema.features.normalisation import Normaliser
from kinema.features.root import yaw_quaternions, yaw_rotate
from kinema.matching.database import Database
from kinema.maths import quat

DIVERGED_CM = 20.0
NPSS_WINDOW = 60
ENERGY_BAND = (0.8, 1.25)   # joint-speed ratio of a window that moves like the actor
# the motion-energy gate of a controller (its free-running summary): moves and accelerates
# like the actor on average, and in at least half of the windows
ENERGY_GATE = {"joint_speed_ratio": (0.9, 1.1), "accel_ratio": (0.8, 1.25), "energy_window_fraction": (0.5, np.inf)}


def bootstrap_ci(values: np.ndarray, n: int = 2000, seed: int = 0) -> list[float]:
    """95% percentile-bootstrap interval of the mean of ``values`` (W,)."""
    values = np.asarray(values, np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (n, len(values)))].mean(1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def grouped_bootstrap_ci(values: np.ndarray, groups: np.ndarray | None, n: int = 2000, seed: int = 0) -> list[float]:
    """95% interval of the mean of ``values`` (W,) from a two-stage bootstrap: resample
    whole groups (clips) with replacement, then windows within each drawn group. With one
    group (or ``groups`` None) it is :func:`bootstrap_ci` over windows.

    The interval then covers the variation between takes, not only between windows of the
    takes at hand (windows of one take are correlated)."""
    values = np.asarray(values, np.float64)
    if groups is None or len(np.unique(groups)) < 2:
        return bootstrap_ci(values, n, seed)
    members = [np.nonzero(groups == g)[0] for g in np.unique(groups)]
    rng = np.random.default_rng(seed)
    means = np.empty(n)
    for i in range(n):
        drawn = rng.integers(0, len(members), len(members))
        picked = [m[rng.integers(0, len(m), len(m))] for m in (members[d] for d in drawn)]
        means[i] = values[np.concatenate(picked)].mean()
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


def joint_acceleration(positions: np.ndarray, fps: float) -> np.ndarray:
    """Mean joint acceleration magnitude (W,) in cm/s^2 of positions (W, H, J, 3) in metres."""
    return np.linalg.norm(np.diff(positions, 2, axis=1), axis=-1).mean((1, 2)) * 100.0 * fps * fps


def mean_pose_distance_cm(db: Database, norm: Normaliser, positions: np.ndarray) -> np.ndarray:
    """Mean distance (W,) in cm of joint positions (W, H, J, 3) from the training mean pose."""
    return np.linalg.norm(positions - joint_positions(db, norm.mean), axis=-1).mean((1, 2)) * 100.0


def body_joints(db: Database) -> np.ndarray:
    """(J,) bool: the hips and the joints below them (not a root joint above the hips, such
    as Bandai-Namco's ``joint_Root`` on the floor)."""
    inside = np.zeros(db.num_joints, bool)
    inside[db.roles["hips"]] = True
    for j, p in enumerate(db.parents):   # parents come before their children
        if p >= 0 and inside[p]:
            inside[j] = True
    return inside


def motion_features(positions: np.ndarray, fps: float) -> np.ndarray:
    """Per-frame [character-space joint positions, joint velocities] (W, H-1, 6J) of
    positions (W, H, J, 3) in metres (velocities in m/s, by forward differences): the
    space in which :func:`frechet` compares the distributions of two motions. Pass the
    body's joints only (:func:`body_joints`): a joint above the hips, such as
    Bandai-Namco's ``joint_Root`` left at the world origin, is the world origin seen from
    the character, metres away, and its spread set the scale of every joint's (protocol,
    session 46: motion matching's 151 on Bandai-Namco, 0.4 on the body)."""
    vel = np.diff(positions, axis=1) * fps
    w, h = vel.shape[:2]
    return np.concatenate([positions[:, 1:].reshape(w, h, -1), vel.reshape(w, h, -1)], -1)


def frechet(a: np.ndarray, b: np.ndarray, reference: np.ndarray | None = None, groups: int = 1) -> float:
    """Fréchet distance between Gaussians fitted to the rows of ``a`` (N, D) and ``b``
    (M, D), after standardising both with the mean of ``reference`` (default ``b``, the
    truth) and one scale per group (``groups`` equal blocks of columns, e.g. 2 for
    [positions, velocities]: the mean standard deviation of the block, so a centimetre
    counts the same on every joint and a nearly constant dimension (the hips in root
    space) does not turn a millimetre into a large distance):
    ``|mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2)``.

    The matrix square root goes through the symmetric form ``S_a^1/2 S_b S_a^1/2`` (whose
    eigenvalues are those of ``S_a S_b``) with ``eigh``, which stays real and stable where a
    general ``sqrtm`` of ``S_a S_b`` returns complex round-off."""
    ref = b if reference is None else reference
    mean = ref.mean(0)
    std = np.concatenate([np.full(blk.shape[1], max(float(blk.std(0).mean()), 1e-6))
                          for blk in np.array_split(np.asarray(ref, np.float64), groups, axis=1)])
    a = (np.asarray(a, np.float64) - mean) / std
    b = (np.asarray(b, np.float64) - mean) / std
    ma, mb = a.mean(0), b.mean(0)
    sa, sb = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    ea, va = np.linalg.eigh(sa)
    root_a = (va * np.sqrt(np.clip(ea, 0, None))) @ va.T
    inner = np.linalg.eigvalsh(root_a @ sb @ root_a)
    cross = np.sqrt(np.clip(inner, 0, None)).sum()
    return float(((ma - mb) ** 2).sum() + np.trace(sa) + np.trace(sb) - 2.0 * cross)


def world_positions(local: np.ndarray, root_pos: np.ndarray, root_dir: np.ndarray) -> np.ndarray:
    """World positions (W, H, J, 3) of root-space positions (W, H, J, 3) placed at roots
    (W, H, 3) facing the floor directions (W, H, 3)."""
    return yaw_rotate(root_dir[:, :, None], local) + root_pos[:, :, None]


def floor_height(db: Database) -> float:
    """Toe height (m) at or below which a toe counts fully as on the floor for
    :func:`foot_skate`: 2.5 cm above the database's 5th-percentile toe height."""
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    return float(np.percentile(joint_positions(db, db.pose)[:, toes, 1], 5)) + 0.025


def foot_skate(world_toes: np.ndarray, floor: float, fps: float) -> np.ndarray:
    """Foot skating (W,) in cm/s of world toe positions (W, H, T, 3): each toe's horizontal
    speed weighted by how much it is on the floor (:func:`kinema.control.planted.plant_weights`:
    1 at or below ``floor`` metres, fading to 0 over the 2 cm above it, the weights the
    runtime's planted-foot rule and the training's skating term use), averaged over every
    frame and toe. Before session 33 it was the mean speed over the frames below ``floor``
    only, which a few fast frames could decide and which toes resting just above the floor
    escaped entirely."""
    speed = np.linalg.norm(np.diff(world_toes[..., [0, 2]], axis=1), axis=-1) * fps * 100.0   # (W, H-1, T)
    return (speed * plant_weights(world_toes[:, 1:, :, 1], floor)).mean((1, 2))


def locked_world_toes(db: Database, poses: np.ndarray, root_pos: np.ndarray, root_dir: np.ndarray,
                      contacts: np.ndarray | None = None) -> np.ndarray:
    """World toe positions (W, H, 2, 3) of raw pose vectors (W, H, P) placed at roots (W, H, 3)
    after the runtime's foot lock (:class:`~kinema.control.footlock.FootLock`, with its
    defaults, fresh per window), applied the same way to every method. ``contacts`` (W, H, 2)
    bool are the toe contact labels the method's runtime reads (a network's predicted
    contacts, a database row's labels); None detects them causally from the drawn motion
    with the database's contact test (backward-difference toe speed below
    ``config.contact_speed`` m/s, and height below ``config.contact_height`` when set)."""
    roles, cfg, fps = db.roles, db.config, db.fps
    toes = [roles["left_toe"], roles["right_toe"]]
    pw = world_positions(joint_positions(db, poses).astype(np.float64), root_pos, root_dir)   # (W, H, J, 3)
    if contacts is not None:
        contact = np.asarray(contacts, bool)
    else:
        speed = np.linalg.norm(np.diff(pw[:, :, toes], axis=1, prepend=pw[:, :1, toes]), axis=-1) * fps
        contact = speed < cfg.contact_speed
        contact[:, 0] = False   # no speed yet on a window's first frame
        if cfg.contact_height is not None:
            contact &= pw[:, :, toes, 1] < cfg.contact_height
    local = poses[..., pose_slice(db, "joint_rotations_6d")].reshape(poses.shape[:2] + (db.num_joints, 6))
    rot = quat.mul(yaw_quaternions(root_dir)[:, :, None], quat.from_6d(local.astype(np.float64)))   # (W, H, J, 4)
    out = np.empty(pw.shape[:2] + (2, 3))
    for w in range(len(poses)):
        lock = FootLock.for_roles(db.parents, roles)
        for h in range(poses.shape[1]):
            _, pos = lock.apply(rot[w, h], pw[w, h], contact[w, h], 1.0 / fps)
            out[w, h] = pos[toes]
    return out


def window_metrics(pred: np.ndarray, true: np.ndarray, norm: Normaliser, db: Database,
                   floor: float, roots: tuple[np.ndarray, ...] | None = None, foot_lock: bool = False,
                   contacts: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-window metrics (each (W,)) of raw pose vectors (W, H, P) against the truth;
    ``roots`` = (pred pos, pred dir, true pos, true dir) (W, H, 3) for the free-running
    metrics (root, heading, skating, world joint error; with ``foot_lock`` also
    ``foot_skate_locked_cm_s``, the skating left after :func:`locked_world_toes` on the toe
    ``contacts`` (W, H, 2) given, or detected). Keys starting with ``_`` hold
    per-frame arrays for the caller (curves, distributions), not summaries."""
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
    if pred.shape[1] >= 3:
        out["accel_ratio"] = joint_acceleration(pj, db.fps) / np.maximum(joint_acceleration(tj, db.fps), 1e-9)
    out["mean_pose_collapse_cm"] = mean_pose_distance_cm(db, norm, tj) - mean_pose_distance_cm(db, norm, pj)
    # NPSS of joint positions: on rotations a still pose keeps a high-power static spectrum
    # that matches the truth's and scores better than a moving controller
    flat = lambda x: x.reshape(*x.shape[:2], -1)  # noqa: E731
    out["npss"] = np.array([npss_windows(flat(pj[w]), flat(tj[w])) for w in range(len(pred))])
    out["_motion_features"] = motion_features(pj[:, :, body_joints(db)], db.fps)
    if roots is not None:
        rp, rd, tp, td = roots
        out["root_error_m"] = np.linalg.norm((rp - tp)[..., [0, 2]], axis=-1).mean(1)
        cosang = np.clip((rd * td).sum(-1), -1, 1)
        out["heading_error_deg"] = np.degrees(np.arccos(cosang)).mean(1)
        pw, tw = world_positions(pj, rp, rd), world_positions(tj, tp, td)
        out["world_joint_error_cm"] = np.linalg.norm(pw - tw, axis=-1).mean((1, 2)) * 100.0
        toes = [db.roles["left_toe"], db.roles["right_toe"]]
        out["foot_skate_cm_s"] = foot_skate(pw[:, :, toes], floor, db.fps)
        if foot_lock:
            locked = locked_world_toes(db, pred, rp, rd, contacts)
            out["foot_skate_locked_cm_s"] = foot_skate(locked, floor, db.fps)
    return out


def summary(metrics: dict[str, np.ndarray], truth: dict[str, np.ndarray] | None = None) -> dict[str, float]:
    """Means of the per-window metrics, plus ``energy_window_fraction`` (share of windows
    whose joint-speed ratio lies in :data:`ENERGY_BAND`) and, given the truth's metrics of
    the same windows, ``frechet`` (:func:`frechet` of the per-frame motion features)."""
    out = {k: float(np.nanmean(v)) for k, v in metrics.items() if not k.startswith("_")}
    ratio = metrics["joint_speed_ratio"]
    out["energy_window_fraction"] = float(np.mean((ratio >= ENERGY_BAND[0]) & (ratio <= ENERGY_BAND[1])))
    if truth is not None:
        d = metrics["_motion_features"].shape[-1]
        out["frechet"] = frechet(metrics["_motion_features"].reshape(-1, d), truth["_motion_features"].reshape(-1, d),
                                 groups=2)
    return out


def energy_gate(summary_: dict[str, float]) -> bool:
    """Whether a method's summary passes :data:`ENERGY_GATE` (a frozen, damped or
    averaging controller does not, whatever its joint error)."""
    return all(lo <= summary_[k] <= hi for k, (lo, hi) in ENERGY_GATE.items())


def select(metrics: dict[str, np.ndarray], windows: np.ndarray) -> dict[str, np.ndarray]:
    """The per-window metrics of a subset of windows (index array or boolean mask)."""
    return {k: v[windows] for k, v in metrics.items()}
