"""Training windows from many motions: per-frame caches on disk, vectorised sampling.

:func:`build_dataset` loads clips (any format :func:`kinema.load` reads), resamples them
to one frame rate, optionally adds their mirror images, and writes per-frame caches
(world joint positions, 6D rotations, velocities, the root, contacts and local phases) to
flat float32 files in a folder, one clip after another, so a dataset larger than memory is
streamed to disk clip by clip. :class:`FeatureDataset` opens that folder with
``np.memmap`` (nothing is read until sampled) and turns any batch of frame indices into
feature windows with a handful of fancy-indexing expressions: no Python loop per sample.

The validation split is by clip (a clip and its mirror image always fall on the same
side), never by frame. Normalisation statistics (per-dimension mean and std of every
feature group, over the training frames) are saved next to the caches
(``normalisation.npz``) and load back exactly.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

import kinema.io
from kinema.errors import KinemaError
from kinema.features.calibration import calibration_frames
from kinema.features.contacts import contacts as contact_labels
from kinema.features.contacts import local_phases
from kinema.features.normalisation import Normaliser
from kinema.features.root import JointRef, RootConfig, compute_root, finite_difference, resolve_joint, yaw_rotate
from kinema.features.trajectory import TimeSeries, mirror_sixd, mirror_vectors, quat_to_sixd, sample_indices, sixd_to_root_space

FORMAT_VERSION = 1
GROUPS = ("root_positions", "root_directions", "root_velocities", "joint_positions", "joint_rotations",
          "joint_velocities", "contacts", "phases")
# per-frame cache arrays, each a flat float32 file <name>.f32 of shape (frames, ...)
_CACHES = ("positions", "sixd", "velocities", "root_positions", "root_directions", "root_velocities",
           "contacts", "phases")


@dataclass(frozen=True)
class FeatureSpec:
    """What the windows contain.

    Attributes:
        fps: common frame rate every clip is resampled to.
        root: the root rule (:class:`RootConfig`); None guesses it from the first clip.
        root_series: samples of the root trajectory (positions, directions, velocities;
            x and z only, the root lives on the floor).
        joint_series: samples of the joint features (positions, 6D rotations, velocities
            of ``joints``, contacts and phases), e.g. the current and the next frame.
        joints: joints of the joint features (names or indices; None: all).
        contact_joints: joints with contact labels and local phases (may be empty).
        contact_height: height threshold(s), metres. contact_speed: m/s.
        contact_filter: median filter length, frames.
        trim_calibration: drop each clip's opening calibration T-pose
            (:func:`kinema.features.calibration.calibration_frames`); on in the LaFAN1 preset,
            whose takes all open with one.
    """

    fps: float = 30.0
    root: RootConfig | None = None
    root_series: TimeSeries = TimeSeries(1.0, 1.0, 13)
    joint_series: TimeSeries = TimeSeries(0.0, 1 / 30, 2)
    joints: tuple[JointRef, ...] | None = None
    contact_joints: tuple[JointRef, ...] = ()
    contact_height: float | tuple[float, ...] = 0.12
    contact_speed: float = 0.5
    contact_filter: int = 5
    trim_calibration: bool = False

    @classmethod
    def lafan1(cls, **changes) -> FeatureSpec:
        """LaFAN1: :meth:`RootConfig.lafan1`, contacts on feet and toes, the opening
        calibration T-pose trimmed."""
        return replace(cls(root=RootConfig.lafan1(), contact_joints=("LeftFoot", "LeftToe", "RightFoot", "RightToe"),
                           contact_height=(0.12, 0.05, 0.12, 0.05), trim_calibration=True), **changes)

    @classmethod
    def bandai(cls, **changes) -> FeatureSpec:
        """Bandai-Namco: :meth:`RootConfig.bandai`, contacts on feet and toes (its ankles
        rest about 0.12 m above the floor)."""
        return replace(cls(root=RootConfig.bandai(), contact_joints=("Foot_L", "Toes_L", "Foot_R", "Toes_R"),
                           contact_height=(0.17, 0.07, 0.17, 0.07)), **changes)

    def to_json(self) -> dict:
        d = asdict(self)
        d["root_series"] = asdict(self.root_series)
        d["joint_series"] = asdict(self.joint_series)
        if not self.trim_calibration:    # absent when off: datasets built before it read the same
            del d["trim_calibration"]
        return d

    @classmethod
    def from_json(cls, d: dict) -> FeatureSpec:
        d = dict(d)
        d["root"] = None if d.get("root") is None else RootConfig(**{k: tuple(v) if isinstance(v, list) else v
                                                                     for k, v in d["root"].items()})
        d["root_series"] = TimeSeries(**d["root_series"])
        d["joint_series"] = TimeSeries(**d["joint_series"])
        for k in ("joints", "contact_joints", "contact_height"):
            if isinstance(d.get(k), list):
                d[k] = tuple(d[k])
        return cls(**d)


@dataclass
class ClipInfo:
    """One clip of a dataset: frames ``start:stop`` of the caches."""

    name: str
    source: str
    start: int
    stop: int
    mirrored: bool = False
    split: str = "train"


def clip_caches(motion, spec: FeatureSpec, joints: np.ndarray, contact_joints: np.ndarray,
                root_config: RootConfig) -> dict[str, np.ndarray]:
    """Per-frame caches of one motion (already at ``spec.fps``): world positions (F,J,3),
    6D rotations (F,J,6), velocities (F,J,3) of ``joints``; root positions, directions,
    velocities (F,3); contacts (F,K) and local phases (F,K)."""
    gr, gp = motion.global_transforms()
    root = compute_root(gp, gr, motion.skeleton, root_config)
    out = {
        "positions": gp[:, joints].astype(np.float32),
        "sixd": quat_to_sixd(gr[:, joints]).astype(np.float32),
        "velocities": finite_difference(gp[:, joints], spec.fps),
        "root_positions": root.positions.astype(np.float32),
        "root_directions": root.directions.astype(np.float32),
        "root_velocities": root.velocities(spec.fps),
    }
    if contact_joints.size:
        c = contact_labels(gp, spec.fps, contact_joints, spec.contact_height, spec.contact_speed,
                           spec.contact_filter)
        out["contacts"] = c.astype(np.float32)
        out["phases"] = local_phases(c)
    else:
        out["contacts"] = np.zeros((gp.shape[0], 0), np.float32)
        out["phases"] = np.zeros((gp.shape[0], 0), np.float32)
    return out


def split_by_clip(sources: Sequence[str], validation: float | Iterable[str], seed: int = 0) -> dict[str, str]:
    """``source -> "train" | "validation"``: a fraction of the distinct sources (chosen with
    ``seed``) or the given source names go to validation."""
    unique = sorted(set(sources))
    if isinstance(validation, (int, float)):
        if not 0 <= validation < 1:
            raise KinemaError(f"validation fraction must be in [0, 1), got {validation}")
        n_val = int(math.ceil(validation * len(unique))) if validation > 0 else 0
        if len(unique) > 1:
            n_val = min(n_val, len(unique) - 1)
        order = np.random.default_rng(seed).permutation(len(unique))
        val = {unique[i] for i in order[:n_val]}
    else:
        val = set(validation)
        unknown = val - set(unique)
        if unknown:
            raise KinemaError(f"validation clips not in the dataset: {sorted(unknown)}")
    return {s: ("validation" if s in val else "train") for s in unique}


@dataclass(frozen=True)
class _Setup:
    """What every clip job needs (picklable, for worker processes)."""

    spec: FeatureSpec
    joints: np.ndarray
    contact_joints: np.ndarray
    mirror_map: np.ndarray | None
    mirror: bool
    names: tuple[str, ...]
    parents: tuple[int, ...]
    load_options: dict


def _load(path: Path, spec: FeatureSpec, load_options: dict):
    motion = kinema.io.load(path, **load_options)
    if spec.trim_calibration:
        motion = motion[calibration_frames(motion):]
    return motion.at_fps(spec.fps, tolerance=0)


def _clip_job(item, setup: _Setup) -> list[tuple[str, bool, dict[str, np.ndarray]]]:
    """Caches of one clip (and its mirror): [(name, mirrored, caches)]."""
    path, motion = item
    if motion is None:
        motion = _load(path, setup.spec, setup.load_options)
    sk = motion.skeleton
    if tuple(sk.names) != setup.names or tuple(sk.parents.tolist()) != setup.parents:
        raise KinemaError(f"{path}: its skeleton differs from the first clip's; build one dataset per skeleton")
    variants = [(motion, False)]
    if setup.mirror:
        variants.append((motion.mirror(mapping=setup.mirror_map), True))
    return [(m.name or path.stem, mirrored,
             clip_caches(m, setup.spec, setup.joints, setup.contact_joints, setup.spec.root))
            for m, mirrored in variants]


def build_dataset(paths: Sequence[str | Path], out_dir: str | Path, spec: FeatureSpec | None = None, *,
                  mirror: bool = False, validation: float | Iterable[str] = 0.1, seed: int = 0,
                  progress: bool = True, load_options: dict | None = None, workers: int = 1) -> FeatureDataset:
    """Load, resample, (mirror,) compute per-frame caches and write them to ``out_dir``.

    Args:
        paths: motion files (one skeleton topology for all of them).
        out_dir: folder to create (must not hold a dataset already).
        spec: :class:`FeatureSpec` (default: ``FeatureSpec()`` with a guessed root).
        mirror: also store every clip's mirror image (same split as the original).
        validation: fraction of clips, or the source paths/stems, for validation.
        seed: for the split.
        progress: show a tqdm bar.
        load_options: passed to :func:`kinema.load`.
        workers: processes computing clip caches in parallel (1: in this process); the
            caches are written in file order either way, so the result is identical.
    Returns:
        the opened :class:`FeatureDataset` with normalisation computed and saved.
    """
    spec = spec or FeatureSpec()
    out = Path(out_dir)
    if (out / "dataset.json").exists():
        raise KinemaError(f"{out} already holds a dataset; choose an empty folder")
    paths = [Path(p) for p in paths]
    if not paths:
        raise KinemaError("build_dataset needs at least one motion file")
    out.mkdir(parents=True, exist_ok=True)
    load_options = dict(load_options or {})
    first = _load(paths[0], spec, load_options)
    skeleton = first.skeleton
    spec = replace(spec, root=spec.root or RootConfig.guess(skeleton))
    joints = np.arange(skeleton.num_joints) if spec.joints is None else \
        np.array([resolve_joint(skeleton, j) for j in spec.joints], np.int64)
    contact_joints = np.array([resolve_joint(skeleton, j) for j in spec.contact_joints], np.int64)
    try:
        mirror_map = skeleton.mirror_map()
    except KinemaError:
        if mirror:
            raise
        mirror_map = None
    setup = _Setup(spec, joints, contact_joints, mirror_map, mirror, tuple(skeleton.names),
                   tuple(skeleton.parents.tolist()), load_options)
    items = [(paths[0], first)] + [(p, None) for p in paths[1:]]
    files = {name: open(out / f"{name}.f32", "wb") for name in _CACHES}
    clips: list[ClipInfo] = []
    total = 0
    shapes: dict[str, tuple[int, ...]] = {}
    pool = None
    try:
        from functools import partial

        from tqdm import tqdm
        job = partial(_clip_job, setup=setup)
        if workers > 1 and len(items) > 1:
            from concurrent.futures import ProcessPoolExecutor
            pool = ProcessPoolExecutor(max_workers=workers)
            results = pool.map(job, items, chunksize=max(1, min(8, len(items) // (4 * workers))))
        else:
            results = map(job, items)
        for (path, _), variants in tqdm(zip(items, results), total=len(items), desc="features", unit="clip",
                                        disable=not progress):
            for name, mirrored, caches in variants:
                n = caches["positions"].shape[0]
                for key, arr in caches.items():
                    shapes[key] = arr.shape[1:]
                    files[key].write(np.ascontiguousarray(arr, np.float32).tobytes())
                clips.append(ClipInfo(name, str(path), total, total + n, mirrored))
                total += n
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        for f in files.values():
            f.close()
    split = split_by_clip([c.source for c in clips], validation, seed)
    for c in clips:
        c.split = split[c.source]
    meta = {
        "format": "kinema-features", "version": FORMAT_VERSION, "frames": total,
        "shapes": {k: list(v) for k, v in shapes.items()}, "spec": spec.to_json(),
        "joint_names": [skeleton.names[j] for j in joints], "parents": skeleton.parents.tolist(),
        "joints": joints.tolist(), "contact_joints": contact_joints.tolist(),
        "mirror_map": None if mirror_map is None else _subset_map(mirror_map, joints),
        "skeleton_mirror_map": None if mirror_map is None else mirror_map.tolist(),
        "clips": [asdict(c) for c in clips],
    }
    (out / "dataset.json").write_text(json.dumps(meta, indent=1))
    ds = FeatureDataset(out)
    ds.compute_normalisation(progress=progress).save(out / "normalisation.npz")
    return FeatureDataset(out)


def _subset_map(mirror_map: np.ndarray, joints: np.ndarray) -> list[int] | None:
    where = {int(j): i for i, j in enumerate(joints)}
    try:
        return [where[int(mirror_map[j])] for j in joints]
    except KeyError:
        return None


@dataclass
class Normalisation:
    """A per-dimension :class:`~kinema.features.normalisation.Normaliser` for each feature
    group: ``{group: Normaliser}``, saved as ``<group>/mean`` and ``<group>/std``."""

    groups: dict[str, Normaliser] = field(default_factory=dict)

    @property
    def mean(self) -> dict[str, np.ndarray]:
        return {k: n.mean for k, n in self.groups.items()}

    @property
    def std(self) -> dict[str, np.ndarray]:
        return {k: n.std for k, n in self.groups.items()}

    def normalise(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: self.groups[k].normalise(v) for k, v in batch.items()}

    def denormalise(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: self.groups[k].denormalise(v) for k, v in batch.items()}

    def save(self, path: str | Path) -> None:
        arrays = {f"{k}/mean": n.mean for k, n in self.groups.items()}
        arrays.update({f"{k}/std": n.std for k, n in self.groups.items()})
        np.savez(path, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> Normalisation:
        with np.load(path, allow_pickle=False) as z:
            keys = {k.rsplit("/", 1)[0] for k in z.files}
            return cls({k: Normaliser(z[f"{k}/mean"], z[f"{k}/std"]) for k in keys})


class FeatureDataset:
    """A dataset folder written by :func:`build_dataset`, memory-mapped.

    Attributes:
        spec: the :class:`FeatureSpec`; clips: list of :class:`ClipInfo`;
        caches: per-frame arrays (np.memmap); starts/stops: (C,) clip bounds;
        clip_of: (frames,) clip index of every frame.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        path = self.folder / "dataset.json"
        if not path.exists():
            raise KinemaError(f"{self.folder} holds no dataset (dataset.json missing)")
        meta = json.loads(path.read_text())
        if meta.get("format") != "kinema-features" or meta.get("version") != FORMAT_VERSION:
            raise KinemaError(f"{path}: not a kinema feature dataset of version {FORMAT_VERSION}")
        self.meta = meta
        self.spec = FeatureSpec.from_json(meta["spec"])
        self.clips = [ClipInfo(**c) for c in meta["clips"]]
        self.num_frames = int(meta["frames"])
        self.caches = {}
        for name in _CACHES:
            shape = (self.num_frames, *meta["shapes"][name])
            file = self.folder / f"{name}.f32"
            if file.stat().st_size != 4 * int(np.prod(shape)):
                raise KinemaError(f"{file}: size does not match {shape} float32 (truncated or corrupted)")
            self.caches[name] = np.memmap(file, np.float32, "r", shape=shape) if np.prod(shape) else \
                np.zeros(shape, np.float32)
        self.starts = np.array([c.start for c in self.clips], np.int64)
        self.stops = np.array([c.stop for c in self.clips], np.int64)
        self.clip_of = np.repeat(np.arange(len(self.clips)), self.stops - self.starts)
        self.root_offsets = self.spec.root_series.offsets(self.spec.fps)
        self.joint_offsets = self.spec.joint_series.offsets(self.spec.fps)
        norm = self.folder / "normalisation.npz"
        self.normalisation = Normalisation.load(norm) if norm.exists() else None

    def __len__(self) -> int:
        return self.num_frames

    def frames(self, split: str | None = None) -> np.ndarray:
        """All frame indices of the clips in ``split`` ("train", "validation"; None: all)."""
        keep = [i for i, c in enumerate(self.clips) if split is None or c.split == split]
        if not keep:
            return np.zeros(0, np.int64)
        return np.concatenate([np.arange(self.starts[i], self.stops[i]) for i in keep])

    def group_sizes(self) -> dict[str, int]:
        """Flattened width of every feature group."""
        s_root, s_joint = len(self.root_offsets), len(self.joint_offsets)
        k = self.caches["positions"].shape[1]
        c = self.caches["contacts"].shape[1]
        return {"root_positions": 2 * s_root, "root_directions": 2 * s_root, "root_velocities": 2 * s_root,
                "joint_positions": 3 * s_joint * k, "joint_rotations": 6 * s_joint * k,
                "joint_velocities": 3 * s_joint * k, "contacts": s_joint * c, "phases": 2 * s_joint * c}

    def sample(self, frames: np.ndarray, mirror: np.ndarray | bool = False) -> dict[str, np.ndarray]:
        """Feature windows of a batch of frames, each group flattened to (B, D) float32.

        Root trajectory groups hold x, z per sample; joint groups hold (S, K, 3|6) per
        sample; contacts (S, K); phases (S, K, 2) as (sin, cos). ``mirror`` (bool or (B,)
        bool) mirrors chosen samples in feature space (exactly the features of the mirrored
        clip; needs the skeleton's left/right map, stored at build time when the names
        give one, and joint/contact subsets that contain each joint's twin).
        """
        frames = np.asarray(frames, np.int64).reshape(-1)
        if frames.size and (frames.min() < 0 or frames.max() >= self.num_frames):
            raise KinemaError(f"frames must lie in [0, {self.num_frames})")
        cl = self.clip_of[frames]
        lo, hi = self.starts[cl], self.stops[cl]
        c = self.caches
        b = frames.size
        # the current root of every sample
        rp = np.asarray(c["root_positions"][frames])
        rd = np.asarray(c["root_directions"][frames])
        ri = sample_indices(frames, self.root_offsets, lo, hi)
        d1 = rd[:, None, :]
        out = {
            "root_positions": yaw_rotate(d1, c["root_positions"][ri.ravel()].reshape(ri.shape + (3,)) - rp[:, None],
                                         inverse=True)[..., [0, 2]],
            "root_directions": yaw_rotate(d1, c["root_directions"][ri.ravel()].reshape(ri.shape + (3,)),
                                          inverse=True)[..., [0, 2]],
            "root_velocities": yaw_rotate(d1, c["root_velocities"][ri.ravel()].reshape(ri.shape + (3,)),
                                          inverse=True)[..., [0, 2]],
        }
        ji = sample_indices(frames, self.joint_offsets, lo, hi).ravel()
        s = len(self.joint_offsets)
        k = c["positions"].shape[1]
        d2 = rd[:, None, None, :]
        pos = c["positions"][ji].reshape(b, s, k, 3)
        out["joint_positions"] = yaw_rotate(d2, pos - rp[:, None, None], inverse=True)
        out["joint_rotations"] = sixd_to_root_space(d2, c["sixd"][ji].reshape(b, s, k, 6))
        out["joint_velocities"] = yaw_rotate(d2, c["velocities"][ji].reshape(b, s, k, 3), inverse=True)
        out["contacts"] = np.asarray(c["contacts"][ji]).reshape(b, s, -1)
        ph = 2 * np.pi * np.asarray(c["phases"][ji], np.float32).reshape(b, s, -1)
        out["phases"] = np.stack([np.sin(ph), np.cos(ph)], -1)
        if np.any(mirror):
            out = self._mirror(out, np.broadcast_to(np.asarray(mirror, bool), (b,)))
        return {name: out[name].reshape(b, -1).astype(np.float32, copy=False) for name in GROUPS}

    def _mirror(self, out: dict[str, np.ndarray], which: np.ndarray) -> dict[str, np.ndarray]:
        jm = self.meta.get("mirror_map")
        full = self.meta.get("skeleton_mirror_map")
        if jm is None or full is None:
            raise KinemaError(f"{self.folder}: no left/right mirror map for its joints; cannot mirror")
        cj = self.meta["contact_joints"]
        if any(full[j] not in cj for j in cj):
            raise KinemaError(f"{self.folder}: the contact joints are not closed under mirroring")
        cm = [cj.index(full[j]) for j in cj]
        res = dict(out)
        w = which
        for g in ("root_positions", "root_directions", "root_velocities"):
            v = out[g].copy()
            v[w, :, 0] *= -1
            res[g] = v
        for g, fn in (("joint_positions", mirror_vectors), ("joint_rotations", mirror_sixd),
                      ("joint_velocities", mirror_vectors)):
            v = out[g].copy()
            v[w] = fn(out[g][w][:, :, jm])
            res[g] = v
        for g in ("contacts", "phases"):
            v = out[g].copy()
            v[w] = out[g][w][:, :, cm]
            res[g] = v
        return res

    def compute_normalisation(self, split: str = "train", batch_size: int = 65536, progress: bool = False,
                              max_frames: int | None = 1_000_000) -> Normalisation:
        """Per-dimension mean and std of every group over the frames of ``split``
        (all frames when the split is empty); std is floored at 1e-6. Above ``max_frames``
        frames an evenly strided subset of about that many frames is used (None: all)."""
        frames = self.frames(split)
        if frames.size == 0:
            frames = self.frames()
        if max_frames is not None and frames.size > max_frames:
            frames = frames[::int(math.ceil(frames.size / max_frames))]
        sums: dict[str, np.ndarray] = {}
        sq: dict[str, np.ndarray] = {}
        from tqdm import tqdm
        for i in tqdm(range(0, frames.size, batch_size), desc="normalisation", disable=not progress):
            batch = self.sample(frames[i:i + batch_size])
            for k, v in batch.items():
                sums[k] = sums.get(k, 0) + v.sum(0, dtype=np.float64)
                sq[k] = sq.get(k, 0) + np.einsum("bd,bd->d", v, v, dtype=np.float64)
        n = max(frames.size, 1)
        return Normalisation({k: Normaliser.from_moments(n, sums[k], sq[k], floor=1e-6) for k in sums})

    def batches(self, split: str = "train", batch_size: int = 1024, shuffle: bool = True, seed: int = 0,
                normalise: bool = False, mirror_probability: float = 0.0):
        """Iterate over feature batches (dicts of (B, D) arrays) covering ``split`` once."""
        frames = self.frames(split)
        rng = np.random.default_rng(seed)
        if shuffle:
            frames = rng.permutation(frames)
        for i in range(0, frames.size, batch_size):
            f = frames[i:i + batch_size]
            mirror = rng.random(f.size) < mirror_probability if mirror_probability else False
            batch = self.sample(f, mirror)
            yield self.normalisation.normalise(batch) if normalise else batch

    def torch_dataset(self, split: str = "train", batch_size: int = 1024, shuffle: bool = True, seed: int = 0,
                      normalise: bool = True, mirror_probability: float = 0.0) -> TorchBatches:
        """A map-style torch Dataset whose items are whole batches (see :class:`TorchBatches`)."""
        return TorchBatches(self, split, batch_size, shuffle, seed, normalise, mirror_probability)

    def dataloader(self, split: str = "train", batch_size: int = 1024, shuffle: bool = True, seed: int = 0,
                   normalise: bool = True, mirror_probability: float = 0.0, num_workers: int = 0):
        """A ``torch.utils.data.DataLoader`` of ready batches (``batch_size=None``: each item
        already is a vectorised batch); works with ``num_workers=0``."""
        import torch.utils.data
        ds = self.torch_dataset(split, batch_size, shuffle, seed, normalise, mirror_probability)
        return torch.utils.data.DataLoader(ds, batch_size=None, shuffle=False, num_workers=num_workers)


class TorchBatches:
    """Batches of a :class:`FeatureDataset` split as a map-style torch dataset.

    Item ``i`` is batch ``i`` of this epoch's order: a dict of float32 tensors (B, D);
    use it with ``DataLoader(..., batch_size=None)``. Call :meth:`set_epoch` to reshuffle.
    torch is imported only when an item is read.
    """

    def __init__(self, dataset: FeatureDataset, split: str, batch_size: int, shuffle: bool, seed: int,
                 normalise: bool, mirror_probability: float):
        if normalise and dataset.normalisation is None:
            raise KinemaError(f"{dataset.folder}: no normalisation.npz; compute and save it first")
        self.dataset = dataset
        self.frames = dataset.frames(split)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.seed = seed
        self.normalise = normalise
        self.mirror_probability = mirror_probability
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        rng = np.random.default_rng((self.seed, epoch))
        self.order = rng.permutation(self.frames) if self.shuffle else self.frames
        self.mirror = rng.random(self.frames.size) < self.mirror_probability

    def __len__(self) -> int:
        return (self.frames.size + self.batch_size - 1) // self.batch_size

    def __getitem__(self, i: int) -> dict:
        import torch
        if not 0 <= i < len(self):
            raise IndexError(i)
        sl = slice(i * self.batch_size, (i + 1) * self.batch_size)
        batch = self.dataset.sample(self.order[sl], self.mirror[sl] if self.mirror_probability else False)
        if self.normalise:
            batch = self.dataset.normalisation.normalise(batch)
        return {k: torch.from_numpy(v) for k, v in batch.items()}
