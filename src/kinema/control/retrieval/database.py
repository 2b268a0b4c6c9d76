"""The retrieval database of the retrieval-augmented controller (a small adapter).

Built from motion files at 60 Hz with optional mirroring. Per row (frame):

- ``poses`` (N, P): the pose vector, everything in that frame's *root space* (the
  ground-projected, smoothed simulation bone), so a row can be transplanted to any
  character root unchanged:

  ======================  ======  =================================================
  slice                   width   content
  ======================  ======  =================================================
  ``[0:3]``               3       root motion into this frame (dx, dz in the previous
                                  root frame, dyaw), times fps: m/s, m/s, rad/s
  ``[3:3+3J]``            3 J     joint positions, metres
  ``[3+3J:3+9J]``         6 J     joint rotations, 6D (two matrix columns)
  ``[3+9J:3+12J]``        3 J     joint velocities, m/s
  ======================  ======  =================================================

  P = 3 + 12 J (243 for GAMES-105's 20 joints, 267 for LaFAN1's 22).
- ``contacts`` (N, 2): left/right toe contact (speed < 0.15 m/s, median 5 frames).
- ``features`` (N, 27): Motion Matching's matching features (NOTES.md 1.2): foot positions
  and velocities, hip velocity, and the 12-d trajectory (positions and directions at
  +20/+40/+60 frames in the current root space, clamped to the clip). The trajectory part
  is also the joystick ``control`` (N, 12).
- ``root_positions`` / ``root_directions`` (N, 3): world root per frame (for rollouts).
- ``ranges`` (C, 2), ``clip_names``, ``twins`` (C,): the mirror twin of each clip.

The motion-matching database of ``kinema.matching.database`` was not available when this
was written; this module keeps to the same contract (``search(queries, k, exclude)``,
``fingerprint``) and can be replaced by it. Search is :class:`kinema.matching.search.SearchIndex`.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from kinema.errors import FormatError, KinemaError
from kinema.features.contacts import contacts as contact_labels
from kinema.features.root import RootConfig, compute_root, finite_difference, rotations_to_root_space, \
    to_root_space, vectors_to_root_space
from kinema.features.trajectory import quat_to_sixd
from kinema.matching.search import Exclusion, SearchIndex, brute_force

FPS = 60.0
TRAJECTORY_OFFSETS = (20, 40, 60)
# Feature groups (name, width, weight): NOTES.md 1.2.
FEATURE_GROUPS = (("foot_positions", 6, 0.75), ("foot_velocities", 6, 1.0), ("hip_velocity", 3, 1.0),
                  ("trajectory_positions", 6, 1.0), ("trajectory_directions", 6, 1.5))
FORMAT = "kinema-retrieval-db/1"
BRUTE_FORCE_ROWS = 4096


@dataclass(frozen=True)
class DatabaseConfig:
    """Which joints play which role, and the build options.

    ``None`` joints are guessed from names (ankle/foot, toe, the pelvis from
    :meth:`RootConfig.guess`). ``smoothing_window`` is in frames at 60 Hz. ``scale``
    converts file units to metres for BVH (None: 0.01, or 1 when the file is evidently
    in metres already: a hip height under 0.2 m after scaling by 0.01).
    """

    left_foot: str | None = None
    right_foot: str | None = None
    left_toe: str | None = None
    right_toe: str | None = None
    hips: str | None = None
    mirror: bool = True
    scale: float | None = None
    smoothing_window: int = 61
    contact_speed: float = 0.15

    def to_json(self) -> dict:
        return asdict(self)


def _guess_joint(names: Sequence[str], pattern: str, left: bool) -> str:
    side = re.compile(r"^(l|left)|(_l|left|\.l)$", re.I) if left else re.compile(r"^(r|right)|(_r|right|\.r)$", re.I)
    for n in names:
        if re.search(pattern, n, re.I) and (side.search(n) or ("left" if left else "right") in n.lower()):
            return n
    raise KinemaError(f"cannot guess the {'left' if left else 'right'} {pattern!r} joint from {list(names)}; "
                      "set it in DatabaseConfig")


def resolve_joints(skeleton, config: DatabaseConfig) -> dict[str, int]:
    """Joint indices of the roles in ``config`` (guessing the missing ones)."""
    names = skeleton.names
    root_cfg = RootConfig.guess(skeleton)
    picks = {
        "left_foot": config.left_foot or _guess_joint(names, "ankle|foot", True),
        "right_foot": config.right_foot or _guess_joint(names, "ankle|foot", False),
        "left_toe": config.left_toe or _guess_joint(names, "toe", True),
        "right_toe": config.right_toe or _guess_joint(names, "toe", False),
        "hips": config.hips if config.hips is not None else root_cfg.position_joint,
    }
    return {k: (v if isinstance(v, int) else skeleton.index(v)) for k, v in picks.items()}


def pose_layout(num_joints: int) -> dict[str, tuple[int, int]]:
    """Slices of the pose vector by part (see the module docstring)."""
    j = num_joints
    return {"root": (0, 3), "positions": (3, 3 + 3 * j), "rotations": (3 + 3 * j, 3 + 9 * j),
            "velocities": (3 + 9 * j, 3 + 12 * j)}


def clip_arrays(motion, config: DatabaseConfig, joints: dict[str, int]) -> dict[str, np.ndarray]:
    """Per-frame arrays of one clip (already at 60 Hz): poses, contacts, features, root."""
    if abs(motion.fps - FPS) > 1e-6:
        raise KinemaError(f"{motion.name}: clip_arrays needs {FPS} fps, got {motion.fps}")
    gp = motion.global_positions().astype(np.float64)
    gr = motion.global_rotations().astype(np.float64)
    n, j = gp.shape[:2]
    window = min(config.smoothing_window, n - (1 - n % 2))
    smoothing = "savgol" if window > 3 else "none"
    root = compute_root(gp, gr, motion.skeleton,
                        RootConfig.guess(motion.skeleton, smoothing=smoothing, window=max(window, 5)))
    rel = to_root_space(root, gp)
    rot6 = quat_to_sixd(rotations_to_root_space(root, gr))
    vel = vectors_to_root_space(root, finite_difference(gp, FPS))
    # Root motion into frame t, in frame t-1's root space (frame 0 repeats frame 1).
    dpos = np.diff(root.positions, axis=0)
    local = vectors_to_root_space(root[:-1], dpos)
    yaw = np.unwrap(np.arctan2(root.directions[:, 0], root.directions[:, 2]))
    dyaw = np.diff(yaw)
    motion_in = np.stack([local[:, 0], local[:, 2], dyaw], -1) * FPS
    motion_in = np.concatenate([motion_in[:1], motion_in], 0)
    poses = np.concatenate([motion_in, rel.reshape(n, -1), rot6.reshape(n, -1), vel.reshape(n, -1)], -1)
    toes = [joints["left_toe"], joints["right_toe"]]
    cont = contact_labels(gp, FPS, toes, height_threshold=None, speed_threshold=config.contact_speed,
                          filter_size=5).astype(np.float32)
    feet = [joints["left_foot"], joints["right_foot"]]
    future = np.minimum(np.arange(n)[:, None] + np.asarray(TRAJECTORY_OFFSETS)[None], n - 1)   # (n, 3)
    tp = yaw_inverse(root.directions[:, None], root.positions[future] - root.positions[:, None])
    td = yaw_inverse(root.directions[:, None], root.directions[future])
    control = np.concatenate([tp[..., [0, 2]].reshape(n, 6), td[..., [0, 2]].reshape(n, 6)], -1)
    features = np.concatenate([rel[:, feet].reshape(n, 6), vel[:, feet].reshape(n, 6),
                               vel[:, joints["hips"]], control], -1)
    return {"poses": poses.astype(np.float32), "contacts": cont, "features": features.astype(np.float32),
            "control": control.astype(np.float32), "root_positions": root.positions.astype(np.float32),
            "root_directions": root.directions.astype(np.float32)}


def yaw_inverse(directions: np.ndarray, v: np.ndarray) -> np.ndarray:
    """World vectors ``v`` (..., 3) in the yaw frame facing ``directions`` (..., 3)."""
    s, c = -directions[..., 0], directions[..., 2]
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    return np.stack([c * x + s * z, y, c * z - s * x], -1)


def features_from_poses(poses: np.ndarray, control: np.ndarray, joints: dict[str, int],
                        num_joints: int) -> np.ndarray:
    """Raw matching features (..., 27) of pose vectors (..., P) and controls (..., 12): the
    runtime query built from a (predicted) pose, exactly as the rows were built."""
    lay = pose_layout(num_joints)
    lead = poses.shape[:-1]
    pos = poses[..., lay["positions"][0]:lay["positions"][1]].reshape(*lead, num_joints, 3)
    vel = poses[..., lay["velocities"][0]:lay["velocities"][1]].reshape(*lead, num_joints, 3)
    feet = [joints["left_foot"], joints["right_foot"]]
    return np.concatenate([pos[..., feet, :].reshape(*lead, 6), vel[..., feet, :].reshape(*lead, 6),
                           vel[..., joints["hips"], :], control], -1)


@dataclass
class Database:
    """Rows of every clip (and mirror), normalised features and a search index."""

    poses: np.ndarray
    contacts: np.ndarray
    features: np.ndarray
    control: np.ndarray
    root_positions: np.ndarray
    root_directions: np.ndarray
    ranges: np.ndarray
    clip_names: list[str]
    twins: np.ndarray
    joint_names: list[str]
    parents: np.ndarray
    joints: dict[str, int]
    config: dict
    feature_mean: np.ndarray = field(init=False)
    feature_scale: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.feature_mean, self.feature_scale = feature_normalisation(self.features)
        self.normalised = ((self.features - self.feature_mean) / self.feature_scale).astype(np.float32)
        self.clip_of_row = np.repeat(np.arange(len(self.ranges)), self.ranges[:, 1] - self.ranges[:, 0])
        self._index: SearchIndex | None = None

    # -- sizes ----------------------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        return len(self.poses)

    @property
    def pose_width(self) -> int:
        return self.poses.shape[1]

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    @property
    def frame_time(self) -> float:
        return 1.0 / FPS

    @property
    def fingerprint(self) -> str:
        """16 hex digits over every array and the build config (stable across machines)."""
        h = hashlib.sha256()
        for name in ("poses", "contacts", "features", "ranges", "twins", "parents"):
            a = np.ascontiguousarray(getattr(self, name))
            h.update(name.encode())
            h.update(str(a.dtype).encode() + str(a.shape).encode())
            h.update(a.tobytes())
        h.update(json.dumps({"clips": self.clip_names, "joints": self.joint_names, "roles": self.joints,
                             "config": self.config}, sort_keys=True).encode())
        return h.hexdigest()[:16]

    # -- search ---------------------------------------------------------------------------
    def normalise(self, features: np.ndarray) -> np.ndarray:
        return ((np.asarray(features, np.float32) - self.feature_mean) / self.feature_scale).astype(np.float32)

    def search(self, queries: np.ndarray, k: int = 4, exclude: Exclusion | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Exact k nearest rows of normalised queries (Q, 27): (indices, costs) (Q, k).
        Small databases use the brute-force reference (no index to build)."""
        if self.num_rows <= BRUTE_FORCE_ROWS:
            return brute_force(self.normalised, queries, k, exclude, self.ranges)
        if self._index is None:
            self._index = SearchIndex(self.normalised, self.ranges)
        return self._index.search(queries, k, exclude)

    def successor(self, rows: np.ndarray, steps: np.ndarray | int = 1) -> np.ndarray:
        """Row ``rows + steps`` clamped to the last row of its clip."""
        rows = np.asarray(rows)
        stop = self.ranges[self.clip_of_row[rows], 1] - 1
        return np.minimum(rows + steps, stop)

    def clip_ids(self, names: Sequence[str]) -> np.ndarray:
        """Ids of the clips named ``names`` together with their mirror twins."""
        ids = [i for i, n in enumerate(self.clip_names) if n in set(names)]
        return np.unique(np.concatenate([np.asarray(ids, np.int64), self.twins[ids]])) if ids else np.zeros(0, np.int64)

    # -- files ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        path = Path(path)
        meta = {"format": FORMAT, "clip_names": self.clip_names, "joint_names": self.joint_names,
                "joints": self.joints, "config": self.config, "fingerprint": self.fingerprint}
        arrays = {k: getattr(self, k) for k in ("poses", "contacts", "features", "control", "root_positions",
                                                 "root_directions", "ranges", "twins", "parents")}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Database":
        path = Path(path)
        if not path.is_file():
            raise FormatError("retrieval database not found", str(path))
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                arrays = {k: z[k] for k in z.files if k != "meta"}
        except (ValueError, KeyError, OSError, json.JSONDecodeError) as e:
            raise FormatError(f"not a kinema retrieval database: {e}", str(path)) from e
        if meta.get("format") != FORMAT:
            raise FormatError(f"not a kinema retrieval database (format {meta.get('format')!r})", str(path))
        db = cls(clip_names=meta["clip_names"], joint_names=meta["joint_names"], joints=meta["joints"],
                 config=meta["config"], **arrays)
        if db.fingerprint != meta["fingerprint"]:
            raise FormatError(f"database contents do not match their fingerprint {meta['fingerprint']}", str(path))
        return db


def feature_normalisation(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension mean and per-group isotropic scale (mean std / weight), NOTES.md 1.2."""
    mean = features.mean(0)
    std = features.std(0)
    scale = np.empty_like(mean)
    start = 0
    for _, width, weight in FEATURE_GROUPS:
        s = float(std[start:start + width].mean())
        scale[start:start + width] = max(s, 1e-6) / weight
        start += width
    return mean.astype(np.float32), scale.astype(np.float32)


def same_joint_order(motion, names: Sequence[str], parents: np.ndarray):
    """``motion`` with its joints in the order ``names`` (same names and hierarchy, given
    by ``parents`` in that order, required): files of one skeleton sometimes list the
    joints in another order."""
    from kinema.motion import Motion, Skeleton

    names = list(names)
    if motion.joint_names == names:
        return motion
    if sorted(motion.joint_names) != sorted(names):
        raise KinemaError(f"{motion.name}: skeleton differs from the database's; one skeleton per database")
    perm = np.array([motion.skeleton.index(n) for n in names])
    parent_names = [motion.joint_names[p] if p >= 0 else None for p in np.asarray(motion.parents)[perm]]
    ref_parents = [names[p] if p >= 0 else None for p in parents]
    if parent_names != ref_parents:
        raise KinemaError(f"{motion.name}: joint hierarchy differs from the database's")
    skel = Skeleton(names, np.asarray(parents), np.asarray(motion.skeleton.offsets)[perm])
    return Motion(skel, motion.fps, motion.rotations[:, perm], motion.positions[:, perm], name=motion.name,
                  metadata=dict(motion.metadata))


def load_clip(path: str | Path, scale: float | None = None):
    """A motion file at 60 Hz in metres (see :attr:`DatabaseConfig.scale`)."""
    import kinema

    path = Path(path)
    if path.suffix.lower() != ".bvh":
        m = kinema.load(path)
    elif scale is not None:
        m = kinema.load(path, scale=scale)
    else:
        m = kinema.load(path, scale=0.01)
        if float(np.median(m.global_positions()[:, :, 1].max(1))) < 0.2:
            m = kinema.load(path, scale=1.0)
    m = m.resample(FPS)
    m.name = path.stem
    return m


def build(paths: Sequence[str | Path], config: DatabaseConfig | None = None,
          skeleton: tuple[Sequence[str], np.ndarray] | None = None) -> Database:
    """Load, resample to 60 Hz, mirror (optionally) and stack clips into a :class:`Database`.

    Clips must share one skeleton (same joint names). Mirrored clips follow the originals:
    clip ``i`` has twin ``i + C/2``. ``skeleton`` = (joint names, parents) imposes a joint
    order (e.g. an existing database's), else the first clip's is used.
    """
    from tqdm import tqdm

    config = config or DatabaseConfig()
    motions = []
    for p in tqdm(sorted(str(p) for p in paths), desc="loading clips", leave=False, disable=len(paths) < 8):
        m = load_clip(p, config.scale)
        motions.append(m)
    if not motions:
        raise KinemaError("no clips to build a retrieval database from")
    names0, parents0 = skeleton if skeleton is not None else (motions[0].joint_names, motions[0].parents)
    motions = [same_joint_order(m, names0, np.asarray(parents0)) for m in motions]
    joints = resolve_joints(motions[0].skeleton, config)
    clips = list(motions)
    if config.mirror:
        clips += [m.mirror() for m in motions]
    chunks, names = [], []
    for i, m in enumerate(clips):
        if m.num_frames < 8:
            raise KinemaError(f"{m.name}: too short ({m.num_frames} frames at 60 Hz)")
        chunks.append(clip_arrays(m, config, joints))
        names.append(m.name + ("_mirror" if i >= len(motions) else ""))
    lengths = np.array([len(c["poses"]) for c in chunks])
    stops = np.cumsum(lengths)
    ranges = np.stack([stops - lengths, stops], -1).astype(np.int64)
    c = len(motions)
    twins = np.concatenate([np.arange(c) + c, np.arange(c)]) if config.mirror else np.arange(c)
    cat = {k: np.concatenate([ch[k] for ch in chunks]) for k in chunks[0]}
    return Database(ranges=ranges, clip_names=names, twins=twins.astype(np.int64), joint_names=list(names0),
                    parents=np.asarray(parents0, np.int64), joints=joints, config=config.to_json(), **cat)
