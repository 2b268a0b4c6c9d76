"""The MANN dog's motion-matching database (Zhang et al. 2018): trajectory, paw and hip
feature groups declared with :mod:`kinema.matching.features` (:func:`dog_features`), and
gait labels measured from the footfall pattern (:attr:`Database.gait`) that restrict each
search to the commanded gait through one mask (:meth:`Database.search_mask`); the
controller that plays it is :class:`kinema.control.quadruped.DogController`.

The gait is a label column and a hard mask, not a feature group: it is measured over a 1 s
window of a whole take (footfall correlations, speed, short runs dropped), not computed
per frame from a pose and a trajectory as a group is, and a search never trades it against
distance.

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
from kinema.data import require_path
from kinema.errors import KinemaError
from kinema.features.contacts import contacts as paw_contacts
from kinema.features.normalisation import Normaliser
from kinema.features.root import Root, RootConfig, compute_root, to_root_space, vectors_to_root_space
from kinema.matching.features import FeatureGroup, FeatureInputs, FeatureSet, trajectory_groups
from kinema.maths import angles, quat

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
    """(F, 4) bool paw contacts (:func:`kinema.features.contacts.contacts`): within 4 cm of
    the take's lowest paw height (its 3rd percentile) and slower than 0.5 m/s, unfiltered."""
    base = np.percentile(positions[:, paws, 1], 3, axis=0)
    velocities = np.gradient(positions, axis=0) * fps
    return paw_contacts(positions, fps, paws, height_threshold=base + 0.04, speed_threshold=0.5, filter_size=1,
                        velocities=velocities)


@dataclass
class Database:
    """Frames of the dog takes with their matching features.

    Attributes:
        skeleton: the BVH skeleton. rotations: (N, J, 4) local rotations (the hips' in root
            space). offsets: (N, J, 3) local translations (bone offsets of the frame's take).
        hips: (N, 3) hips position in root space. root_delta: (N, 3) root-space root
            displacement to the next frame; yaw_delta: (N,) root yaw change to the next frame.
        features: (N, D) features normalised by ``normaliser`` (:func:`dog_features`'s
            groups); gait: (N,) labels; valid: (N,) rows a search may jump to; next_ok:
            (N,) False on a clip's last frame; contacts: (N, 4).
        mirrored: (N,) True on mirrored takes. Their joints' local frames are mirrored too,
            so a transition never crosses between plain and mirrored takes.
        remaining: (N,) frames left in each frame's gait segment (:func:`run_remaining`).
        normaliser: the features' statistics (float64: one pooled std per group, weights after).
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
    normaliser: Normaliser
    speeds: dict = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(len(self.gait))

    def search_mask(self, gait: str, mirrored: bool | None = None, min_remaining: int = 1) -> np.ndarray:
        """(N,) bool: the rows a search for ``gait`` may jump to.

        Valid rows (room for the trajectory ahead) labelled ``gait``, with at least
        ``min_remaining`` frames left in their gait segment, on plain or mirrored takes as
        ``mirrored`` says (None: both)."""
        if gait not in GAITS:
            raise KinemaError(f"unknown gait {gait!r}; gaits: {', '.join(GAITS)}")
        mask = self.valid & (self.gait == GAITS.index(gait)) & (self.remaining >= min_remaining)
        if mirrored is not None:
            mask &= self.mirrored == mirrored
        return mask

    @property
    def feature_set(self) -> FeatureSet:
        """The groups of :attr:`features` (:func:`dog_features`)."""
        return dog_features(self.skeleton.names[0])


def _joystick(root: Root) -> np.ndarray:
    """(F, 12) future root positions (x, z) then facing directions (x, z) in root space at
    ``FUTURE`` frames ahead, clamped at the clip's last frame."""
    f = root.num_frames
    idx = np.minimum(np.arange(f)[:, None] + np.asarray(FUTURE)[None], f - 1)
    fut = to_root_space(root, root.positions[idx])[..., [0, 2]].reshape(f, -1)
    fdir = vectors_to_root_space(root, root.directions[idx])[..., [0, 2]].reshape(f, -1)
    return np.concatenate([fut, fdir], -1)


def feature_inputs(g_pos: np.ndarray, root: Root, skeleton) -> FeatureInputs:
    """What the dog's feature groups read from a take: root-space joint positions, their
    velocities (central differences at ``FPS``) and the future trajectory."""
    vel = np.gradient(g_pos, axis=0) * FPS
    return FeatureInputs(skeleton.names, to_root_space(root, g_pos), vectors_to_root_space(root, vel), _joystick(root))


def dog_features(hips: str) -> FeatureSet:
    """The dog's groups: the joystick first (``trajectory_position`` 6, weight 1;
    ``trajectory_direction`` 6, weight 1.5), then ``paw_positions`` (12, 0.75),
    ``paw_velocities`` (12, 1) and ``hip_velocity`` (3, 1) of joint ``hips``."""
    return FeatureSet((*trajectory_groups(len(FUTURE), 1.0, 1.5),
                       FeatureGroup("paw_positions", 3 * len(PAWS), 0.75, lambda x: x.position(*PAWS)),
                       FeatureGroup("paw_velocities", 3 * len(PAWS), 1.0, lambda x: x.velocity(*PAWS)),
                       FeatureGroup("hip_velocity", 3, 1.0, lambda x: x.velocity(hips))))


def build_database(paths, mirror: bool = True) -> Database:
    """The database from dog BVH files (resampled to 30 fps; mirrored copies too)."""
    motions = []
    for p in paths:
        m = kinema.io.load(p)
        m = m.at_fps(FPS)
        motions.append((m, False))
        if mirror:
            motions.append((m.mirror(), True))
    if not motions:
        raise KinemaError("quadruped database: no BVH files")
    sk = motions[0][0].skeleton
    paws = [sk.index(n) for n in PAWS]
    cols = {k: [] for k in ("rot", "pos", "hips", "dpos", "dyaw", "feat", "gait", "valid", "next", "contacts", "side")}
    cfg = RootConfig.guess(sk, smoothing="savgol", window=15, order=3)
    features = dog_features(sk.names[0])
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
        yaw = np.unwrap(angles.yaw(root.directions.astype(np.float64)))
        dyaw = np.zeros(f)
        dyaw[:-1] = np.diff(yaw)
        local = m.rotations.astype(np.float64).copy()
        local[:, 0] = quat.mul(quat.inv(root.rotations.astype(np.float64)), g_rot[:, 0])   # hips in root space
        cols["rot"].append(local)
        cols["pos"].append(m.positions)              # bone offsets (mirrored takes have mirrored ones)
        cols["hips"].append(to_root_space(root, g_pos[:, 0]))
        cols["dpos"].append(step)
        cols["dyaw"].append(dyaw)
        cols["feat"].append(features.compute(feature_inputs(g_pos, root, sk), np.float64))
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
    # one pooled std per group (keeps its geometry), 1e-6 added; weights applied after
    norm = Normaliser.fit(feat, features.layout, pooled=True, eps=1e-6, fold_weights=False, dtype=np.float64)
    gait = np.concatenate(cols["gait"])
    speeds = {}
    last = {n: b for n, _a, b, _w in features.layout}["trajectory_position"]    # the last sample's (x, z)
    for i, g in enumerate(GAITS):
        rows = feat[gait == i]
        speeds[g] = (float(np.median(np.linalg.norm(rows[:, last - 2:last], axis=1) / (FUTURE[-1] / FPS)))
                     if len(rows) else 0.0)
    return Database(sk, np.concatenate(cols["rot"]).astype(np.float32), np.concatenate(cols["pos"]).astype(np.float32),
                    np.concatenate(cols["hips"]).astype(np.float32),
                    np.concatenate(cols["dpos"]).astype(np.float32), np.concatenate(cols["dyaw"]).astype(np.float32),
                    norm.normalise(feat), gait, np.concatenate(cols["valid"]),
                    np.concatenate(cols["next"]), np.concatenate(cols["contacts"]), np.concatenate(cols["side"]),
                    run_remaining(gait), norm, speeds)


def default_paths() -> list[Path]:
    folder = require_path("quadruped", "bvh", what="the MANN dog takes")
    return sorted(folder.glob("*.bvh"))
