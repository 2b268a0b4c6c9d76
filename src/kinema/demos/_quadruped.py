"""A motion-matching controller for the MANN dog (Zhang et al. 2018): gait labels measured
from the footfall pattern, a small feature database, search restricted to the commanded
gait, inertialized transitions and live four-leg foot locking.

Gaits from footfalls: over a 1 s window the correlations of the four paws' heights tell
the gaits apart (front left/right ``LeftHand``/``RightHand``, hind ``LeftFoot``/``RightFoot``):

- trot: diagonal pairs move together (diagonal correlation high, lateral negative);
- pace: lateral pairs move together (lateral above diagonal);
- canter: both front paws together and both hind paws together (front and hind pair
  correlations positive; the MANN canter/gallop takes);
- walk: four separate beats (no pair strongly together).

Everything runs at 30 fps; metres, Y up, quaternions (w, x, y, z).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import kinema.io
from kinema.errors import KinemaError
from kinema.features.root import Root, RootConfig, compute_root, to_root_space, vectors_to_root_space
from kinema.ik.pose import solve_pose
from kinema.maths import angles, quat
from kinema.motion import kinematics

FPS = 30.0
PAWS = ("LeftHand", "RightHand", "LeftFoot", "RightFoot")      # front left, front right, hind left, hind right
GAITS = ("walk", "pace", "trot", "canter")
FUTURE = (10, 20, 30)                                         # trajectory samples, frames ahead
WINDOW = 15                                                   # half window of the gait measure, frames
MIN_RUN = 20                                                  # shortest gait segment kept, frames


def footfall_correlations(paw_heights: np.ndarray, half: int = WINDOW) -> np.ndarray:
    """(F, 4) windowed correlations ``(diagonal, lateral, front pair, hind pair)`` of paw
    heights (F, 4) over ``2 * half`` frames centred on each frame (NaN where a paw is still)."""
    h = np.asarray(paw_heights, np.float64)
    f = len(h)
    out = np.full((f, 4), np.nan)
    pairs = {"diag": [(0, 3), (1, 2)], "lat": [(0, 2), (1, 3)], "front": [(0, 1)], "hind": [(2, 3)]}
    for t in range(f):
        w = h[max(0, t - half):min(f, t + half)]
        if len(w) < half or (w.std(0) < 0.008).any():
            continue
        c = np.corrcoef(w.T)
        out[t] = [np.mean([c[a, b] for a, b in p]) for p in pairs.values()]
    return out


def classify_gait(corr: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """Gait index per frame (into ``GAITS``; -1 standing or unclear) from
    :func:`footfall_correlations` (F, 4) and root speed (F,) m/s."""
    diag, lat, front, hind = (corr[:, i] for i in range(4))
    label = np.full(len(corr), -1)
    moving = (speed > 0.3) & ~np.isnan(diag)
    label[moving] = 0
    label[moving & (lat > 0.1) & (lat - diag > 0.35)] = 1
    label[moving & (diag > 0.3) & (diag - lat > 0.35)] = 2
    label[moving & (front > 0.25) & (hind > 0.25) & (speed > 1.2)] = 3
    return label


def measure_gait(positions: np.ndarray, skeleton, fps: float = FPS) -> dict:
    """Footfall statistics of a pose sequence (F, J, 3): mean correlations, the majority gait
    and the speed, for checking what a controller produced."""
    paws = [skeleton.index(n) for n in PAWS]
    corr = footfall_correlations(positions[:, paws, 1], int(round(WINDOW * fps / FPS)))
    hips = positions[:, 0]
    speed = np.linalg.norm(np.diff(hips[:, [0, 2]], axis=0), axis=1) * fps
    speed = np.append(speed, speed[-1:])
    labels = classify_gait(corr, speed)
    valid = labels >= 0
    counts = np.bincount(labels[valid], minlength=len(GAITS))
    m = np.nanmean(corr, axis=0)
    return {"diagonal": float(m[0]), "lateral": float(m[1]), "front_pair": float(m[2]), "hind_pair": float(m[3]),
            "gait": GAITS[int(np.argmax(counts))] if valid.any() else "none",
            "gait_fractions": {g: float(c / max(valid.sum(), 1)) for g, c in zip(GAITS, counts)},
            "speed_m_s": float(np.mean(speed))}


def on_all_fours(paw_heights: np.ndarray, half: int = WINDOW, limit: float = 0.3) -> np.ndarray:
    """(F,) True where no paw rises above ``limit`` metres within ``half`` frames."""
    top = np.asarray(paw_heights).max(1)
    f = len(top)
    return np.array([top[max(0, t - half):t + half + 1].max() < limit for t in range(f)])


def drop_short_runs(labels: np.ndarray, min_len: int) -> np.ndarray:
    """Labels with every run shorter than ``min_len`` frames set to -1 (gait flickers)."""
    out = np.asarray(labels).copy()
    edges = np.nonzero(np.diff(out) != 0)[0] + 1
    for a, b in zip(np.r_[0, edges], np.r_[edges, len(out)]):
        if b - a < min_len:
            out[a:b] = -1
    return out


def run_remaining(labels: np.ndarray) -> np.ndarray:
    """(N,) frames left (this one included) in each frame's run of equal labels."""
    labels = np.asarray(labels)
    out = np.ones(len(labels), np.int64)
    for i in range(len(labels) - 2, -1, -1):
        if labels[i] == labels[i + 1]:
            out[i] = out[i + 1] + 1
    return out


def contacts(positions: np.ndarray, paws: list[int], fps: float = FPS) -> np.ndarray:
    """(F, 4) bool paw contacts: near the take's lowest paw height and slow."""
    h = positions[:, paws, 1]
    base = np.percentile(h, 3, axis=0)
    v = np.linalg.norm(np.gradient(positions[:, paws], axis=0), axis=-1) * fps
    return (h < base + 0.04) & (v < 0.5)


@dataclass
class Database:
    """Frames of the dog takes with their matching features.

    Attributes:
        skeleton: the BVH skeleton. rotations: (N, J, 4) local rotations (the hips' in root
            space). offsets: (N, J, 3) local translations (bone offsets of the frame's take).
        hips: (N, 3) hips position in root space. root_delta: (N, 3) root-space root
            displacement to the next frame; yaw_delta: (N,) root yaw change to the next frame.
        features: (N, D) normalised features; gait: (N,) labels; valid: (N,) rows a search may
            jump to; next_ok: (N,) False on a clip's last frame; contacts: (N, 4).
        mirrored: (N,) True on mirrored takes. Their joints' local frames are mirrored too,
            so a transition never crosses between plain and mirrored takes.
        remaining: (N,) frames left in each frame's gait segment (:func:`run_remaining`).
        speeds: typical speed (m/s) per gait.
    """

    skeleton: object
    rotations: np.ndarray
    offsets: np.ndarray
    hips: np.ndarray
    root_delta: np.ndarray
    yaw_delta: np.ndarray
    features: np.ndarray
    gait: np.ndarray
    valid: np.ndarray
    next_ok: np.ndarray
    contacts: np.ndarray
    mirrored: np.ndarray
    remaining: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    weights: np.ndarray
    speeds: dict = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(len(self.gait))


def _yaw(directions: np.ndarray) -> np.ndarray:
    return angles.yaw(directions)


def clip_features(g_pos: np.ndarray, root: Root, paws: list[int]) -> np.ndarray:
    """(F, 6 + 6 + 12 + 12 + 3) raw features: future root positions and directions (x, z) in
    root space at ``FUTURE`` (clamped at the clip end), paw positions and velocities, hips velocity."""
    f = len(g_pos)
    idx = np.minimum(np.arange(f)[:, None] + np.asarray(FUTURE)[None], f - 1)
    fut = to_root_space(root, root.positions[idx])[..., [0, 2]].reshape(f, -1)
    fdir = vectors_to_root_space(root, root.directions[idx])[..., [0, 2]].reshape(f, -1)
    paw = to_root_space(root, g_pos[:, paws]).reshape(f, -1)
    vel = vectors_to_root_space(root, np.gradient(g_pos[:, paws], axis=0) * FPS).reshape(f, -1)
    hv = vectors_to_root_space(root, np.gradient(g_pos[:, 0], axis=0) * FPS)
    return np.concatenate([fut, fdir, paw, vel, hv], -1)


GROUPS = ((0, 6, 1.0), (6, 12, 1.5), (12, 24, 0.75), (24, 36, 1.0), (36, 39, 1.0))   # (start, end, weight)


def build_database(paths, mirror: bool = True) -> Database:
    """The database from dog BVH files (resampled to 30 fps; mirrored copies too)."""
    motions = []
    for p in paths:
        m = kinema.io.load(p)
        m = m.resample(FPS) if abs(m.fps - FPS) > 1e-3 else m
        motions.append((m, False))
        if mirror:
            motions.append((m.mirror(), True))
    if not motions:
        raise KinemaError("quadruped database: no BVH files")
    sk = motions[0][0].skeleton
    paws = [sk.index(n) for n in PAWS]
    cols = {k: [] for k in ("rot", "pos", "hips", "dpos", "dyaw", "feat", "gait", "valid", "next", "contacts", "side")}
    cfg = RootConfig.guess(sk, smoothing="savgol", window=15, order=3)
    for m, mirrored in motions:
        g_rot, g_pos = m.global_transforms()
        floor = float(np.percentile(g_pos[:, paws[2:], 1].min(1), 2))    # hind paws rest on the floor
        g_pos = g_pos - np.float32([0.0, floor, 0.0])                    # takes differ by up to 10 cm
        root = compute_root(g_pos, g_rot, sk, cfg)
        f = m.num_frames
        speed = np.linalg.norm(root.velocities(FPS), axis=1)
        gait = classify_gait(footfall_correlations(g_pos[:, paws, 1]), speed)
        gait[~on_all_fours(g_pos[:, paws, 1])] = -1          # rearing, jumping, lying: no gait
        gait = drop_short_runs(gait, MIN_RUN)
        step = np.zeros((f, 3), np.float32)
        step[:-1] = to_root_space(root[:-1], root.positions[1:])
        yaw = np.unwrap(_yaw(root.directions.astype(np.float64)))
        dyaw = np.zeros(f)
        dyaw[:-1] = np.diff(yaw)
        local = m.rotations.astype(np.float64).copy()
        local[:, 0] = quat.mul(quat.inv(root.rotations.astype(np.float64)), g_rot[:, 0])   # hips in root space
        cols["rot"].append(local)
        cols["pos"].append(m.positions)              # bone offsets (mirrored takes have mirrored ones)
        cols["hips"].append(to_root_space(root, g_pos[:, 0]))
        cols["dpos"].append(step)
        cols["dyaw"].append(dyaw)
        cols["feat"].append(clip_features(g_pos, root, paws))
        cols["gait"].append(gait)
        v = np.ones(f, bool)
        v[-max(FUTURE):] = False                     # room for the trajectory and for playing on
        cols["valid"].append(v)
        nxt = np.ones(f, bool)
        nxt[-1] = False
        cols["next"].append(nxt)
        cols["contacts"].append(contacts(g_pos, paws))
        cols["side"].append(np.full(f, mirrored))
    feat = np.concatenate(cols["feat"]).astype(np.float64)
    mean = feat.mean(0)
    std = np.zeros(feat.shape[1])
    weights = np.zeros(feat.shape[1])
    for a, b, w in GROUPS:
        std[a:b] = feat[:, a:b].std() + 1e-6          # one scale per group keeps its geometry
        weights[a:b] = w
    gait = np.concatenate(cols["gait"])
    speeds = {}
    for i, g in enumerate(GAITS):
        rows = feat[gait == i]
        speeds[g] = float(np.median(np.linalg.norm(rows[:, 4:6], axis=1) / (FUTURE[-1] / FPS))) if len(rows) else 0.0
    return Database(sk, np.concatenate(cols["rot"]).astype(np.float32), np.concatenate(cols["pos"]).astype(np.float32),
                    np.concatenate(cols["hips"]).astype(np.float32),
                    np.concatenate(cols["dpos"]).astype(np.float32), np.concatenate(cols["dyaw"]).astype(np.float32),
                    ((feat - mean) / std * weights).astype(np.float32), gait, np.concatenate(cols["valid"]),
                    np.concatenate(cols["next"]), np.concatenate(cols["contacts"]), np.concatenate(cols["side"]),
                    run_remaining(gait), mean, std, weights, speeds)


def default_paths() -> list[Path]:
    from kinema.data import require_path
    folder = require_path("quadruped", "bvh", what="the MANN dog takes")
    return sorted(folder.glob("*.bvh"))


class DogController:
    """Steers the dog: ``step(direction, gait)`` once per frame at 30 fps.

    Args:
        db: the :class:`Database`.
        search_every: frames between searches (also searches at once when the gait changes).
        halflife: inertialization halflife (s) of transitions; the trajectory spring's too.
        foot_lock: lock planted paws (IK on each leg).
    """

    def __init__(self, db: Database, search_every: int = 24, halflife: float = 0.12, foot_lock: bool = True,
                 start_gait: str = "walk") -> None:
        self.db, self.search_every, self.halflife, self.use_lock = db, search_every, halflife, foot_lock
        self.index = int(np.nonzero(db.valid & (db.gait == GAITS.index(start_gait)))[0][0])
        self.position = np.zeros(3)              # root on the floor, world
        self.yaw = 0.0                           # root facing angle about +Y (0: +Z)
        self.velocity = np.zeros(3)
        self.accel = np.zeros(3)
        self.gait: str | None = None
        self.since_search = 0
        self.offset_rot = np.zeros((db.skeleton.num_joints, 3))     # inertialization offsets (log space)
        self.offset_hips = np.zeros(3)
        self.searches = 0
        sk = db.skeleton
        self.paws = [sk.index(n) for n in PAWS]
        self.leg_roots = [int(sk.parents[sk.parents[j]]) for j in self.paws]
        self.locks = [None] * 4                  # locked world targets
        self.release = np.zeros(4)

    # ------------------------------------------------------------------ search
    def _query(self, direction: np.ndarray, speed: float) -> np.ndarray:
        """Features of the current pose with the desired trajectory from the velocity spring."""
        from kinema.control.springs import velocity_spring_predict
        db = self.db
        times = np.asarray(FUTURE) / FPS
        goal = direction * speed
        pos, _, _ = velocity_spring_predict(self.position, self.velocity, self.accel, goal, self.halflife * 2, times)
        want_yaw = angles.yaw(direction) if speed > 0 else self.yaw
        dyaw = angles.wrap(want_yaw - self.yaw)
        yaws = self.yaw + dyaw * (1 - 0.5 ** (times / 0.25))
        c, s = np.cos(-self.yaw), np.sin(-self.yaw)
        rel = pos - self.position
        fut = np.stack([c * rel[:, 0] + s * rel[:, 2], c * rel[:, 2] - s * rel[:, 0]], -1)
        fdir = np.stack([np.sin(yaws - self.yaw), np.cos(yaws - self.yaw)], -1)
        raw = db.features[self.index] / db.weights.clip(1e-9) * db.std + db.mean          # current pose features
        raw = raw.astype(np.float64)
        raw[0:6], raw[6:12] = fut.ravel(), fdir.ravel()
        return ((raw - db.mean) / db.std * db.weights).astype(np.float32)

    def _search(self, direction: np.ndarray, gait: str) -> None:
        db = self.db
        q = self._query(direction, db.speeds[gait])
        rows = (db.valid & (db.gait == GAITS.index(gait)) & (db.mirrored == db.mirrored[self.index])
                & (db.remaining >= self.search_every))
        if not rows.any():
            raise KinemaError(f"the database has no {gait} frames")
        cand = np.nonzero(rows)[0]
        cost = ((db.features[cand] - q) ** 2).sum(1)
        best = int(cand[np.argmin(cost)])
        self.searches += 1
        here = self.index
        if db.valid[here] and db.gait[here] == GAITS.index(gait):
            # stay on the playing clip unless the best frame is clearly better
            if ((db.features[here] - q) ** 2).sum() <= cost.min() * 1.3 + 1e-6:
                best = here
        if best != here and abs(best - here) > 3:
            self._transition(best)
        self.since_search = 0

    def _transition(self, new: int) -> None:
        """Inertialize: keep the visible pose, decay the difference to the new frame's."""
        db = self.db
        cur_rot = quat.mul(quat.exp(self.offset_rot), db.rotations[self.index].astype(np.float64))
        cur_hips = db.hips[self.index] + self.offset_hips
        self.offset_rot = quat.log(quat.abs(quat.mul(cur_rot, quat.inv(db.rotations[new].astype(np.float64)))))
        self.offset_hips = cur_hips - db.hips[new]
        self.index = new

    # ------------------------------------------------------------------ step
    def step(self, direction, gait: str) -> tuple[np.ndarray, np.ndarray]:
        """Advance one frame toward moving along world ``direction`` (x, z) in ``gait``.

        Returns the world pose (rotations (J, 4), positions (J, 3)) after foot locking."""
        if gait not in GAITS:
            raise KinemaError(f"unknown gait {gait!r}; gaits: {', '.join(GAITS)}")
        d = np.array([direction[0], 0.0, direction[1]], np.float64)
        n = np.linalg.norm(d)
        d = d / n if n > 1e-6 else d
        db, dt = self.db, 1.0 / FPS
        # trajectory simulation (critically damped velocity spring)
        from kinema.control.springs import velocity_spring
        x, v, a = velocity_spring(self.position[None], self.velocity[None], self.accel[None],
                                  (d * db.speeds[gait])[None], self.halflife * 2, dt)
        sim_pos, self.velocity, self.accel = x[0], v[0], a[0]
        # play on
        if not db.next_ok[self.index] or not db.valid[self.index]:
            self._search(d, gait)
        elif gait != self.gait or self.since_search >= self.search_every or db.gait[self.index] != GAITS.index(gait):
            self._search(d, gait)
        self.gait = gait
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        step = db.root_delta[self.index]
        self.position = self.position + np.array([c * step[0] + s * step[2], 0.0, c * step[2] - s * step[0]])
        self.yaw += float(db.yaw_delta[self.index])
        self.index += 1
        self.since_search += 1
        # keep the character on the simulated trajectory and facing the commanded way
        self.position += (sim_pos - self.position) * 0.1
        if n > 1e-6:
            err = angles.wrap(angles.yaw(d) - self.yaw)
            self.yaw += 0.06 * err
        decay = 0.5 ** (dt / self.halflife)
        self.offset_rot *= decay
        self.offset_hips *= decay
        return self.pose()

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The world pose shown now (rotations (J, 4), positions (J, 3)), paws locked."""
        db = self.db
        rot = quat.mul(quat.exp(self.offset_rot), db.rotations[self.index].astype(np.float64))
        ry = np.array([np.cos(self.yaw / 2), 0.0, np.sin(self.yaw / 2), 0.0])
        hips = db.hips[self.index] + self.offset_hips
        pos = db.offsets[self.index].astype(np.float64)
        pos[0] = self.position + quat.rotate(ry, hips)
        rot[0] = quat.mul(ry, rot[0])
        g_rot, g_pos = kinematics.forward(rot[None], pos[None], db.skeleton.parents)
        g_rot, g_pos = g_rot[0], g_pos[0]
        if self.use_lock:
            g_rot, g_pos = self._lock(g_rot, g_pos, db.contacts[self.index])
        return g_rot.astype(np.float32), g_pos.astype(np.float32)

    def _lock(self, g_rot: np.ndarray, g_pos: np.ndarray, contact: np.ndarray, release: int = 5,
              max_drift: float = 0.12) -> tuple[np.ndarray, np.ndarray]:
        """Keep planted paws where they landed (within ``max_drift``), blend out over ``release`` frames."""
        for k, j in enumerate(self.paws):
            foot = g_pos[j]
            if contact[k]:
                if self.locks[k] is None:
                    self.locks[k] = foot.copy()
                off = self.locks[k] - foot
                dist = np.linalg.norm(off)
                if dist > max_drift:
                    self.locks[k] = foot + off * (max_drift / dist)
                self.release[k] = release
            elif self.locks[k] is not None:
                self.release[k] -= 1
                if self.release[k] <= 0:
                    self.locks[k] = None
        for k, j in enumerate(self.paws):
            if self.locks[k] is None:
                continue
            w = 1.0 if contact[k] else self.release[k] / release
            w = w * w * (3 - 2 * w)
            target = g_pos[j] + (self.locks[k] - g_pos[j]) * w
            if not contact[k]:                       # releasing: never pull a lifting paw down
                target[1] = max(target[1], g_pos[j][1])
            res = solve_pose(g_rot, g_pos, self.db.skeleton.parents, self.leg_roots[k], {j: target}, max_iterations=8)
            g_rot, g_pos = res.rotations, res.positions
        return g_rot, g_pos
