"""The motion-matching database: per-frame poses, contacts and normalised matching features.

:func:`build_database` turns motions (one skeleton) into rows at one frame rate:

* each clip is resampled to ``config.fps`` (same duration, no speed change) and, with
  ``mirror=True``, followed by its mirror image (:meth:`Motion.mirror`);
* the root (simulation bone) comes from :func:`kinema.features.root.compute_root`;
* **pose** per frame (width ``12 J + 6``; 270 for LaFAN1's 22 joints): root-space joint
  positions (J*3), root-space 6D rotations (J*6, columns 0 and 1 of the matrix), root-space
  joint velocities (J*3), then the root velocity (3, root space, m/s) and the root angular
  velocity (3, rad/s about +Y);
* **contacts** of the two toes (speed below ``contact_speed``, median filtered);
* **features** (27 with three trajectory samples), as in Holden's Motion-Matching: left
  and right foot positions, foot velocities, hip velocity (all in root space), future root
  positions (x, z) and facing directions (x, z) at ``trajectory_frames`` ahead in the
  current root's space, clamped to the clip's last frame; with ``config.pose_joints`` the
  root-space positions of those joints come before the trajectory. The groups are declared
  once in :func:`kinema.matching.features.biped_features`; rows and the runtime query
  (:meth:`Database.features_from_pose`) both compute them from it. Each group is centred per
  dimension and divided by (mean std of its dimensions) / weight, so a group's weight is
  its share of the squared-distance cost.

The database is saved as an uncompressed ``.npz`` whose ``metadata`` entry is UTF-8 JSON
(no pickle). :attr:`Database.fingerprint` is a 16-hex-digit SHA-256 prefix over the
builder version, the config, the mirror flag and the source data (file bytes for loaded
files, arrays for in-memory motions, with clip names and order): identical inputs give the
identical fingerprint on any machine, any change of data or config changes it. A SHA-256
of the stored arrays is checked on load to catch corruption, and an integrity SHA-256 over
the whole metadata (fingerprint, config, clip and joint names, the arrays' checksum) so a
database relabelled with another fingerprint or config is refused.
"""
from __future__ import annotations

import functools
import hashlib
import json
import zipfile
import zlib
from collections.abc import Iterable, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import kinema.io
from kinema.errors import CheckpointError, KinemaError, MissingFileError, SkeletonError
from kinema.features.calibration import calibration_frames
from kinema.features.contacts import contacts as contact_labels
from kinema.features.normalisation import Normaliser
from kinema.features.root import (
    compute_root,
    finite_difference,
    rotations_to_root_space,
    to_root_space,
    vectors_to_root_space,
)
from kinema.features.trajectory import quat_to_sixd, root_trajectory
from kinema.io import FORMATS
from kinema.io.atomic import open_atomic
from kinema.io.validate import check_fps, check_npz_members, parse_json
from kinema.limits import DEFAULT, Limits
from kinema.matching.config import DatabaseConfig
from kinema.matching.features import FeatureInputs, FeatureSet, biped_features
from kinema.matching.search import Exclusion, SearchIndex
from kinema.maths import angles, quat
from kinema.motion.skeleton import Skeleton

FORMAT_VERSION = 1
BUILDER_VERSION = 1  # bump when the build algorithm changes what a config produces
_ARRAYS = ("features", "feature_mean", "feature_scale", "raw_features", "pose", "contacts", "ranges",
           "root_positions", "root_directions", "parents", "offsets", "clip_mirrored")


@dataclass
class Source:
    """One input clip: the motion and what identifies its data for the fingerprint."""

    motion: object  # kinema.motion.Motion
    name: str
    digest: str  # sha256 hex of the file bytes (or of the motion's arrays)


def source_from_file(path: str | Path, **load_options) -> Source:
    """Load ``path`` with :func:`kinema.load`; its digest is the SHA-256 of the file bytes."""
    path = Path(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    motion = kinema.io.load(path, **load_options)
    return Source(motion, path.stem, digest)


def source_from_motion(motion, name: str | None = None) -> Source:
    """An in-memory motion; its digest covers fps, skeleton and the float32 channels."""
    h = hashlib.sha256()
    h.update(json.dumps([float(motion.fps), list(motion.skeleton.names),
                         [int(p) for p in motion.skeleton.parents]]).encode())
    for a in (motion.skeleton.offsets, motion.rotations, motion.positions):
        a = np.ascontiguousarray(a, dtype="<f4")
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return Source(motion, name or motion.name or "clip", h.hexdigest())


def pose_layout(num_joints: int) -> list[tuple[str, int, int]]:
    """Pose vector segments as (name, start, stop)."""
    j = num_joints
    segs = [("joint_positions", 3 * j), ("joint_rotations_6d", 6 * j), ("joint_velocities", 3 * j),
            ("root_velocity", 3), ("root_angular_velocity", 3)]
    out, start = [], 0
    for name, width in segs:
        out.append((name, start, start + width))
        start += width
    return out


def pose_to_world(pose: np.ndarray, num_joints: int, root_position, root_direction
                  ) -> tuple[np.ndarray, np.ndarray]:
    """World (rotations (..., J, 4) w,x,y,z, positions (..., J, 3) metres) of database pose
    vectors (..., P) (root-space layout of :func:`pose_layout`)
    placed at the roots ``root_position`` (..., 3) facing the floor directions
    ``root_direction`` (..., 3)."""
    layout = {name: (a, b) for name, a, b in pose_layout(num_joints)}
    lead = np.shape(pose)[:-1]
    a, b = layout["joint_rotations_6d"]
    local = quat.from_6d(np.asarray(pose[..., a:b], np.float64).reshape(lead + (-1, 6)))
    a, b = layout["joint_positions"]
    ry = angles.yaw_quaternion(angles.yaw(np.asarray(root_direction, np.float64)))[..., None, :]
    pos = quat.rotate(ry, np.asarray(pose[..., a:b], np.float64).reshape(lead + (-1, 3))) \
        + np.asarray(root_position, np.float64)[..., None, :]
    return quat.mul(ry, local).astype(np.float32), pos.astype(np.float32)


def upright_rows(db: Database, ahead: int = 240, band: float = 0.15) -> np.ndarray:
    """Rows (R,) of ``db`` from which the hips stay within ``band`` (a share) of the
    database's median hips height (standing, walking, running) for the next ``ahead`` rows
    of the same clip: starts that are no fall, crawl, getting up or jump."""
    hips = _hips_height(db)
    off = np.abs(hips / np.median(hips) - 1.0) > band
    # an off row within the next `ahead` rows (cumulative count), or the clip ending before
    count = np.concatenate([[0], np.cumsum(off)])
    rows = np.arange(db.rows - ahead)
    clip = db.clip_of(rows)
    ok = (count[rows + ahead] - count[rows] == 0) & (rows + ahead <= db.ranges[clip, 1])
    return rows[ok]


def offset_sets(db: Database) -> tuple[np.ndarray, ...]:
    """Rest offsets (J, 3) of the database's skeleton, and of its mirror image (x-plane,
    left and right swapped) when it holds mirrored clips and that differs."""
    return _offset_sets(tuple(db.joint_names), tuple(int(p) for p in db.parents),
                        np.asarray(db.offsets, np.float64).tobytes(), bool(db.mirror))


@functools.lru_cache(maxsize=16)
def _offset_sets(names: tuple[str, ...], parents: tuple[int, ...], offsets: bytes, mirror: bool
                 ) -> tuple[np.ndarray, ...]:
    # cached by skeleton: rigid poses are rebuilt every runtime and rollout step, the
    # name-based mirror map need not be
    base = np.frombuffer(offsets, np.float64).reshape(len(names), 3)
    if not mirror:
        return (base,)
    mirrored = base[Skeleton(list(names), np.asarray(parents), base).mirror_map()] * np.array([-1.0, 1.0, 1.0])
    return (base,) if np.allclose(mirrored, base, atol=1e-6) else (base, mirrored)


def row_offsets(db: Database, rows: np.ndarray) -> np.ndarray:
    """Rest offsets (..., J, 3) of the skeleton each of ``rows`` (...) was recorded on: the
    mirror image's (:func:`offset_sets`) for the rows of mirrored clips."""
    sets = offset_sets(db)
    if len(sets) == 1:
        return np.broadcast_to(sets[0], np.shape(rows) + sets[0].shape)
    return np.where(db.clip_mirrored[db.clip_of(rows)][..., None, None], sets[1], sets[0])


def upright_mask(db: Database, ahead: int = 240, band: float = 0.15) -> np.ndarray | None:
    """(N,) bool search mask of the rows a locomotion controller may retrieve or play, so
    that neither a released stick nor a sudden one lands it in a fall, a crawl or a crouch
    of the data: rows from which the hips stay within ``band`` of the median hips height for
    the next ``ahead`` rows or to the end of their clip (unlike :func:`upright_rows`, a
    start, a short clip's rows count). None where it would not restrict anything: every
    row qualifies, or none does."""
    off = np.abs(_hips_height(db) / np.median(_hips_height(db)) - 1.0) > band
    count = np.concatenate([[0], np.cumsum(off)])
    rows = np.arange(db.rows)
    stop = np.minimum(rows + ahead, db.ranges[db.clip_of(rows), 1])
    mask = count[stop] - count[rows] == 0
    if mask.all() or not mask.any():
        return None
    return mask


def _hips_height(db: Database) -> np.ndarray:
    """(N,) root-space hips height (m) of every row: the root is on the floor."""
    a = next(lo for name, lo, _ in db.pose_layout if name == "joint_positions")
    return db.pose[:, a + 3 * db.roles["hips"] + 1]


def carried_above_hips(sk: Skeleton, hips: int, grot: np.ndarray, gpos: np.ndarray, root_pos: np.ndarray,
                       root_dir: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Global rotations (F, J, 4) and positions (F, J, 3) with every strict ancestor of joint
    ``hips`` put on the root ``root_pos`` (F, 3), turned to face ``root_dir`` (F, 3): in root
    space such a joint's position and rotation then read the same in every frame
    (``DatabaseConfig.carry_above_hips``). Copies; the inputs are not changed."""
    above = sk.ancestors(hips)
    if not above:
        return grot, gpos
    grot, gpos = grot.copy(), gpos.copy()
    facing = angles.yaw_quaternion(angles.yaw(np.asarray(root_dir, np.float64)))   # (F, 4)
    grot[:, above] = facing[:, None].astype(grot.dtype)
    gpos[:, above] = np.asarray(root_pos, gpos.dtype)[:, None]
    return grot, gpos


def clip_rows(motion, config: DatabaseConfig) -> dict[str, np.ndarray]:
    """Pose, contacts, raw (unnormalised) features and root of one clip at its own rate.

    Args:
        motion: a :class:`kinema.motion.Motion` already at ``config.fps``.
    Returns:
        dict with ``pose`` (F, 12J+6), ``contacts`` (F, 2) bool, ``raw_features`` (F, D),
        ``root_positions`` (F, 3), ``root_directions`` (F, 3).
    """
    sk = motion.skeleton
    try:
        for j in (config.left_foot, config.right_foot, config.hips, *config.pose_joints):
            sk.index(j)
        toes = [sk.index(config.left_toe), sk.index(config.right_toe)]
    except KeyError as e:
        raise KinemaError(f"clip {motion.name!r}: {e.args[0]} (set the joint names in the database config)") from None
    fps = float(motion.fps)
    grot, gpos = motion.global_transforms()
    root = compute_root(gpos, grot, sk, config.root)
    if config.carry_above_hips:
        grot, gpos = carried_above_hips(sk, sk.index(config.hips), grot, gpos, root.positions, root.directions)
    vel = finite_difference(gpos, fps)
    pos_rs = to_root_space(root, gpos)
    vel_rs = vectors_to_root_space(root, vel)
    rot_rs = quat_to_sixd(rotations_to_root_space(root, grot.astype(np.float64)))
    f = motion.num_frames
    root_vel = vectors_to_root_space(root, root.velocities(fps))
    root_ang = np.zeros((f, 3), np.float32)
    root_ang[:, 1] = root.yaw_rates(fps)
    pose = np.concatenate([pos_rs.reshape(f, -1), rot_rs.reshape(f, -1), vel_rs.reshape(f, -1),
                           root_vel, root_ang], axis=1).astype(np.float32)
    traj = root_trajectory(root, list(config.trajectory_frames), fps)
    joystick = np.concatenate([traj.positions[:, :, [0, 2]].reshape(f, -1),
                               traj.directions[:, :, [0, 2]].reshape(f, -1)], axis=1)
    raw = biped_features(config).compute(FeatureInputs(sk.names, pos_rs, vel_rs, joystick))
    contact = contact_labels(gpos, fps, toes, height_threshold=config.contact_height,
                             speed_threshold=config.contact_speed, filter_size=config.contact_filter)
    return {"pose": pose, "contacts": contact, "raw_features": raw,
            "root_positions": root.positions.astype(np.float32),
            "root_directions": root.directions.astype(np.float32)}


@dataclass(eq=False)
class Database:
    """A built motion-matching database (see the module docstring for the layout).

    Attributes:
        features: (N, D) float32 normalised matching features.
        feature_mean, feature_scale: (D,) ``features = (raw - mean) / scale``.
        raw_features: (N, D) float32 features before normalisation.
        pose: (N, P) float32 pose vectors; contacts: (N, 2) bool (left, right toe).
        root_positions, root_directions: (N, 3) the root per row (world, per clip).
        ranges: (C, 2) int64 [start, stop) rows of each clip; clip_names: C names;
        clip_mirrored: (C,) bool.
        joint_names, parents (J,), offsets (J, 3): the skeleton.
        fps: rows per second; config: the build config; mirror: whether mirrors were added.
        fingerprint: 16 hex digits identifying inputs and config.
    """

    features: np.ndarray
    feature_mean: np.ndarray
    feature_scale: np.ndarray
    raw_features: np.ndarray
    pose: np.ndarray
    contacts: np.ndarray
    root_positions: np.ndarray
    root_directions: np.ndarray
    ranges: np.ndarray
    clip_names: list[str]
    clip_mirrored: np.ndarray
    joint_names: list[str]
    parents: np.ndarray
    offsets: np.ndarray
    fps: float
    config: DatabaseConfig
    mirror: bool
    fingerprint: str
    sources: list[dict] = field(default_factory=list)
    _index: SearchIndex | None = field(default=None, repr=False)

    # -- sizes ---------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return int(self.features.shape[0])

    @property
    def pose_width(self) -> int:
        return int(self.pose.shape[1])

    @property
    def frame_time(self) -> float:
        return 1.0 / self.fps

    @property
    def feature_set(self) -> FeatureSet:
        """The feature groups of :attr:`features` (:mod:`kinema.matching.features`)."""
        return biped_features(self.config)

    @property
    def feature_layout(self) -> list[tuple[str, int, int, float]]:
        return self.feature_set.layout

    @property
    def pose_layout(self) -> list[tuple[str, int, int]]:
        return pose_layout(len(self.joint_names))

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    def skeleton_matches(self, other: Database) -> bool:
        """Same joint names, order and hierarchy as ``other`` (rows are comparable)."""
        return self.joint_names == other.joint_names and np.array_equal(self.parents, other.parents)

    def clip_of(self, rows: np.ndarray | int) -> np.ndarray:
        """Clip index of each row."""
        return np.searchsorted(self.ranges[:, 1], rows, side="right")

    def successor(self, rows: np.ndarray | int, steps: np.ndarray | int = 1) -> np.ndarray:
        """Row ``rows + steps`` clamped to the last row of each row's clip (playback)."""
        rows = np.asarray(rows)
        return np.minimum(rows + steps, self.ranges[self.clip_of(rows), 1] - 1)

    @property
    def twins(self) -> np.ndarray:
        """(C,) the mirror twin of each clip (a mirror follows its original; without
        mirroring every clip is its own twin)."""
        ids = np.arange(len(self.clip_names))
        if not self.mirror:
            return ids
        return np.where(self.clip_mirrored, ids - 1, ids + 1)

    def clip_ids(self, names: Sequence[str]) -> np.ndarray:
        """Sorted ids of the clips named ``names`` (with or without ``_mirror``) and their twins."""
        wanted = {n.removesuffix("_mirror") for n in names}
        ids = np.array([i for i, n in enumerate(self.clip_names) if n.removesuffix("_mirror") in wanted], np.int64)
        return np.unique(np.concatenate([ids, self.twins[ids]])) if len(ids) else ids

    @property
    def roles(self) -> dict[str, int]:
        """Joint indices of the config's roles (``left_foot`` ... ``hips``)."""
        c = self.config
        names = {"left_foot": c.left_foot, "right_foot": c.right_foot, "left_toe": c.left_toe,
                 "right_toe": c.right_toe, "hips": c.hips}
        return {role: self.joint_names.index(n) for role, n in names.items()}

    @property
    def trajectory(self) -> np.ndarray:
        """(N, 4 T) raw trajectory features of every row: future root positions (x, z) then
        facing directions (x, z) at ``config.trajectory_frames`` in the row's root space
        (the joystick request of a controller)."""
        return self.raw_features[:, self.feature_set.joystick]

    @property
    def trajectory_start(self) -> int:
        """First feature column of the trajectory (the joystick groups, last in every layout)."""
        return self.feature_set.joystick.start

    def features_from_pose(self, pose: np.ndarray, trajectory: np.ndarray) -> np.ndarray:
        """Raw matching features (..., D) of pose vectors (..., P) and trajectory requests
        (..., 4 T), computed exactly as the rows' (the runtime query of a controller whose
        current pose is not a database row)."""
        lay = {name: (a, b) for name, a, b in self.pose_layout}
        j = self.num_joints
        lead = pose.shape[:-1]
        pos = pose[..., lay["joint_positions"][0]:lay["joint_positions"][1]].reshape(*lead, j, 3)
        vel = pose[..., lay["joint_velocities"][0]:lay["joint_velocities"][1]].reshape(*lead, j, 3)
        return self.feature_set.compute(FeatureInputs(self.joint_names, pos, vel, trajectory))

    # -- features and search -------------------------------------------------------------
    @property
    def normaliser(self) -> Normaliser:
        """``features = (raw - feature_mean) / feature_scale`` (float32 statistics)."""
        return Normaliser(self.feature_mean, self.feature_scale)

    def normalise(self, raw: np.ndarray) -> np.ndarray:
        """Raw features (..., D) -> normalised, in float32 arithmetic like the rows."""
        return self.normaliser.normalise(np.asarray(raw, np.float32))

    def denormalise(self, features: np.ndarray) -> np.ndarray:
        """Normalised features (..., D) -> raw units, in float32 arithmetic."""
        return self.normaliser.denormalise(np.asarray(features, np.float32))

    @property
    def index(self) -> SearchIndex:
        """The search structure over :attr:`features` (built on first use)."""
        if self._index is None:
            self._index = SearchIndex(self.features, self.ranges)
        return self._index

    def search(self, queries: np.ndarray, k: int = 4, exclude: Exclusion | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Exact k nearest rows to normalised ``queries`` (Q, D) or (D,).

        Returns:
            indices (Q, k) int64 and costs (Q, k) float32 (squared distances), best first;
            see :meth:`kinema.matching.search.SearchIndex.search`.
        """
        return self.index.search(queries, k=k, exclude=exclude)

    # -- info and files ------------------------------------------------------------------
    def info(self) -> dict:
        """Summary for ``kinema db info``."""
        return {
            "fingerprint": self.fingerprint,
            "rows": self.rows,
            "pose_width": self.pose_width,
            "feature_width": int(self.features.shape[1]),
            "frame_time": self.frame_time,
            "fps": self.fps,
            "clips": list(self.clip_names),
            "num_clips": len(self.clip_names),
            "mirror": self.mirror,
            "joints": len(self.joint_names),
            "config": self.config.name,
        }

    def _arrays(self) -> dict[str, np.ndarray]:
        return {"features": self.features, "feature_mean": self.feature_mean, "feature_scale": self.feature_scale,
                "raw_features": self.raw_features, "pose": self.pose, "contacts": self.contacts.astype(np.uint8),
                "ranges": self.ranges, "root_positions": self.root_positions,
                "root_directions": self.root_directions, "parents": self.parents, "offsets": self.offsets,
                "clip_mirrored": self.clip_mirrored.astype(np.uint8)}

    def save(self, path: str | Path) -> Path:
        """Write ``path`` (.npz, no pickle) atomically; returns the path."""
        path = Path(path)
        arrays = {k: np.ascontiguousarray(v) for k, v in self._arrays().items()}
        meta = {
            "format": "kinema.matching.database", "format_version": FORMAT_VERSION,
            "builder_version": BUILDER_VERSION, "fingerprint": self.fingerprint,
            "content_sha256": _content_hash(arrays), "fps": self.fps, "mirror": self.mirror,
            "config": self.config.to_dict(), "clip_names": list(self.clip_names),
            "joint_names": list(self.joint_names), "sources": self.sources,
            "feature_layout": [list(g) for g in self.feature_layout],
            "pose_layout": [list(g) for g in self.pose_layout],
        }
        meta["integrity_sha256"] = _integrity_hash(meta)
        arrays["metadata"] = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open_atomic(path) as f:     # streamed into the file: no in-memory copy of the npz
            np.savez(f, **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path, limits: Limits = DEFAULT) -> Database:
        """Read a database written by :meth:`save`; raises :class:`CheckpointError` on a
        damaged, foreign, pickled, relabelled or inconsistent file.

        Checked before use: member sizes against ``limits`` (from the zip directory,
        before reading), the metadata JSON (size, depth, required keys and types), the
        arrays' checksum, the integrity hash over metadata, config, fingerprint and that
        checksum (an edited label is refused), array shapes against the config and the
        skeleton, clip ranges, and finite values.
        """
        path = Path(path)
        if not path.exists():
            raise MissingFileError("database file not found", path)
        check_npz_members(path, limits)
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except ValueError as e:
            raise CheckpointError(f"{path}: not a kinema database (or contains pickled objects): {e}") from None
        except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise CheckpointError(f"{path}: cannot read database: {e}") from None
        missing = [k for k in (*_ARRAYS, "metadata") if k not in data]
        if missing:
            raise CheckpointError(f"{path}: not a kinema database (missing {missing})")
        meta = _metadata(data.pop("metadata"), path, limits)
        if _content_hash(data) != meta["content_sha256"]:
            raise CheckpointError(f"{path}: database contents do not match their checksum (damaged file)")
        if _integrity_hash(meta) != meta["integrity_sha256"]:
            raise CheckpointError(f"{path}: database metadata (fingerprint, config, clips) does not match its "
                                  "integrity hash: the file was edited or relabelled after it was built")
        try:
            config = DatabaseConfig.from_dict(meta["config"], str(path))
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: invalid database config ({e})") from None
        _check_arrays(data, meta, config, path, limits)
        return cls(
            features=data["features"], feature_mean=data["feature_mean"], feature_scale=data["feature_scale"],
            raw_features=data["raw_features"], pose=data["pose"], contacts=data["contacts"].astype(bool),
            root_positions=data["root_positions"], root_directions=data["root_directions"],
            ranges=data["ranges"], clip_names=list(meta["clip_names"]),
            clip_mirrored=data["clip_mirrored"].astype(bool), joint_names=list(meta["joint_names"]),
            parents=data["parents"], offsets=data["offsets"], fps=float(meta["fps"]),
            config=config, mirror=bool(meta["mirror"]),
            fingerprint=str(meta["fingerprint"]), sources=list(meta.get("sources", [])))


# metadata key -> required JSON type(s)
_META_TYPES = {"format": str, "format_version": int, "fingerprint": str, "content_sha256": str,
               "integrity_sha256": str, "fps": (int, float), "mirror": bool, "config": dict,
               "clip_names": list, "joint_names": list}


def _metadata(raw: np.ndarray, path: Path, limits: Limits) -> dict:
    """The database's metadata JSON, with its required keys and their types checked."""
    meta = parse_json(raw.tobytes(), path, "database metadata", limits, CheckpointError)
    if not isinstance(meta, dict) or meta.get("format") != "kinema.matching.database":
        raise CheckpointError(f"{path}: not a kinema database")
    if isinstance(meta.get("format_version"), int) and meta["format_version"] > FORMAT_VERSION:
        raise CheckpointError(f"{path}: database format {meta['format_version']} is newer than this kinema "
                              f"({FORMAT_VERSION})")
    if "integrity_sha256" not in meta and "content_sha256" in meta:
        raise CheckpointError(f"{path}: database written by an older kinema without an integrity hash: "
                              "rebuild it (kinema db build)")
    for key, kind in _META_TYPES.items():
        if key not in meta:
            raise CheckpointError(f"{path}: database metadata lacks {key!r}")
        if not isinstance(meta[key], kind) or (kind is int and isinstance(meta[key], bool)):
            raise CheckpointError(f"{path}: database metadata {key!r} has the wrong type "
                                  f"({type(meta[key]).__name__})")
    for key in ("clip_names", "joint_names"):
        if not all(isinstance(n, str) for n in meta[key]):
            raise CheckpointError(f"{path}: database metadata {key!r} must be a list of strings")
    check_fps(meta["fps"], path, limits)
    return meta


def _check_arrays(data: dict[str, np.ndarray], meta: dict, config: DatabaseConfig, path: Path,
                  limits: Limits) -> None:
    """Shapes consistent with the config, skeleton and clips; ranges in order; values finite."""
    j, c = len(meta["joint_names"]), len(meta["clip_names"])
    n = data["features"].shape[0] if data["features"].ndim == 2 else -1
    d = biped_features(config).width
    want = {"features": (n, d), "raw_features": (n, d), "feature_mean": (d,), "feature_scale": (d,),
            "pose": (n, 12 * j + 6), "contacts": (n, 2), "root_positions": (n, 3), "root_directions": (n, 3),
            "ranges": (c, 2), "parents": (j,), "offsets": (j, 3), "clip_mirrored": (c,)}
    for key, shape in want.items():
        if data[key].shape != shape:
            raise CheckpointError(f"{path}: database array {key!r} has shape {data[key].shape}, expected {shape} "
                                  f"(from {j} joints, {c} clips and the config's {d} features)")
    for key in ("features", "raw_features", "feature_mean", "feature_scale", "pose", "root_positions",
                "root_directions", "offsets"):
        if data[key].dtype.kind != "f" or not np.isfinite(data[key]).all():
            raise CheckpointError(f"{path}: database array {key!r} is not finite floating point")
    ranges = data["ranges"]
    if ranges.dtype.kind not in "iu" or data["parents"].dtype.kind not in "iu":
        raise CheckpointError(f"{path}: database ranges and parents must be integers")
    flat = ranges.reshape(-1).astype(np.int64)
    if c and (flat[0] != 0 or flat[-1] != n or np.any(np.diff(flat) < 0) or np.any(ranges[:, 1] <= ranges[:, 0])):
        raise CheckpointError(f"{path}: database clip ranges are not consecutive non-empty row spans of 0..{n}")
    if not np.all((data["parents"] >= -1) & (data["parents"] < np.arange(j))):
        raise CheckpointError(f"{path}: database parents must precede their children")
    if not np.all(data["feature_scale"] > 0):
        raise CheckpointError(f"{path}: database feature_scale must be positive")


def _integrity_hash(meta: dict) -> str:
    """SHA-256 of the metadata (config, fingerprint, clips, the arrays' checksum...) without
    its own ``integrity_sha256`` entry, as canonical JSON."""
    body = {k: v for k, v in meta.items() if k != "integrity_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _content_hash(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(memoryview(a.reshape(-1)).cast("B"))   # the bytes of tobytes(), without a copy
    return h.hexdigest()


def fingerprint(config: DatabaseConfig, mirror: bool, sources: Sequence[Source]) -> str:
    """16 hex digits of SHA-256 over builder version, config, mirror flag and sources."""
    h = hashlib.sha256()
    h.update(f"kinema.matching.database|{BUILDER_VERSION}|".encode())
    h.update(config.canonical_json().encode())
    h.update(b"|mirror" if mirror else b"|plain")
    for s in sources:
        h.update(f"|{s.name}|{s.digest}".encode())
    return h.hexdigest()[:16]


def build_database(sources: Iterable[Source | object], config: DatabaseConfig | str | Path | None = None,
                   mirror: bool = False, progress: bool = True) -> Database:
    """Build a database from clips of one skeleton.

    Args:
        sources: :class:`Source` items (see :func:`source_from_file`) or Motions.
        config: a :class:`DatabaseConfig`, preset name or JSON path (default LaFAN1).
        mirror: add each clip's mirror image (right after it).
        progress: show a tqdm bar.
    Returns:
        the :class:`Database` (normalised features; search index built on first search).
    """
    from tqdm import tqdm
    config = DatabaseConfig.resolve(config)
    total = len(sources) if isinstance(sources, Sized) else None
    # Streaming: each source's motion is used once and let go (a generator of sources is
    # consumed one at a time), and the clip rows are copied into the final arrays part by
    # part, each part freed as it is copied; so the peak is about one database.
    ids: list[Source] = []          # name and digest of every source (its motion dropped)
    first = None
    parts, names, mirrored, trimmed = [], [], [], []
    for s in tqdm(sources, total=total, desc="database", unit="clip", disable=not progress):
        s = s if isinstance(s, Source) else source_from_motion(s)
        m = s.motion
        if first is None:
            first, first_name = m.skeleton, s.name
        if not first.same_topology(m.skeleton) and sorted(m.joint_names) == sorted(first.names):
            try:  # the same skeleton with its joints listed in another order
                m = m.reorder(first.names)
            except SkeletonError:
                pass
        if not first.same_topology(m.skeleton):
            raise KinemaError(f"clip {s.name!r}: its skeleton differs from {first_name!r} "
                              "(a database holds one skeleton)")
        if config.trim_calibration:
            cut = calibration_frames(m)
            trimmed.append(cut)
            m = m[cut:]
        if m.num_frames < 2:
            raise KinemaError(f"clip {s.name!r} has {m.num_frames} frame(s); at least 2 are needed")
        m = m.at_fps(config.fps, tolerance=0)     # any other rate, however close, is resampled
        variants = [(m, False)] + ([(m.mirror(), True)] if mirror else [])
        for mv, is_mirror in variants:
            parts.append(clip_rows(mv, config))
            names.append(s.name + ("_mirror" if is_mirror else ""))
            mirrored.append(is_mirror)
        ids.append(Source(None, s.name, s.digest))
        del s, m, mv, variants
    if not ids:
        raise KinemaError("build_database needs at least one motion")
    lengths = np.array([len(p["pose"]) for p in parts], np.int64)
    stops = np.cumsum(lengths)
    ranges = np.stack([stops - lengths, stops], axis=1)
    cat = _concatenate_freeing(parts)
    # one scale per group, (mean std of its dimensions) / weight, from float64 sums
    norm = Normaliser.fit(cat["raw_features"].astype(np.float64), biped_features(config).layout)
    return Database(
        features=norm.normalise(cat["raw_features"]), feature_mean=norm.mean, feature_scale=norm.std,
        raw_features=cat["raw_features"],
        pose=cat["pose"], contacts=cat["contacts"], root_positions=cat["root_positions"],
        root_directions=cat["root_directions"], ranges=ranges, clip_names=names,
        clip_mirrored=np.array(mirrored, bool), joint_names=list(first.names),
        parents=np.asarray(first.parents, np.int64), offsets=np.asarray(first.offsets, np.float32),
        fps=float(config.fps), config=config, mirror=bool(mirror), fingerprint=fingerprint(config, mirror, ids),
        sources=[{"name": s.name, "sha256": s.digest, **({"calibration_frames": trimmed[i]} if trimmed else {})}
                 for i, s in enumerate(ids)])


def _concatenate_freeing(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``{key: concatenate([p[key] for p in parts])}``, each part's array dropped once it
    is copied: the output's pages are first written as the parts go, so the two never
    both exist in full (``parts`` is emptied)."""
    out = {}
    freed = 0
    for key in list(parts[0]):
        first = parts[0][key]
        arr = np.empty((sum(len(p[key]) for p in parts),) + first.shape[1:], first.dtype)
        row = 0
        for p in parts:
            a = p.pop(key)
            arr[row:row + len(a)] = a
            row += len(a)
            freed += a.nbytes
            del a
            if freed > _TRIM_BYTES:
                _release_freed_memory()
                freed = 0
        out[key] = arr
    parts.clear()
    _release_freed_memory()
    return out


# The clip parts are freed in the order they were made, between the process's other
# allocations, so glibc keeps their pages in its heap instead of returning them, and the
# output's pages add to them: without a trim the peak was the parts plus the whole output
# (1.25 GB resident for a 0.55 GB Bandai-Namco database, 0.81 GB with one).
_TRIM_BYTES = 64 << 20


def _release_freed_memory() -> None:
    """Return the C heap's free pages to the OS (glibc ``malloc_trim``; a no-op elsewhere)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    import ctypes
    import ctypes.util
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):   # not glibc (macOS, Windows, musl without it)
        return None


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files from ``paths`` (folders searched recursively for supported motion files), once
    each, in one canonical order (sorted by path, so a shell glob, a folder and a list of the
    same files build the same database and fingerprint); raises FileNotFoundError naming a
    missing path."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in FORMATS)
        elif p.exists():
            out.append(p)
        else:
            raise MissingFileError("no such file or folder", p)
    return sorted(set(out))


def build_from_paths(paths: Iterable[str | Path], config: DatabaseConfig | str | Path | None = None,
                     mirror: bool = False, progress: bool = True, **load_options) -> Database:
    """Load every motion file under ``paths`` and build a database (see :func:`build_database`)."""
    files = expand_paths(paths)
    if not files:
        raise KinemaError("no motion files found in the given paths")
    return build_database(_Sources(files, load_options), config, mirror=mirror, progress=progress)


class _Sources:
    """The files' :class:`Source` items, each loaded when it is reached (a sized iterable,
    so the progress bar knows the total): one motion in memory at a time."""

    def __init__(self, files: list[Path], load_options: dict):
        self.files, self.load_options = files, load_options

    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self):
        for f in self.files:
            yield source_from_file(f, **self.load_options)
