"""Training recipe of the retrieval-augmented controller (NOTES.md 3.3), from a config file.

Stages (one set of weights):

1. ``warmup`` steps, teacher forced on windows: noise on the previous pose
   (sigma ~ U(0, ``pose_noise``) per sequence, normalised units), previous-pose dropout to
   the mean pose (``pose_dropout`` per frame), candidate dropout to the learned null token
   (all with ``drop_all``, each with ``drop_each``, and whole sequences with
   ``drop_sequence``: the null-token ablation of a whole rollout is then a trained case).
2. ``scheduled`` steps: teacher-forced context, then rollouts with gradients through the
   rollout; horizon ramps ``horizon[0] -> horizon[1]`` and the probability of feeding the
   model its own prediction ramps 0 -> 1; retrieval re-runs from the predictions.
3. ``free`` steps: free-running rollouts of ``free_horizon`` frames with truncated BPTT
   (``detach_every``), candidate dropout kept. With ``free_chain`` = n > 1, n steps in a
   row continue the same rollouts (:class:`~kinema.control.retrieval.rollout.Carry`), so
   the losses also read the states a model reaches only after n x ``free_horizon`` frames
   of driving itself (its continued rollouts' pose terms count ``chain_pose_weight``
   times); a chain also ends at each validation.

Loss: normalised pose MSE + ``contact_weight`` x contact BCE + ``position_weight`` x the MSE of
the joint-position columns; with ``tf_mix`` > 0 the stages 2 and 3 add that much of the
stage-1 teacher-forced loss to each step. With ``rigid`` every predicted pose has its joint
positions rebuilt from its rotations (:func:`kinema.control.retrieval.pose.rigid_pose`)
before the loss and before it is fed back, as the runtime draws it: the network learns
rotations that put the joints where they belong, and no pose can stretch a bone; with
``ground`` too, no pose reaches below the data's lowest toe (the retriever's ``ground``, as
the runtime and the evaluation always apply it; off by default: the LaFAN1 recipe trained
with it fell and crouched more in the crowd, `benchmarks/results/controller_protocol.md`,
session 15; but without it the toe-height terms read legs sunk into the floor that the
runtime lifts, session 23, `benchmarks/diagnose_ground_gap.py`). With
``skate_weight`` > 0 the rollouts add that much of :func:`skate_loss` (toe displacement in
the frames whose contact is on: the truth's labels with ``skate_on = "truth"``, or the
predicted pose's own toes on the floor with ``"own"``, the frames the skating metric reads);
with ``energy_weight`` > 0 that much of :func:`energy_loss` (the squared log of each
rollout's joint-speed ratio to the truth's: a damped rollout pays for moving less than the
actor, which the pose MSE rewards past the first second); with ``accel_weight`` > 0 that
much of :func:`accel_loss` (the same for joint acceleration: a jittering rollout pays for
accelerating more than the actor); with ``path_weight`` > 0 that much of :func:`path_loss`
(the rollout's root, integrated from its predicted root motion, against the clip's: what
the control metrics read, with gradients through the integration); ``stride_weight`` and
``posture_weight`` charge each second of a rollout whose toes move slower than the actor's
(:func:`stride_loss`, the glide) or whose hips sit lower or higher (:func:`posture_loss`,
the slow sink into a crouch seen in the crowd). With ``stick_weight`` > 0 every free step
also runs ``stick_batch`` rollouts whose joystick comes from wandering sticks through the
runtime's springs (:class:`~kinema.control.retrieval.steering.StickSteer`), as a user drives
the controller, and adds that much of their self-supervised terms (:func:`stick_loss`:
stride against the data's stride ratio, the requested path, the hips within a band of the
standing height, skating on the predicted toes; ``stick_stride``, 1 by default, weighs the
stride term); with ``stick_chain`` = n those rollouts
continue over up to n free steps (their sticks run on), as ``free_chain`` continues the
truth-driven ones, ``stick_idle`` of them keep the stick released and ``stick_release`` of
the others let go of it after a walk or a run, ``stick_reverse`` of them snap it to the
opposite direction every 1.5-5 s (the wandering sticks never turn faster than 0.4 rad/s);
``stick_stand`` > 0 adds that much of
:func:`stand_loss` (both toes down once the requested path has stood still for a second:
let go after a run, the LaFAN1 models knelt or stood on one leg); ``stick_touch`` > 0
adds that much of :func:`touch_loss` (a toe on the floor at least every half second: while
walking on a stop-and-go stick the LaFAN1 model floated up, toes 20-30 cm off the floor);
``stick_step`` > 0 adds that much of :func:`step_loss` (each toe on the floor at least once a
second while the requested path moves: with the skating term, weighted by ``stick_skate``,
the root can then only move by stepping, not by gliding on both feet or hopping on one);
``stick_support`` > 0 adds that much of :func:`support_loss` (the lower toe's median height
in every second the requested path moves: the LaFAN1 network walked with its support toe
16-19 cm up, which one touch a second passes); ``stick_still`` > 0 adds that much of
:func:`still_loss` (the root's net drift in each second the requested path stands: let go of
for five minutes, a no-dropout sample network crept 10 m with its toes planted; on the sample
it raised the crowd's skating on each of three seeds and held the idle on two: no shipped
recipe uses it, protocol session 41); ``stick_torso`` > 0 adds that much of
:func:`torso_loss` (the head kept above the hips by most of the data's torso height: let go
of, the Bandai-Namco networks bowed until the head hung at the hips' height, which the hips'
posture term never sees); ``stick_adjust`` pulls their roots toward the
springs every frame as the runtime does (:func:`~kinema.control.retrieval.rollout.adjust_roots`:
running, it added a quarter of the LaFAN1 network's own speed, which the legs never paid for)
and scores the stride and skating on those drawn roots. The checkpoint is selected on the free-running
validation loss plus each trained term's weight times its validation value
(:func:`selection_key`). With ``init`` (a finished checkpoint's path) the run starts from
that checkpoint's weights instead of fresh ones (:func:`start_from`; same database and
architecture): e.g. ``--set train.init=RUN.safetensors --set train.warmup=0 --set
train.scheduled=0`` gives a trained model more free-stage steps, or new terms.

Config (TOML or JSON): sections ``data`` (``clips``: globs, ``sample:``/``shared:``
prefixes resolve through :mod:`kinema.data`; ``validation``: clip names held out and used
to select the checkpoint; ``test``: clip names held out from both, the default evaluation clips;
``database``: a :class:`kinema.matching.config.DatabaseConfig` preset name or dict, default
``"lafan1"``; ``mirror``: add mirrored clips, default true). The retrieval database is
:func:`kinema.matching.database.build_database` of the training clips, so
``kinema db build TRAINING_CLIPS --config PRESET --mirror`` rebuilds it with the same
fingerprint (the checkpoint's metadata holds the exact command).
``model`` (RetrievalMamba arguments), ``retrieval`` (top, tau, refresh; ``random = true``
trains on uniformly random rows: the control of the ablations; ``exclude_group``: a regular
expression naming a clip's group, e.g. its actor, whose other clips a training query may
not retrieve either, see :func:`clip_groups`; ``own_share``, ``own_shift``: the share of
teacher-forced windows given one candidate from their own take, shifted by up to
``own_shift`` frames, see :class:`~kinema.control.retrieval.sequences.WindowSampler`; with
``own_rollouts = true`` also that share of the rollouts that follow their take,
:class:`~kinema.control.retrieval.sequences.OwnTake`), ``train``
(see :class:`TrainSettings`) and ``out`` (checkpoint path).
"""
from __future__ import annotations

import copy
import glob
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from kinema.control.planted import plant_weights, planted_shift
from kinema.control.retrieval.metrics import floor_height, pose_slice
from kinema.control.retrieval.pose import joint_steps, rigid_pose_normalised
from kinema.control.retrieval.rollout import Carry, Rollout, rollout, teacher_forced_candidates, toe_positions
from kinema.control.retrieval.scenarios import TOE_DOWN_M, database_stride_ratio, head_joint, standing_hips, standing_torso
from kinema.control.retrieval.sequences import OwnTake, RandomRetriever, Retriever, WindowSampler
from kinema.control.retrieval.steering import StickSteer
from kinema.data import PREFIXES, data_relative, portable_path, sample_root, shared_root
from kinema.errors import KinemaError, NonFiniteError
from kinema.features.normalisation import Normaliser
from kinema.matching.config import DatabaseConfig
from kinema.matching.database import Database, build_database, expand_paths, source_from_file, upright_rows
from kinema.maths import angles
from kinema.nn.checkpoint import save_checkpoint
from kinema.nn.kinematic import KinematicPrior
from kinema.nn.retrieval import RetrievalMamba
from kinema.nn.retrieval_concat import ConcatRetrievalMamba

SKATE_ON = ("truth", "own")


@dataclass
class TrainSettings:
    """The ``[train]`` table of a retrieval config (stored in the checkpoint): batch and
    window sizes, the step counts of the teacher-forced -> scheduled -> free-running
    curriculum, noise and dropout of the conditioning, loss term weights, validation.

    Not :class:`kinema.nn.train.TrainConfig`: that drives the epoch-based supervised
    :class:`~kinema.nn.train.Trainer`; this curriculum is stepped by :func:`train` here, and
    its field names are the keys the configs and shipped checkpoints hold.
    """

    seed: int = 0
    batch: int = 16
    window: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    clip_grad: float = 1.0
    warmup: int = 200
    scheduled: int = 200
    free: int = 200
    context: int = 16
    horizon: tuple[int, int] = (8, 48)
    free_horizon: int = 96
    detach_every: int = 32
    pose_noise: float = 0.5
    pose_dropout: float = 0.2
    drop_all: float = 0.15
    drop_each: float = 0.1
    drop_sequence: float = 0.1
    contact_weight: float = 0.1
    position_weight: float = 0.0
    tf_mix: float = 0.0
    eval_every: int = 50
    val_windows: int = 16
    val_horizon: int = 60
    threads: int = 1
    device: str = "cpu"
    rigid: bool = False       # joint positions rebuilt from the predicted rotations, hips within the data's reach of the root
    ground: bool = False      # with rigid: training's poses are also lifted above the data's lowest toe, as the runtime draws them
    unit_6d: bool = False     # with rigid: every predicted 6D is made the unit columns of its rotation before it is scored and fed back
    rebuilt_velocities: bool = False   # with rigid: every predicted pose's joint velocities are its joints' motion from the pose before
    skate_weight: float = 0.0
    skate_on: str = "truth"   # "truth": the target's contact labels; "own": the predicted toes on the floor
    energy_weight: float = 0.0
    accel_weight: float = 0.0
    stride_weight: float = 0.0   # the toes' character-space speed per second of rollout against the truth's
    posture_weight: float = 0.0  # the hips' height per second of rollout against the truth's (sinking, falling)
    upright: bool = False     # train only on windows and rollouts where the data stays on its feet (a locomotion controller)
    upright_rollouts: bool = False  # only the free rollouts start where the data stays on its feet (teacher forcing sees every row)
    path_weight: float = 0.0
    planted: bool = False     # rollouts move their roots by the planted-foot rule, as the runtime may
    free_chain: int = 1       # free-stage steps in a row that continue the same rollouts (1: each starts from the truth)
    chain_pose_weight: float = 1.0   # the pose and contact terms' weight in a chain's continued rollouts
    stick_weight: float = 0.0  # free stage: stick-driven rollouts' self-supervised terms (stick_loss), this much
    stick_batch: int = 8       # ... how many stick-driven rollouts each free step adds
    stick_chain: int = 1       # ... free steps in a row that continue the same stick-driven rollouts (as free_chain)
    stick_idle: float = 0.0    # ... the share of them (and of the validation's) whose stick stays released
    stick_release: float = 0.0  # ... the share of the others that let go of it for good after 0.5-6 s of driving
    stick_reverse: float = 0.0  # ... the share of them that snap the stick to the opposite direction every 1.5-5 s
    stick_stand: float = 0.0   # ... this much of stand_loss (both toes down once the requested path stands)
    stick_touch: float = 0.0   # ... this much of touch_loss (a toe on the floor at least every half second)
    stick_stride: float = 1.0  # ... this much of the stride term (the toes' speed against the data's stride ratio)
    stick_skate: float = 0.1   # ... this much of the skating term (skate_loss on the predicted toes on the floor)
    stick_step: float = 0.0    # ... this much of step_loss (each toe down once a second while the path moves)
    stick_support: float = 0.0  # ... this much of support_loss (the lower toe's median height each second the path moves)
    stick_still: float = 0.0   # ... this much of still_loss (the root's drift in each second the requested path stands)
    stick_posture: float = 1.0  # ... this much of the posture term (hips outside UPRIGHT_BAND of the standing height)
    stick_torso: float = 0.0   # ... this much of torso_loss (the head less than TORSO_SHARE of the data's torso above the hips)
    stick_adjust: bool = False  # ... roots pulled toward the springs as at runtime; stride and skating read those drawn roots
    init: str = ""             # a finished checkpoint (same database and architecture) to start from instead of fresh weights

    @property
    def upright_free(self) -> bool:
        """Whether the free rollouts start only where the data stays on its feet (``upright``
        or ``upright_rollouts``; the stick rollouts always do)."""
        return self.upright or self.upright_rollouts

    def __post_init__(self) -> None:
        if self.skate_on not in SKATE_ON:
            raise KinemaError(f"train.skate_on must be one of {SKATE_ON}, got {self.skate_on!r}")
        if self.free_chain < 1 or self.stick_chain < 1:
            raise KinemaError(f"train.free_chain and train.stick_chain must be 1 or more, got {self.free_chain} "
                              f"and {self.stick_chain}")
        for name in ("stick_idle", "stick_release", "stick_reverse"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise KinemaError(f"train.{name} is a share of the stick-driven rollouts, in [0, 1], "
                                  f"got {getattr(self, name)}")


def resolve_clips(patterns: list[str], base: Path | None = None) -> list[Path]:
    """Expand globs; ``sample:`` and ``shared:`` prefixes resolve in the bundled sample and
    the shared data folder; other relative paths against ``base``."""

    out: list[Path] = []
    for pat in patterns:
        if pat.startswith("sample:"):
            root, pat = sample_root(), pat[len("sample:"):]
        elif pat.startswith("shared:"):
            root, pat = shared_root(), pat[len("shared:"):]
            if root is None:
                raise KinemaError("the config needs the shared data folder (set KINEMA_DATA)")
        else:
            root = base or Path.cwd()
        hits = sorted(Path(p) for p in glob.glob(str(Path(root) / pat)))
        if not hits:
            raise KinemaError(f"no clip matches {pat!r} under {root}")
        out += hits
    return out


def load_config(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise KinemaError(f"{path}: config not found")
    if path.suffix == ".toml":
        import tomllib
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
    else:
        cfg = json.loads(path.read_text())
    cfg.setdefault("data", {}).setdefault("base", str(path.parent))
    cfg.setdefault("source", portable_path(path))
    return cfg


def apply_overrides(cfg: dict, overrides: list[str]) -> dict:
    """Set ``SECTION.KEY=VALUE`` items in ``cfg`` (VALUE parsed as JSON, else kept as text)."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise KinemaError(f"--set expects SECTION.KEY=VALUE, got {item!r}")
        section, name = key.split(".", 1)
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        cfg.setdefault(section, {})[name] = parsed
    return cfg


def validation_clips(meta: dict, selection: bool = False) -> list[str]:
    """Paths of the checkpoint's held-out evaluation clips (its test clips, else its
    validation clips; with ``selection`` its validation clips, those that selected the
    checkpoint), resolved like its training config."""
    cfg = meta["config"]
    base = cfg["data"].get("base")
    paths = resolve_clips(cfg["data"]["clips"], None if base is None else Path(base))
    validation = meta.get("validation_clips", cfg["data"].get("validation", []))
    held = set(validation if selection else meta.get("test_clips") or validation)
    return [str(p) for p in paths if p.stem in held]


def settings(cfg: dict) -> TrainSettings:
    known = {f.name for f in fields(TrainSettings)}
    raw = dict(cfg.get("train", {}))
    bad = set(raw) - known
    if bad:
        raise KinemaError(f"unknown [train] settings {sorted(bad)}; known: {sorted(known)}")
    if "horizon" in raw:
        raw["horizon"] = tuple(raw["horizon"])
    return TrainSettings(**raw)


def database_config(cfg: dict) -> DatabaseConfig:
    """The :class:`DatabaseConfig` of a training config's ``data.database`` (preset or dict)."""
    spec = cfg["data"].get("database", "lafan1")
    return DatabaseConfig.from_dict(spec, "data.database") if isinstance(spec, dict) else DatabaseConfig.resolve(spec)


def split_clips(cfg: dict) -> tuple[list[Path], list[Path]]:
    """(training clips, validation clips) of a config, split by clip name; the ``test``
    clips are in neither."""
    data = cfg["data"]
    paths = resolve_clips(data["clips"], Path(data.get("base", ".")))
    held = set(data.get("validation", []))
    test = set(data.get("test", []))
    if held & test:
        raise KinemaError(f"clips both in validation and test: {sorted(held & test)}")
    missing = sorted((held | test) - {p.stem for p in paths})
    if missing:
        raise KinemaError(f"validation/test clips not among the config's clips: {missing}")
    train = [p for p in paths if p.stem not in held | test]
    val = [p for p in paths if p.stem in held]
    if not train or not val:
        raise KinemaError(f"the split by clip needs training and validation clips (validation={sorted(held)})")
    return train, val


def build_clips(paths: list[Path], config: DatabaseConfig, mirror: bool, progress: bool = False,
                like: Database | None = None) -> Database:
    """A :class:`Database` of motion files, as ``kinema db build`` builds it (the files in
    :func:`~kinema.matching.database.expand_paths` order, their bytes in the fingerprint);
    ``like``: list the joints in that database's order (for held-out clips)."""
    sources = [source_from_file(p) for p in expand_paths(paths)]
    if like is not None:
        for s in sources:
            if s.motion.joint_names != like.joint_names:
                s.motion = s.motion.reorder(like.joint_names)
    return build_database(sources, config, mirror=mirror, progress=progress)


def build_databases(cfg: dict) -> tuple[Database, Database]:
    """(training database = retrieval database, validation clips without mirrors)."""
    train, val = split_clips(cfg)
    config = database_config(cfg)
    db = build_clips(train, config, bool(cfg["data"].get("mirror", True)), progress=len(train) > 8)
    return db, build_clips(val, config, False, like=db)


def db_build_command(cfg: dict) -> str:
    """The ``kinema db build`` command that rebuilds the training database of ``cfg``, the
    validation and test clips excluded; its clip patterns are relative to the data roots
    (``shared:``/``sample:``, see :func:`kinema.data.data_relative`), so it runs from any
    folder (with ``KINEMA_DATA`` or ``kinema --data`` naming the shared data)."""
    import shlex


    data = cfg["data"]
    pats = [pat if pat.startswith(PREFIXES) else data_relative(Path(data.get("base", ".")) / pat)
            for pat in data["clips"]]
    held = sorted(set(data.get("validation", [])) | set(data.get("test", [])))
    exclude = " --exclude " + " ".join(held) if held else ""
    return (f"kinema db build {' '.join(shlex.quote(p) for p in pats)}{exclude} "
            f"{_config_arguments(data.get('database', 'lafan1'))}"
            + (" --mirror" if data.get("mirror", True) else "") + " -o DB.npz")


def _config_arguments(spec: str | dict) -> str:
    """``kinema db build``'s arguments for a ``data.database`` spec: the preset, with a flag
    for each switch ``kinema db build`` has; ``--config CONFIG.json`` (the table as a JSON
    file) when the table sets anything else."""
    if isinstance(spec, str):
        return f"--config {spec}"
    flags = {"trim_calibration": "--trim-calibration", "carry_above_hips": "--carry-above-hips"}
    if "base" not in spec or set(spec) - {"base", *flags}:
        return "--config CONFIG.json"
    return " ".join([f"--config {spec['base']}", *(flag for key, flag in flags.items() if spec.get(key))])


def make_retriever(cfg: dict, db: Database, norm: Normaliser) -> Retriever:
    """The training retriever of a config: ``model.k`` candidates sampled from the
    ``retrieval.top`` nearest rows (``tau``, ``refresh``); with ``retrieval.random = true``
    uniformly random rows instead (the ablation control)."""
    rc = cfg.get("retrieval", {})
    kind = RandomRetriever if rc.get("random", False) else Retriever
    return kind(db, norm, k=cfg.get("model", {}).get("k", 4), top=rc.get("top", 16),
                tau=rc.get("tau", 0.5), refresh=rc.get("refresh", 6),
                groups=clip_groups(db, rc["exclude_group"]) if rc.get("exclude_group") else None)


def clip_groups(db: Database, pattern: str) -> np.ndarray:
    """(C,) group ids of the database clips: the first match of the regular expression
    ``pattern`` in each clip's name (e.g. ``"subject\\d+"``: the LaFAN1 actor), or the
    clip's own name where it does not match (mirrors share their original's group)."""
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise KinemaError(f"retrieval.exclude_group {pattern!r} is not a regular expression: {e}") from None
    keys = []
    for name in db.clip_names:
        base = name.removesuffix("_mirror")
        m = rx.search(base)
        keys.append(m.group(0) if m else base)
    _, ids = np.unique(keys, return_inverse=True)
    return ids


def make_model(cfg: dict, db: Database, retriever: Retriever) -> torch.nn.Module:
    """A RetrievalMamba (or, with ``model.fusion = "concat"``, the plain-concatenation
    ablation :class:`~kinema.nn.retrieval_concat.ConcatRetrievalMamba`) sized for ``db``
    with its normalisation buffers set; ``model.k`` is the retriever's."""
    m = dict(cfg.get("model", {}))
    m.pop("k", None)
    fusion = m.pop("fusion", "attention")
    # model.kinematic = true: start the delta from the pose's kinematic step (kinema.nn.kinematic)
    kinematic = bool(m.pop("kinematic", False))
    if kinematic and fusion == "concat":
        raise KinemaError("model.kinematic is a RetrievalMamba option; the concat ablation has none")
    if fusion not in ("attention", "concat"):
        raise KinemaError(f"model.fusion must be 'attention' or 'concat', got {fusion!r}")
    if fusion == "concat":   # no attention, no gates: drop the attention pathway's settings
        m.pop("retrieval_dim", None)
        m.pop("gates", None)
        model = ConcatRetrievalMamba(pose_dim=db.pose_width, control_dim=12, contact_dim=2, k=retriever.k, **m)
    else:
        prior = KinematicPrior.from_layout(db.pose_layout, db.fps).config() if kinematic else None
        model = RetrievalMamba(pose_dim=db.pose_width, control_dim=12, contact_dim=2, k=retriever.k,
                               kinematic=prior, **m)
        if kinematic:
            model.kinematic.set_normaliser(retriever.norm.mean, retriever.norm.std)
    c = db.trajectory
    pose_dim = db.pose_width
    n_in = model.backbone.input_norm.dim
    mean, std = np.zeros(n_in, np.float32), np.ones(n_in, np.float32)
    mean[:12], std[:12] = c.mean(0), np.maximum(c.std(0), 1e-2)
    model.backbone.input_norm.set(mean, std)
    delta = np.diff(retriever.poses_n, axis=0)
    if kinematic:   # the head predicts the residual of the kinematic step: scale it by that
        with torch.no_grad():
            delta = delta - model.kinematic(torch.as_tensor(retriever.poses_n[:-1])).numpy()
    ok = np.ones(len(delta), bool)
    ok[db.ranges[:, 1][:-1] - 1] = False
    out_std = np.ones(pose_dim + 2, np.float32)
    out_std[:pose_dim] = np.maximum(delta[ok].std(0), 1e-3)
    model.backbone.output_norm.set(np.zeros(pose_dim + 2, np.float32), out_std)
    if model.use_retrieval:
        rows = np.random.default_rng(0).integers(0, db.rows, (min(4096, db.rows), retriever.k))
        idx, cost = retriever.search(db.features[rows[:, 0]])
        payload = retriever.payload(idx[:, :retriever.k], cost[:, :retriever.k])
        model.candidate_norm.fit(torch.as_tensor(payload), eps=1e-2)
    return model


def pose_loss(pred: torch.Tensor, target: torch.Tensor, logits: torch.Tensor, contacts: torch.Tensor,
              contact_weight: float, positions: slice | None = None, position_weight: float = 0.0) -> torch.Tensor:
    """MSE of normalised pose vectors (..., P) + ``contact_weight`` x contact BCE, plus
    ``position_weight`` x the MSE of the joint-position columns ``positions`` (the metric's
    part of the pose; the other columns are rotations, velocities and root motion)."""
    loss = F.mse_loss(pred, target) + contact_weight * F.binary_cross_entropy_with_logits(logits, contacts)
    if position_weight > 0 and positions is not None:
        loss = loss + position_weight * F.mse_loss(pred[..., positions], target[..., positions])
    return loss


def _device(model) -> torch.device:
    return next(model.parameters()).device


def teacher_forced_loss(model, sampler: WindowSampler, s: TrainSettings, rng: np.random.Generator) -> torch.Tensor:
    dev = _device(model)
    t_ = lambda a: torch.as_tensor(a, device=dev)  # noqa: E731
    b = sampler.batch(s.batch)
    pose = b.pose.copy()
    sigma = rng.random((len(pose), 1, 1)) * s.pose_noise
    pose += sigma * rng.standard_normal(pose.shape).astype(np.float32)
    pose[rng.random(pose.shape[:2]) < s.pose_dropout] = 0.0
    cands = mask = None
    if model.use_retrieval:
        cands = t_(b.candidates)
        keep = rng.random(b.candidates.shape[:3]) >= s.drop_each
        keep &= rng.random(b.candidates.shape[:2] + (1,)) >= s.drop_all
        if s.drop_sequence > 0:
            keep &= rng.random((len(keep), 1, 1)) >= s.drop_sequence
        mask = t_(keep)
    out, _ = model(t_(b.control), t_(pose), cands, mask)
    pred = out["pose"]
    if s.rigid:   # score the pose the runtime draws: positions rebuilt from the rotations
        norm = sampler.r.norm
        # velocities rebuilt from the clean input pose (the one before each target)
        pred = rigid_pose_normalised(sampler.db, pred, t_(norm.mean), t_(norm.std),
                                     sampler.r.ground if s.ground else None, s.unit_6d,
                                     t_(b.pose) if s.rebuilt_velocities else None,
                                     sampler.r.reach)
    return pose_loss(pred, t_(b.target), out["contact_logits"], t_(b.contacts),
                     s.contact_weight, pose_slice(sampler.db, "joint_positions"), s.position_weight)


def skate_loss(db: Database, pose: torch.Tensor, contacts: torch.Tensor) -> torch.Tensor:
    """Mean squared horizontal world displacement of the toes (cm per frame, squared) between
    consecutive raw predicted poses (B, H, P) over the frames whose target contact (B, H, 2)
    is on: the foot skating of a rollout, differentiable. The root moves as
    :func:`kinema.control.retrieval.rollout.integrate_root` moves it (turn by the new
    frame's yaw rate, then step by its root velocity), so in the new frame's root space a
    toe moves by ``p[t+1] + v[t+1] / fps - R(-w[t+1] / fps) p[t]``
    (:func:`kinema.control.retrieval.pose.joint_steps`), with no absolute root."""
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    step = joint_steps(db, pose[:, :-1], pose[:, 1:])[..., toes, :]    # (B, H-1, 2, 3)
    return _slide_cost(step[..., 0], step[..., 2], contacts)


def _slide_cost(dx: torch.Tensor, dz: torch.Tensor, contacts: torch.Tensor) -> torch.Tensor:
    """Mean of the squared horizontal toe steps dx, dz (B, H-1, 2) (m, as cm^2) over the
    frames whose contact (B, H, 2) is on (the step's later frame)."""
    on = contacts[:, 1:]
    return ((dx ** 2 + dz ** 2) * 1e4 * on).sum() / on.sum().clamp(min=1.0)


def drawn_skate_loss(db: Database, pose: torch.Tensor, contacts: torch.Tensor, root_pos: np.ndarray,
                     root_dir: np.ndarray) -> torch.Tensor:
    """:func:`skate_loss` with the toes placed by given roots, positions and facings (B, H,
    3) (those the runtime drew), instead of the pose's own root motion: the world toe is
    ``root_pos + R(yaw) p`` with ``p`` the raw pose's (B, H, P) root-space toe, so the
    gradient reaches only the legs (the roots are data). With roots integrated from the
    poses' own root motion the two agree."""
    toes = toe_positions(db, pose)                                                         # (B, H, 2, 3)
    facing = torch.as_tensor(np.asarray(root_dir), dtype=pose.dtype, device=pose.device)
    sn, c = facing[..., 0:1], facing[..., 2:3]                                             # unit floor facings
    root = torch.as_tensor(np.asarray(root_pos), dtype=pose.dtype, device=pose.device)
    wx = root[..., 0:1] + c * toes[..., 0] + sn * toes[..., 2]                             # (B, H, 2)
    wz = root[..., 2:3] + c * toes[..., 2] - sn * toes[..., 0]
    return _slide_cost(torch.diff(wx, dim=1), torch.diff(wz, dim=1), contacts)


def own_contacts(db: Database, pose: torch.Tensor, floor: float) -> torch.Tensor:
    """Soft toe contacts (B, H, 2) in [0, 1] of raw predicted poses (B, H, P): the toes'
    pin weights (:func:`kinema.control.planted.plant_weights`: 1 at or below ``floor``
    metres, 0 above ``floor + PLANT_BAND``) in this frame and the one before (frame 0: its
    own), detached, so that :func:`skate_loss` reads the frames :func:`~kinema.control.
    retrieval.metrics.foot_skate` counts without rewarding a lifted toe."""
    w = plant_weights(toe_positions(db, pose.detach())[..., 1], floor)
    return w * torch.cat([w[:, :1], w[:, :-1]], 1)


def _log_ratio_loss(pred: torch.Tensor, true: torch.Tensor, offset: float) -> torch.Tensor:
    return ((torch.log(pred + offset) - torch.log(true + offset)) ** 2).mean()


def _joint_positions(db: Database, p: torch.Tensor) -> torch.Tensor:
    return p[..., pose_slice(db, "joint_positions")].reshape(p.shape[0], p.shape[1], -1, 3)


def _joint_steps(pos: torch.Tensor) -> torch.Tensor:
    """(B, H-1, J) distance (m) each joint of positions (B, H, J, 3) moves from frame to frame."""
    return torch.linalg.vector_norm(pos[:, 1:] - pos[:, :-1], dim=-1)


def accel_loss(db: Database, pose: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rollouts of ``log(accel(pose) / accel(target))^2``, the accelerations being
    each rollout's mean joint acceleration magnitude (cm/s^2,
    :func:`kinema.control.retrieval.metrics.joint_acceleration`) of raw predicted and true
    pose vectors (B, H, P): 0 when a rollout accelerates as much as the actor; about 0.9 at
    the jittering ratio 2.6 (a 10 cm/s^2 offset keeps a still window finite). Differentiable."""
    def accel(p: torch.Tensor) -> torch.Tensor:
        pos = _joint_positions(db, p)
        d2 = pos[:, 2:] - 2 * pos[:, 1:-1] + pos[:, :-2]
        return torch.linalg.vector_norm(d2, dim=-1).mean((1, 2)) * 100.0 * db.fps * db.fps

    return _log_ratio_loss(accel(pose), accel(target), 10.0)


def rollout_roots(db: Database, pose: torch.Tensor, start_pos: np.ndarray, start_dir: np.ndarray,
                  planted: float | None = None, start_toes: np.ndarray | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Roots x, z (B, H) (m) and yaws (B, H) (rad) of a rollout, integrated from the root
    motion of its raw predicted poses (B, H, P) as :class:`~kinema.control.retrieval.
    rollout.RootMover` moves them (turn, then step along the new facing) from the roots
    ``start_pos``/``start_dir`` (B, 3) before its first frame; differentiable.

    With ``planted`` (the toe floor height, m) the roots are also corrected frame by frame
    by the planted-foot rule (:func:`kinema.control.planted.planted_shift`) from the world
    toes ``start_toes`` (B, 2, 3) drawn before the first frame: the root then goes where the
    stance legs carry it, and a gradient reaches the legs."""
    lay = {name: a for name, a, _ in db.pose_layout}
    v, w = lay["root_velocity"], lay["root_angular_velocity"]
    t_ = lambda a: torch.as_tensor(np.asarray(a), dtype=pose.dtype, device=pose.device)  # noqa: E731
    yaw = t_(angles.yaw(start_dir))[:, None] + torch.cumsum(pose[..., w + 1], 1) / db.fps      # (B, H)
    sn, c = torch.sin(yaw), torch.cos(yaw)
    vx, vz = pose[..., v] / db.fps, pose[..., v + 2] / db.fps
    dx, dz = c * vx + sn * vz, c * vz - sn * vx
    if planted is None:
        return (t_(start_pos[:, 0])[:, None] + torch.cumsum(dx, 1),
                t_(start_pos[:, 2])[:, None] + torch.cumsum(dz, 1), yaw)
    toes = toe_positions(db, pose)                                                       # (B, H, 2, 3)
    wx = c[..., None] * toes[..., 0] + sn[..., None] * toes[..., 2]
    wz = c[..., None] * toes[..., 2] - sn[..., None] * toes[..., 0]
    prev, root = t_(start_toes), t_(start_pos)
    xs, zs = [], []
    for f in range(pose.shape[1]):
        root = root + torch.stack([dx[:, f], torch.zeros_like(dx[:, f]), dz[:, f]], -1)
        world = torch.stack([wx[:, f], toes[:, f, :, 1], wz[:, f]], -1) + root[:, None]
        shift = planted_shift(world, prev, planted)
        root, prev = root + shift, world + shift[:, None]
        xs.append(root[:, 0])
        zs.append(root[:, 2])
    return torch.stack(xs, 1), torch.stack(zs, 1), yaw


def path_loss(db: Database, pose: torch.Tensor, start_pos: np.ndarray, start_dir: np.ndarray,
              true_pos: np.ndarray, true_dir: np.ndarray, planted: float | None = None,
              start_toes: np.ndarray | None = None) -> torch.Tensor:
    """Mean squared root position error (m^2) plus mean ``1 - cos`` of the heading error of
    a rollout's roots (:func:`rollout_roots` of raw predicted poses (B, H, P) from the roots
    before its first frame, with the planted-foot rule when ``planted`` is a floor height)
    against the clip's roots ``true_pos``/``true_dir`` (B, H, 3). Differentiable: a root
    velocity (or, planted, a stance leg's swing) early in the rollout is charged for where
    it leaves the root later."""
    return _path_error(*rollout_roots(db, pose, start_pos, start_dir, planted, start_toes), true_pos, true_dir)


def _path_error(x: torch.Tensor, z: torch.Tensor, yaw: torch.Tensor, true_pos: np.ndarray,
                true_dir: np.ndarray) -> torch.Tensor:
    """:func:`path_loss` of roots x, z (B, H) (m) and yaws (B, H) (rad) already integrated."""
    tp = torch.as_tensor(np.asarray(true_pos), dtype=x.dtype, device=x.device)
    td = torch.as_tensor(np.asarray(true_dir), dtype=x.dtype, device=x.device)
    position = (x - tp[..., 0]) ** 2 + (z - tp[..., 2]) ** 2
    heading = 1.0 - (torch.sin(yaw) * td[..., 0] + torch.cos(yaw) * td[..., 2])
    return (position + heading).mean()


def energy_loss(db: Database, pose: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rollouts of ``log(speed(pose) / speed(target))^2``, the speeds being each
    rollout's mean joint speed (cm/s, :func:`kinema.control.retrieval.metrics.joint_speed`)
    of raw predicted and true pose vectors (B, H, P): 0 when a rollout moves as much as the
    actor, whatever its phase; about 0.3 at the damped ratio 0.56 (speeds carry a 1 cm/s
    offset so a still window has a finite log). Differentiable."""
    def speed(p: torch.Tensor) -> torch.Tensor:
        return _joint_steps(_joint_positions(db, p)).mean((1, 2)) * 100.0 * db.fps

    return _log_ratio_loss(speed(pose), speed(target), 1.0)


def stride_loss(db: Database, pose: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rollouts and over each second of them of ``log(speed(pose) / speed(target))^2``,
    the speeds being the toes' mean character-space speed (cm/s, 1 cm/s offset) in that
    second, of raw predicted and true pose vectors (B, H, P). A rollout whose legs slow
    down while its root follows the path (the glide) pays for every second it glides,
    which the whole-body, whole-rollout :func:`energy_loss` averages away. Differentiable."""
    toes = [db.roles["left_toe"], db.roles["right_toe"]]

    def speed(p: torch.Tensor) -> torch.Tensor:
        return _second_means(db, _joint_steps(_joint_positions(db, p)[:, :, toes]).mean(-1) * 100.0 * db.fps)

    return _log_ratio_loss(speed(pose), speed(target), 1.0)


def _second_means(db: Database, v: torch.Tensor) -> torch.Tensor:
    """(B, S) means of per-frame values (B, N) over each whole second (a rollout shorter
    than a second is one segment; the frames past the last whole second are left out)."""
    sec = max(2, int(round(db.fps)))
    h = v.shape[1] // sec * sec
    if h < sec:
        h = sec = v.shape[1]
    return v[:, :h].reshape(v.shape[0], -1, sec).mean(-1)


def posture_loss(db: Database, pose: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over rollouts and over each second of them of the squared difference between
    the hips' mean character-space height (the root is on the floor) of raw predicted and
    true pose vectors (B, H, P) in that second, as a share of the truth's mean hips height:
    a rollout that sinks into a crouch (or below the floor) while the actor stands or walks
    pays for every second it sinks, whatever its phase; about 0.2 when the hips sit at
    half the actor's height. Differentiable."""
    hips = db.roles["hips"]
    pred = _second_means(db, _joint_positions(db, pose)[:, :, hips, 1])
    true = _second_means(db, _joint_positions(db, target)[:, :, hips, 1])
    return (((pred - true) / true.mean().detach().clamp(min=1e-2)) ** 2).mean()


def _raw(retriever: Retriever, pose_n: torch.Tensor) -> torch.Tensor:
    norm = retriever.norm
    return pose_n * torch.as_tensor(norm.std, device=pose_n.device) + torch.as_tensor(norm.mean, device=pose_n.device)


def rollout_starts(db: Database, clips: np.ndarray, length: int, count: int, rng: np.random.Generator | None,
                   stride: int | None = None, upright: bool = False) -> np.ndarray:
    """Start rows of windows of ``length`` rows inside ``clips``: ``count`` random ones, or
    every ``stride`` rows when ``rng`` is None. With ``upright``, ``count`` random rows
    among those from which the data stays on its feet for the whole window
    (:func:`kinema.matching.database.upright_rows`)."""
    if upright and rng is not None:
        rows = upright_rows(db, length)
        rows = rows[np.isin(db.clip_of(rows), clips)]
        if len(rows) == 0:
            raise KinemaError(f"no training clip stays upright for {length} frames (train.upright)")
        return rng.choice(rows, count)
    starts = []
    for c in clips:
        lo, hi = db.ranges[c]
        if hi - lo > length:
            starts.append(np.arange(lo, hi - length, stride or max(1, (hi - lo - length) // 4)))
    if not starts:
        raise KinemaError(f"no clip has {length} frames for a rollout")
    starts = np.concatenate(starts)
    if rng is None:
        return starts[:count] if count else starts
    return rng.choice(starts, count)


def motion_terms(db: Database, retriever: Retriever, r, s: TrainSettings, floor: float) -> dict[str, torch.Tensor]:
    """The rollout terms that ``s`` trains (skate, energy, accel: those with a weight > 0)
    of a :class:`~kinema.control.retrieval.rollout.Rollout` on ``db``, unweighted."""
    out: dict[str, torch.Tensor] = {}
    if all(w <= 0 for w in term_weights(s).values()):
        return out
    raw, true = _raw(retriever, r.pose), _raw(retriever, r.target)
    if s.skate_weight > 0:
        on = r.target_contacts if s.skate_on == "truth" else own_contacts(db, raw, floor)
        out["skate"] = skate_loss(db, raw, on)
    if s.energy_weight > 0:
        out["energy"] = energy_loss(db, raw, true)
    if s.accel_weight > 0:
        out["accel"] = accel_loss(db, raw, true)
    if s.stride_weight > 0:
        out["stride"] = stride_loss(db, raw, true)
    if s.posture_weight > 0:
        out["posture"] = posture_loss(db, raw, true)
    if s.path_weight > 0:
        out["path"] = path_loss(db, raw, r.start_pos, r.start_dir, r.true_pos, r.true_dir,
                                floor if s.planted else None, r.start_toes if s.planted else None)
    return out


def term_weights(s: TrainSettings) -> dict[str, float]:
    """Weight of each rollout term of :func:`motion_terms`."""
    return {"skate": s.skate_weight, "energy": s.energy_weight, "accel": s.accel_weight, "path": s.path_weight,
            "stride": s.stride_weight, "posture": s.posture_weight, "stick": s.stick_weight}


def _used_terms(s: TrainSettings) -> dict:
    """The rollout terms a run trains with (weight > 0), as the checkpoint records them: each
    term's weight, and after the skating term the contacts it reads (``skate_on``)."""
    out: dict = {}
    for term, w in term_weights(s).items():
        if w:
            out[term] = w
            if term == "skate":
                out["skate_on"] = s.skate_on
    return out


def rollout_loss(model, retriever: Retriever, clips: np.ndarray, s: TrainSettings, horizon: int, student: float,
                 rng: np.random.Generator, detach_every: int | None, floor: float, carry: Carry | None = None,
                 chain: int = 1, own: OwnTake | None = None) -> tuple[torch.Tensor, Carry]:
    """The loss of one batch of rollouts of ``horizon`` frames and the :class:`Carry` that
    continues them: fresh rollouts from random rows (with room for ``chain`` rollouts in a
    row), or, with ``carry``, the continuation of the last ones, whose pose and contact terms
    count ``s.chain_pose_weight`` times (past the first rollout of a chain the model's phase
    is its own, and the frame-by-frame pose error pulls it to the mean pose)."""
    db = retriever.db
    if carry is None:
        starts = rollout_starts(db, clips, s.context + chain * horizon + 1, s.batch, rng, upright=s.upright_free)
        ex = retriever.exclusions(db.clip_of(starts))
    else:
        starts = ex = None
    r = rollout(model, retriever, db, starts, s.context, horizon, exclude=ex, rng=rng, student=student,
                dropout=(s.drop_all, s.drop_each, s.drop_sequence), detach_every=detach_every, rigid=s.rigid,
                ground=s.ground, unit=s.unit_6d, velocities=s.rebuilt_velocities, planted=floor if s.planted else None, carry=carry,
                own=own)
    loss = pose_loss(r.pose, r.target, r.contact_logits, r.target_contacts, s.contact_weight,
                     pose_slice(db, "joint_positions"), s.position_weight)
    if carry is not None:
        loss = s.chain_pose_weight * loss
    weights = term_weights(s)
    for name, value in motion_terms(db, retriever, r, s, floor).items():
        loss = loss + weights[name] * value
    return loss, r.carry


# The fixed share of a stick-driven rollout's loss: the path weight of the shipped LaFAN1
# recipe (posture, stride, skate, stand, touch and step come from the settings).
STICK_TERMS = {"path": 2.0}
# A stick-driven rollout's hips may sit between these shares of the data's standing height
# before paying: below, a crouch or a fall; above, a body that floats off the floor (with
# only the floor below, lafan_sc8i's hips rose 11 m on the circle stick within 18 s).
UPRIGHT_BAND = (0.9, 1.15)
STAND_BAND = 0.1   # settled hips (the stick asks to stand) within this share of the standing height pay nothing (stand_loss)
TOUCH_SECONDS = 0.5   # a toe touches the floor at least once in every this many seconds (touch_loss)
STEP_SECONDS = 1.0    # each toe touches the floor at least once in every this many seconds of walking (step_loss)
STEP_DOWN_M = 0.025   # ... within this height (m) of the skating metric's floor
SUPPORT_SECONDS = 1.0   # the lower toe's median height over every this many seconds of walking (support_loss)
SUPPORT_DOWN_M = 0.025  # ... within this height (m) of the skating metric's floor
TORSO_SHARE = 0.8   # the head's height above the hips below this share of the data's pays (torso_loss)
STILL_SECONDS = 1.0   # the root's net drift over every this many seconds the requested path stands (still_loss)
STILL_DRIFT_M = 0.01  # ... is free up to this (m): the sample's standing actor drifts at most 0.99 cm a second


@dataclass(frozen=True)
class StickTargets:
    """What the data says a stick-driven rollout should do: ``stride_ratio``, the toes'
    character-space speed per unit of root speed while moving
    (:func:`~kinema.control.retrieval.scenarios.database_stride_ratio`), and
    ``standing_hips`` (m, :func:`~kinema.control.retrieval.scenarios.standing_hips`),
    ``torso`` (m, :func:`~kinema.control.retrieval.scenarios.standing_torso`) and ``head``, the
    joint it is measured to (:func:`~kinema.control.retrieval.scenarios.head_joint`, found once
    here, not in every rollout)."""

    stride_ratio: float
    standing_hips: float
    torso: float
    head: int

    @classmethod
    def of(cls, db: Database) -> StickTargets:
        return cls(database_stride_ratio(db), standing_hips(db), standing_torso(db), head_joint(db))


def stick_terms(db: Database, raw: torch.Tensor, r: Rollout, steer: StickSteer, targets: StickTargets,
                floor: float, drawn: bool = False) -> dict[str, torch.Tensor]:
    """Self-supervised terms of a stick-driven rollout (raw predicted poses (B, H, P), its
    :class:`~kinema.control.retrieval.rollout.Rollout`, the :class:`StickSteer` that drove
    it), no truth needed, each differentiable:

    - ``stride``: each second's mean character-space toe speed against ``stride_ratio`` x
      the root's mean speed (cm/s, log-ratio squared, 5 cm/s offset so that standing still
      is free): legs that glide or thrash while the root moves pay, and the root's speed is
      detached, so the term moves the legs, not the root;
    - ``path``: :func:`path_loss` of the rollout's integrated roots against the path the
      springs requested (m^2 plus 1 - cos of the heading error);
    - ``posture``: the hips' squared distance outside :data:`UPRIGHT_BAND` of the standing
      height, as a share of it (a stick never asks for a crouch, a fall or a float);
    - ``skate``: :func:`skate_loss` on the predicted toes that are on the floor;
    - ``stand``: :func:`stand_loss` (toes down, hips at the standing height) on the frames
      where the requested path stands;
    - ``touch``: :func:`touch_loss` (a toe on the floor at least every half second);
    - ``step``: :func:`step_loss` (each toe on the floor at least once a second while the
      requested path moves);
    - ``support``: :func:`support_loss` (the lower toe on the floor half of every second
      while the requested path moves);
    - ``still``: :func:`still_loss` (the network's own root holds its place in every second
      the requested path stands);
    - ``torso``: :func:`torso_loss` (the head stays above the hips by most of the data's
      torso height: a stick never asks for a bow).

    With ``drawn`` (a rollout whose roots were pulled toward the springs, ``rollout(...,
    adjust=True)``) the stride and skating terms read the roots the runtime draws,
    ``r.root_pos`` and ``r.root_dir`` (B, H, 3), instead of the network's own: the legs then
    pay for the ground the adjustment moves them over (:func:`drawn_skate_loss`); the path
    term still reads the network's own roots, which must follow the path by themselves.
    """
    toes = [db.roles["left_toe"], db.roles["right_toe"]]
    pos = _joint_positions(db, raw)
    toe_speed = _second_means(db, _joint_steps(pos[:, :, toes]).mean(-1) * 100.0 * db.fps)
    x, z, yaw = rollout_roots(db, raw, r.start_pos, r.start_dir)
    if drawn:
        step = np.linalg.norm(np.diff(np.asarray(r.root_pos)[..., [0, 2]], axis=1), axis=-1)
        root = torch.as_tensor(step, dtype=raw.dtype, device=raw.device) * 100.0 * db.fps
    else:
        root = torch.sqrt(torch.diff(x.detach(), dim=1) ** 2 + torch.diff(z.detach(), dim=1) ** 2) * 100.0 * db.fps
    root_speed = _second_means(db, root)
    contacts = own_contacts(db, raw, floor)
    skate = drawn_skate_loss(db, raw, contacts, r.root_pos, r.root_dir) if drawn else skate_loss(db, raw, contacts)
    hips = pos[:, :, db.roles["hips"], 1] / targets.standing_hips
    settled = steer.settled()
    outside = F.relu(UPRIGHT_BAND[0] - hips) + F.relu(hips - UPRIGHT_BAND[1])
    return {"stride": _log_ratio_loss(toe_speed, targets.stride_ratio * root_speed, 5.0),
            "path": _path_error(x, z, yaw, *steer.path()),
            "posture": (outside ** 2).mean(),
            "skate": skate,
            "stand": stand_loss(db, raw, settled, floor, targets.standing_hips),
            "touch": touch_loss(db, raw, floor),
            "step": step_loss(db, raw, settled, floor),
            "support": support_loss(db, raw, settled, floor),
            "still": still_loss(x, z, settled, db.fps),
            "torso": torso_loss(db, pos, targets.torso, targets.head)}


def torso_loss(db: Database, pos: torch.Tensor, torso: float, head: int) -> torch.Tensor:
    """Mean over the frames of root-space joint positions (B, H, J, 3) of
    ``(relu(TORSO_SHARE - gap / torso) / (1 - TORSO_SHARE))^2``, ``gap`` being the height of
    joint ``head`` (:func:`~kinema.control.retrieval.scenarios.head_joint`) above the hips (m)
    and ``torso`` the data's
    (:func:`~kinema.control.retrieval.scenarios.standing_torso`): 0 while the torso leans
    less than the data's runs (no Bandai-Namco or sample row reads under 0.83 of ``torso``),
    1 at 0.6 of it, 16 for a bow that hangs the head at the hips' height. Differentiable."""
    gap = pos[..., head, 1] - pos[..., db.roles["hips"], 1]
    return ((F.relu(TORSO_SHARE - gap / torso) / (1.0 - TORSO_SHARE)) ** 2).mean()


def stand_loss(db: Database, raw: torch.Tensor, settled: np.ndarray, floor: float, standing: float) -> torch.Tensor:
    """What a pose that should stand pays, averaged over the ``settled`` frames (B, H) bool
    of raw predicted poses (B, H, P) (0 when no frame is settled; differentiable):

    - each toe: ``(relu(height - TOE_DOWN_M / 2) / TOE_DOWN_M)^2``, the height (m) being the
      character-space toe's above ``floor``: 0 within 5 cm of the floor, 1 at 15 cm up, what
      :func:`~kinema.control.retrieval.scenarios.feet_down_share` counts (a raised knee);
    - the hips: ``(relu(|hips / standing - 1| - STAND_BAND) / STAND_BAND)^2``, their
      character-space height against the data's ``standing`` hips (m): 0 within a tenth of
      it, 9 for a kneel at 0.6 of it (toes down on all fours or on a knee is no stand).
    """
    mask = torch.as_tensor(np.asarray(settled, np.float32), device=raw.device)
    up = F.relu(toe_positions(db, raw)[..., 1] - floor - TOE_DOWN_M / 2) / TOE_DOWN_M       # (B, H, 2)
    hips = _joint_positions(db, raw)[:, :, db.roles["hips"], 1] / standing                  # (B, H)
    low = (F.relu((hips - 1.0).abs() - STAND_BAND) / STAND_BAND) ** 2
    return ((up ** 2).mean(-1) + low).mul(mask).sum() / mask.sum().clamp(min=1.0)


def _windows(x: torch.Tensor, frames: float) -> torch.Tensor:
    """Sliding windows (B, H - w + 1, ..., w) along dim 1 of ``x`` (B, H, ...), w being
    ``frames`` rounded (at least 1, at most H: a rollout shorter than a window is one)."""
    w = min(max(1, round(frames)), x.shape[1])
    return x.unfold(1, w, 1)


def _moving_windows(settled: np.ndarray, frames: float, device: torch.device) -> torch.Tensor:
    """1.0 for each window of :func:`_windows` (``frames`` long) of ``settled`` (B, H) bool
    that holds no settled frame (the requested path moves throughout), else 0.0: (B, H - w + 1)."""
    still = torch.as_tensor(np.asarray(settled, np.float32), device=device)
    return 1.0 - _windows(still, frames).amax(-1)


def touch_loss(db: Database, raw: torch.Tensor, floor: float) -> torch.Tensor:
    """What raw predicted poses (B, H, P) pay for floating: in every window of
    :data:`TOUCH_SECONDS` (all of H when shorter) the lowest toe's character-space height
    above ``floor`` (m) pays ``(relu(height - TOE_DOWN_M / 2) / TOE_DOWN_M)^2``, averaged
    over the windows (differentiable; the gradient reaches the lowest toe of the window's
    lowest frame). Walking, running and standing put a toe within 5 cm of the floor in 96 to
    100% of the half-second windows of the LaFAN1 training takes that neither climb nor lie on
    the floor (the obstacles takes and fallAndGetUp1 do), so the actor pays about nothing and
    a body drifting up off the floor pays."""
    low = toe_positions(db, raw)[..., 1].amin(-1) - floor                                   # (B, H)
    lowest = _windows(low, TOUCH_SECONDS * db.fps).amin(-1)                                 # (B, H - window + 1)
    return ((F.relu(lowest - TOE_DOWN_M / 2) / TOE_DOWN_M) ** 2).mean()


def step_loss(db: Database, raw: torch.Tensor, settled: np.ndarray, floor: float) -> torch.Tensor:
    """What raw predicted poses (B, H, P) pay for walking without stepping: in every window
    of :data:`STEP_SECONDS` (all of H when shorter) in which the requested path moves (no
    frame of ``settled`` (B, H) bool), each toe's lowest character-space height above
    ``floor`` (m) pays ``(relu(height - STEP_DOWN_M) / TOE_DOWN_M)^2``, averaged over the
    toes and those windows (0 when there is none; differentiable). In the LaFAN1 training
    takes (not mirrored), each toe comes within 2.5 cm of the floor in 95% of the one-second
    windows in which the root moves faster than 0.3 m/s (98-100% outside the obstacles takes);
    a body that hops on one foot, or floats both, pays, and one that touches down with both
    toes but slides them pays the skating term: it can follow the path only by stepping, as
    long as the poses are lifted as the runtime lifts them (``train.ground``; without the lift,
    toes sunk under the floor pass, and the runtime draws them lifted with a toe in the air:
    protocol, session 23)."""
    up = toe_positions(db, raw)[..., 1] - floor                                               # (B, H, 2)
    lowest = _windows(up, STEP_SECONDS * db.fps).amin(-1)                                    # (B, H - window + 1, 2)
    moving = _moving_windows(settled, STEP_SECONDS * db.fps, raw.device)                      # (B, H - window + 1)
    cost = ((F.relu(lowest - STEP_DOWN_M) / TOE_DOWN_M) ** 2).mean(-1)
    return (cost * moving).sum() / moving.sum().clamp(min=1.0)


def support_loss(db: Database, raw: torch.Tensor, settled: np.ndarray, floor: float) -> torch.Tensor:
    """What raw predicted poses (B, H, P) pay for walking in the air: in every window of
    :data:`SUPPORT_SECONDS` (all of H when shorter) in which the requested path moves (no
    frame of ``settled`` (B, H) bool), the median over the window's frames of the lower toe's
    character-space height above ``floor`` (m) pays ``(relu(median - SUPPORT_DOWN_M) /
    TOE_DOWN_M)^2``, averaged over those windows (0 when there is none; differentiable: the
    gradient reaches the lower toe of the median frame). The median is what the evaluation's
    ``support_height_m`` reads: a run's flight frames (both toes up) are fewer than half of
    each second and pay nothing, where a body whose support toe hangs 16-19 cm up while it
    moves (the session-20 LaFAN1 network on the moving sticks; motion matching 1-2 cm) pays
    1.8 to 2.7 per window; :func:`touch_loss` and :func:`step_loss` ask only for the lowest
    frame of each window, which one touch in a second of floating passes."""
    low = toe_positions(db, raw)[..., 1].amin(-1) - floor                                     # (B, H)
    median = _windows(low, SUPPORT_SECONDS * db.fps).median(-1).values                        # (B, H - window + 1)
    moving = _moving_windows(settled, SUPPORT_SECONDS * db.fps, raw.device)
    cost = (F.relu(median - SUPPORT_DOWN_M) / TOE_DOWN_M) ** 2
    return (cost * moving).sum() / moving.sum().clamp(min=1.0)


def still_loss(x: torch.Tensor, z: torch.Tensor, settled: np.ndarray, fps: float) -> torch.Tensor:
    """What a rollout's roots x, z (B, H) (m, :func:`rollout_roots`) pay for wandering off
    while the stick asks them to stand: in every window of :data:`STILL_SECONDS` (all of H
    when shorter) whose frames are all ``settled`` (B, H) bool, the root's net displacement d
    (m, first to last frame) pays ``log(max(d, STILL_DRIFT_M) / STILL_DRIFT_M)^2``, averaged
    over those windows (0 when there is none; differentiable). The standing actor of the
    sample drifts 0.27 cm a second at the median and under 1 cm in every second
    (``test_still_loss_standing_actor_pays_nothing_and_a_creep_pays``): it pays nothing, where
    a root creeping at 3.5 cm/s with its toes planted (the session-40 no-dropout sample network
    let go of for 5 min: 10.4 m) pays 1.57 a window. The path term cannot see such a creep: it
    is a few centimetres within one rollout, a thousandth of a square metre. The log keeps a
    runaway's gradient small: a first-stage network drawn rigidly drifts 0.8 m a settled second
    at the median, which a square would charge 6,000 and let drown every other term."""
    w = STILL_SECONDS * fps
    wx, wz = _windows(x, w), _windows(z, w)                                                   # (B, H - w + 1, w)
    drift = torch.sqrt((wx[..., -1] - wx[..., 0]) ** 2 + (wz[..., -1] - wz[..., 0]) ** 2 + 1e-12)
    still = _windows(torch.as_tensor(np.asarray(settled, np.float32), device=x.device), w).amin(-1)
    cost = torch.log(drift.clamp(min=STILL_DRIFT_M) / STILL_DRIFT_M) ** 2
    return (cost * still).sum() / still.sum().clamp(min=1.0)


def stick_weights(s: TrainSettings) -> dict[str, float]:
    """Each :func:`stick_terms` term's weight: :data:`STICK_TERMS`, and ``s.stick_posture``,
    ``s.stick_stride``, ``s.stick_skate``, ``s.stick_stand``, ``s.stick_touch``,
    ``s.stick_step``, ``s.stick_support``, ``s.stick_still`` and ``s.stick_torso`` of the posture,
    stride, skate, stand, touch, step, support, still and torso terms."""
    return {**STICK_TERMS, "posture": s.stick_posture, "stride": s.stick_stride, "skate": s.stick_skate,
            "stand": s.stick_stand, "touch": s.stick_touch, "step": s.stick_step, "support": s.stick_support,
            "still": s.stick_still, "torso": s.stick_torso}


def stick_objective(terms: dict[str, torch.Tensor], weights: dict[str, float]) -> torch.Tensor:
    """The sum of :func:`stick_terms` ``terms``, each times its weight in ``weights``
    (:func:`stick_weights`)."""
    return sum(weights[k] * v for k, v in terms.items())


def random_sticks(s: TrainSettings, count: int, rng: np.random.Generator, fps: float) -> StickSteer:
    """:meth:`StickSteer.random` for ``count`` stick-driven rollouts with the settings' shares
    (``stick_idle``, ``stick_release``, ``stick_reverse``): one place for the training and the
    validation sticks."""
    return StickSteer.random(count, rng, fps, idle_share=s.stick_idle, release_share=s.stick_release,
                             reverse_share=s.stick_reverse)


def stick_loss(model, retriever: Retriever, clips: np.ndarray, s: TrainSettings, rng: np.random.Generator,
               floor: float, targets: StickTargets, carry: Carry | None = None) -> tuple[torch.Tensor, Carry]:
    """:func:`stick_objective` of ``s.stick_batch`` rollouts of ``s.free_horizon`` frames
    from random upright rows of ``clips``, each driven by its own random stick
    (:meth:`StickSteer.random`), with the free stage's dropout and truncation; or, with
    ``carry``, of the continuation of the last ones (their sticks run on). Returns the loss
    and the :class:`Carry` that continues them."""
    db = retriever.db
    if carry is None:
        starts = rollout_starts(db, clips, s.context + s.free_horizon + 1, s.stick_batch, rng, upright=True)
        steer = random_sticks(s, len(starts), rng, db.fps)
        ex = retriever.exclusions(db.clip_of(starts))
    else:
        starts = ex = None
        steer = carry.steer
    r = rollout(model, retriever, db, starts, s.context, s.free_horizon, exclude=ex, rng=rng,
                dropout=(s.drop_all, s.drop_each, s.drop_sequence), detach_every=s.detach_every, rigid=s.rigid,
                ground=s.ground, unit=s.unit_6d, velocities=s.rebuilt_velocities, planted=floor if s.planted else None,
                carry=carry, steer=steer, adjust=s.stick_adjust)
    return stick_objective(stick_terms(db, _raw(retriever, r.pose), r, steer, targets, floor, drawn=s.stick_adjust),
                           stick_weights(s)), r.carry


def stick_step(model, retriever: Retriever, clips: np.ndarray, s: TrainSettings, rng: np.random.Generator,
               floor: float, targets: StickTargets, carry: Carry | None, left: int, i: int
               ) -> tuple[torch.Tensor, Carry | None, int, int]:
    """The stick-driven part of free-stage step ``i``: :func:`chained_step` of
    :func:`stick_loss`, chains growing to ``train.stick_chain`` as :func:`chain_length`
    grows ``free_chain``."""
    def run(c: Carry | None, n: int) -> tuple[torch.Tensor, Carry]:
        return stick_loss(model, retriever, clips, s, rng, floor, targets, c)

    return chained_step(run, carry, left, chain_length(s, i, s.stick_chain))


CHAIN_BREAK_RMS = 10.0   # normalised units: a continued rollout this far from the data restarts from the truth


def chain_length(s: TrainSettings, i: int, n: int | None = None) -> int:
    """Rollouts in a row of the chain that starts at free-stage step ``i``: 1 at the start of
    the free stage, growing linearly to ``n`` (default ``s.free_chain``) at its half (a model
    fresh from the scheduled stage drives itself off the data within seconds)."""
    half = max(s.free // 2, 1)
    return 1 + ((s.free_chain if n is None else n) - 1) * min(i, half) // half


def chained_step(run: Callable[[Carry | None, int], tuple[torch.Tensor, Carry]], carry: Carry | None, left: int,
                 n: int) -> tuple[torch.Tensor, Carry | None, int, int]:
    """One step of a chain of rollouts: ``run(carry, 0)`` continues ``carry`` while its
    chain has ``left`` rollouts to go, else ``run(None, n)`` starts fresh rollouts (with room
    for a chain of ``n``, ``n - 1`` then left). A continuation that goes non-finite is redone
    fresh, and one whose last poses leave the data (RMS over :data:`CHAIN_BREAK_RMS`) ends
    its chain. Returns (loss, carry, rollouts left in its chain, 1 if the chain broke else 0)."""
    broke = 0
    if carry is not None and left > 0:
        try:
            loss, after = run(carry, 0)
            if not torch.isfinite(loss):
                raise NonFiniteError("a continued rollout's loss is not finite")
        except NonFiniteError:
            carry, broke = None, 1
        else:
            carry, left = after, left - 1
    else:
        carry = None
    if carry is None:
        left = n - 1
        loss, carry = run(None, n)
    if left and float(carry.prev.pow(2).mean(-1).sqrt().max()) > CHAIN_BREAK_RMS:
        carry, left, broke = None, 0, 1
    return loss, carry, left, broke


def free_loss(model, retriever: Retriever, clips: np.ndarray, s: TrainSettings, rng: np.random.Generator,
              floor: float, carry: Carry | None, chain_left: int, i: int, own: OwnTake | None = None
              ) -> tuple[torch.Tensor, Carry | None, int, int]:
    """The loss of free-stage step ``i``: :func:`chained_step` of :func:`rollout_loss`
    (fresh rollouts start from the truth with room for their chain of
    :func:`chain_length`). Returns (loss, carry, rollouts left in its chain, 1 if the chain
    broke else 0)."""
    def run(c: Carry | None, n: int) -> tuple[torch.Tensor, Carry]:
        return rollout_loss(model, retriever, clips, s, s.free_horizon, 1.0, rng, s.detach_every, floor, c,
                            max(n, 1), own)

    return chained_step(run, carry, chain_left, chain_length(s, i))


@torch.no_grad()
def validate(model, retriever: Retriever, val: Database, s: TrainSettings, floor: float,
             stick_targets: StickTargets | None = None) -> dict[str, float]:
    """Teacher-forced and free-running validation losses with retrieved and null candidates,
    and the free-running values of the trained rollout terms (``energy_with``, ...;
    ``stick_targets``: the training database's, computed here when None)."""
    clips = np.arange(len(val.ranges))
    length = min(s.window, s.context + s.val_horizon)
    out = {}
    starts = rollout_starts(val, clips, max(length, s.context + s.val_horizon) + 1, 0, None, stride=60)
    starts = starts[:: max(1, len(starts) // s.val_windows)][: s.val_windows]
    rows = starts[:, None] + np.arange(length + 1)[None]
    norm = retriever.norm
    dev = _device(model)
    pose = torch.as_tensor(norm.normalise(val.pose[rows]), device=dev)
    ctrl = torch.as_tensor(val.trajectory[rows[:, :-1]], device=dev)
    variants = [("with", True), ("without", False)] if model.use_retrieval else [("without", False)]
    stick_starts = None
    for name, use in variants:
        cands = torch.as_tensor(teacher_forced_candidates(retriever, val, rows[:, :-1], None, None),
                                device=dev) if use else None
        o, _ = model(ctrl, pose[:, :-1], cands)
        out[f"tf_{name}"] = float(F.mse_loss(o["pose"], pose[:, 1:]))
        # A young model's long free-running rollout may blow up (its poses reach NaN before a
        # loss is formed): that validation scores infinity, is never selected, and training goes on.
        try:
            r = rollout(model, retriever, val, starts, s.context, s.val_horizon, retrieval=use, rigid=s.rigid,
                        ground=s.ground, unit=s.unit_6d, velocities=s.rebuilt_velocities, planted=floor if s.planted else None)
            out[f"fr_{name}"] = float(F.mse_loss(r.pose, r.target))
            for term, value in motion_terms(val, retriever, r, s, floor).items():
                out[f"{term}_{name}"] = float(value)
        except NonFiniteError:
            out[f"fr_{name}"] = math.inf
            out.update({f"{term}_{name}": math.inf for term, w in term_weights(s).items() if w > 0 and term != "stick"})
        if s.stick_weight > 0:
            if stick_starts is None:
                stick_starts = _stick_starts(val, s)
                stick_targets = stick_targets or StickTargets.of(retriever.db)
            try:
                out[f"stick_{name}"] = float(_validate_sticks(model, retriever, val, s, floor, use, stick_starts,
                                                              stick_targets))
            except NonFiniteError:
                out[f"stick_{name}"] = math.inf
    return out


def _stick_starts(val: Database, s: TrainSettings) -> np.ndarray:
    """``val_windows`` evenly spaced upright starts of the validation clips with room for
    ``val_horizon`` frames (any such starts where none stays upright)."""
    length = s.context + s.val_horizon + 1
    rows = upright_rows(val, length)
    if len(rows) == 0:
        rows = rollout_starts(val, np.arange(len(val.ranges)), length, 0, None, stride=60)
    return rows[np.linspace(0, len(rows) - 1, min(s.val_windows, len(rows))).astype(np.int64)]


def _validate_sticks(model, retriever: Retriever, val: Database, s: TrainSettings, floor: float, use: bool,
                     starts: np.ndarray, targets: StickTargets) -> torch.Tensor:
    """:func:`stick_objective` of stick-driven rollouts of ``val_horizon`` frames from
    ``starts`` of the validation clips, the same stick scripts at every validation."""
    steer = random_sticks(s, len(starts), np.random.default_rng(0), val.fps)
    r = rollout(model, retriever, val, starts, s.context, s.val_horizon, retrieval=use, rigid=s.rigid, ground=s.ground,
                unit=s.unit_6d, velocities=s.rebuilt_velocities, planted=floor if s.planted else None, steer=steer,
                adjust=s.stick_adjust)
    return stick_objective(stick_terms(val, _raw(retriever, r.pose), r, steer, targets, floor, drawn=s.stick_adjust),
                           stick_weights(s))


def selection_key(rec: dict, s: TrainSettings) -> float:
    """What selects the checkpoint: the free-running validation loss (with retrieval when
    the model has it), plus each trained rollout term's weight x its validation value (the
    rollout part of the training objective)."""
    name = "with" if "fr_with" in rec else "without"
    return rec[f"fr_{name}"] + sum(w * rec.get(f"{term}_{name}", 0.0) for term, w in term_weights(s).items() if w > 0)


def diverged(step: int, stage: str, s: TrainSettings, partial: Path) -> KinemaError:
    """The error of a run whose rollouts or loss went non-finite at ``step``: where, what
    was running, what is kept, and what to change."""
    kept = (f"the last validated state is kept in {partial}" if partial.is_file()
            else "no validation had run yet, so nothing was kept")
    horizon = f", free_horizon {s.free_horizon}" if stage == "free" else ""
    return KinemaError(f"training diverged at step {step + 1} ({stage} stage{horizon}, lr {s.lr:g}): the loss or a "
                       f"rollout's poses became NaN or infinity; {kept}. Try a lower train.lr, a shorter train.free_horizon "
                       "or a smaller train.clip_grad")


def start_from(model: torch.nn.Module, checkpoint: str | Path, db: Database) -> None:
    """Load the weights of a finished ``checkpoint`` into ``model`` (``train.init``: a run
    that continues another one, e.g. more free-stage steps or new terms on a trained model).
    Raises :class:`KinemaError` when the checkpoint was trained on another database (its
    normalisation and candidates would not be this run's) or its weights do not fit the
    config's model."""
    from kinema.nn.checkpoint import load_checkpoint

    path = Path(checkpoint)
    if not path.is_file():
        raise KinemaError(f"train.init: {path} not found")
    try:
        saved, _ = load_checkpoint(path, fingerprint=db.fingerprint)
    except KinemaError as e:
        raise KinemaError(f"train.init: {e}") from e
    try:
        model.load_state_dict(saved.state_dict())
    except RuntimeError as e:
        raise KinemaError(f"train.init: {path} does not fit this config's model: {e}") from e


def partial_path(out: Path) -> Path:
    """Where an unfinished run of ``out`` keeps its state (see :func:`train`)."""
    return out.with_name(out.stem + ".partial" + out.suffix)


def _rng_states(rng, sampler, retriever) -> dict:
    states = {"rng": rng.bit_generator.state, "sampler": sampler.rng.bit_generator.state,
              "own": sampler.own.rng.bit_generator.state}
    if hasattr(retriever, "rng"):
        states["retriever"] = retriever.rng.bit_generator.state
    return states


def _set_rng_states(states: dict, rng, sampler, retriever) -> None:
    rng.bit_generator.state = states["rng"]
    sampler.rng.bit_generator.state = states["sampler"]
    if "own" in states:   # runs started before the own-take option have none
        sampler.own.rng.bit_generator.state = states["own"]
    if "retriever" in states:
        retriever.rng.bit_generator.state = states["retriever"]


def train(cfg: dict, out: str | Path | None = None, log=print, resume: bool = False,
          stop_after: int | None = None, on_validation: Callable[[dict], None] | None = None) -> tuple[Path, dict]:
    """Run the whole recipe of ``cfg``; write the checkpoint (best free-running validation
    weights) and return (path, metadata).

    At every validation the whole training state (weights, best weights, optimiser,
    schedule, random generators, history) is written to :func:`partial_path` of the output
    (safetensors, no pickle). ``resume=True`` continues from that file when it holds the same
    config, giving the same weights as an uninterrupted run; ``stop_after`` stops after that
    many steps with only the partial state written (returns its path and ``{}``). The
    partial file is removed when the run completes.

    ``on_validation(record)`` is called with every validation's history record (epoch,
    step, stage, train_loss, seconds and the validation numbers) as soon as it is made and
    its state saved (a resumed run first replays the records it restored), so a live view
    of the run (TensorBoard) follows the training.
    """
    out = Path(out or cfg.get("out", "model.safetensors"))   # relative to the working directory
    partial = partial_path(out)
    s = settings(cfg)
    if s.init and Path(s.init).resolve() == out.resolve():
        raise KinemaError(f"train.init is the output {out}: the run would overwrite the weights it starts from; "
                          "write it elsewhere with -o")
    torch.manual_seed(s.seed)
    torch.set_num_threads(s.threads)
    rng = np.random.default_rng(s.seed)
    t0 = time.time()
    db, val = build_databases(cfg)
    floor = floor_height(db)   # the toe height of the skating metric and of skate_on = "own"
    stick_targets = StickTargets.of(db) if s.stick_weight > 0 else None
    norm = Normaliser.fit(db.pose, floor=1e-2)
    retriever = make_retriever(cfg, db, norm)
    model = make_model(cfg, db, retriever).to(s.device)
    resuming = resume and partial.is_file()
    if s.init and not resuming:   # a resumed run's weights come from its partial state
        start_from(model, s.init, db)
    train_clips = np.arange(len(db.ranges))
    rc = cfg.get("retrieval", {})
    sampler = WindowSampler(retriever, train_clips, s.window, seed=s.seed,
                            allowed=upright_rows(db, s.window + 1) if s.upright else None,
                            own_share=float(rc.get("own_share", 0.0)), own_shift=int(rc.get("own_shift", 30)))
    # the rollouts' own-take candidates draw from the sampler's own-take generator
    own = sampler.own if rc.get("own_rollouts", False) and sampler.own.share > 0 else None
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    total = s.warmup + s.scheduled + s.free
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(i / max(total, 1), 1))))
    history: list[dict] = []
    best, best_state = math.inf, copy.deepcopy(model.state_dict())
    running: list[float] = []
    first, elapsed = 0, 0.0
    if resuming:
        from kinema.nn.checkpoint import load_checkpoint
        saved, meta = load_checkpoint(partial)
        st = meta.get("training_state") or {}
        if json.dumps(meta.get("config"), sort_keys=True) != json.dumps(cfg, sort_keys=True):
            raise KinemaError(f"{partial}: an unfinished run of another config; delete it or train without --resume")
        model.load_state_dict(saved.state_dict())
        opt.load_state_dict(st["optimizer"])
        sched.load_state_dict(st["scheduler"])
        torch.set_rng_state(st["torch_rng"])
        _set_rng_states(st["numpy_rngs"], rng, sampler, retriever)
        best, best_state = st["best"], st["best_state"]
        history, running, first, elapsed = st["history"], st["running"], st["step"], st["seconds"]
        log(f"resuming {partial} at step {first} of {total}")
    if on_validation is not None:
        for rec in history:
            on_validation(rec)
    t0 = time.time() - elapsed
    carry, chain_left, broken = None, 0, 0   # the free stage's chained rollouts (train.free_chain)
    stick_carry, stick_left = None, 0        # ... and its chained stick-driven ones (train.stick_chain)
    from tqdm import tqdm
    for step in tqdm(range(first, total), desc="train", leave=False, mininterval=5, initial=first, total=total):
        model.train()
        stage = "warmup" if step < s.warmup else "scheduled" if step < s.warmup + s.scheduled else "free"
        try:
            if stage == "warmup":
                loss = teacher_forced_loss(model, sampler, s, rng)
            elif stage == "scheduled":
                u = (step - s.warmup) / max(s.scheduled - 1, 1)
                h = int(round(s.horizon[0] + u * (s.horizon[1] - s.horizon[0])))
                loss, _ = rollout_loss(model, retriever, train_clips, s, h, u, rng, None, floor, own=own)
            else:
                loss, carry, chain_left, broke = free_loss(model, retriever, train_clips, s, rng, floor, carry,
                                                           chain_left, step - s.warmup - s.scheduled, own)
                broken += broke
                if s.stick_weight > 0:
                    sl, stick_carry, stick_left, broke = stick_step(model, retriever, train_clips, s, rng, floor,
                                                                    stick_targets, stick_carry, stick_left,
                                                                    step - s.warmup - s.scheduled)
                    loss, broken = loss + s.stick_weight * sl, broken + broke
            if stage != "warmup" and s.tf_mix > 0:   # keep the teacher-forced objective in the rollout stages
                loss = loss + s.tf_mix * teacher_forced_loss(model, sampler, s, rng)
        except NonFiniteError as e:   # a rollout's poses blew up before the loss was formed
            raise diverged(step, stage, s, partial) from e
        if not torch.isfinite(loss):
            raise diverged(step, stage, s, partial)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.clip_grad)
        opt.step()
        sched.step()
        running.append(loss.item())
        if (step + 1) % s.eval_every == 0 or step + 1 == total:
            model.eval()
            v = validate(model, retriever, val, s, floor, stick_targets)
            epoch = len(history) + 1
            rec = {"epoch": epoch, "step": step + 1, "stage": stage, "train_loss": float(np.mean(running)),
                   "seconds": round(time.time() - t0, 1), **v}
            if s.free_chain > 1 or (s.stick_weight > 0 and s.stick_chain > 1):
                rec["chains_broken"] = broken
            running = []
            carry = stick_carry = None   # a chain ends at a validation, so a run resumed from here continues as this one
            stick_left = 0
            history.append(rec)
            log(json.dumps(rec))
            key = selection_key(v, s)
            # Only the free-running stages select (warm-up weights are not a controller yet).
            if stage != "warmup" and key < best:
                best, best_state = key, copy.deepcopy(model.state_dict())
            state = {"step": step + 1, "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                     "torch_rng": torch.get_rng_state(), "numpy_rngs": _rng_states(rng, sampler, retriever),
                     "best": best, "best_state": best_state, "history": history, "running": running,
                     "seconds": time.time() - t0}
            save_checkpoint(partial, model, training_state=state, config=cfg)
            if on_validation is not None:
                on_validation(rec)
        if stop_after is not None and step + 1 >= stop_after and step + 1 < total:
            return partial, {}
    if s.scheduled + s.free > 0:
        model.load_state_dict(best_state)
    best_rec = min((h for h in history if h["stage"] != "warmup"), default=history[-1],
                   key=lambda h: selection_key(h, s))
    meta = {
        "config": cfg,
        "normalisation": {"pose": norm.to_json(), "feature_mean": db.feature_mean.tolist(),
                          "feature_scale": db.feature_scale.tolist()},
        "loss_weights": {"pose_mse": 1.0, "contact_bce": s.contact_weight, "joint_position_mse": s.position_weight,
                         "teacher_forced_mix": s.tf_mix, **_used_terms(s)},
        "fingerprint": db.fingerprint,
        "database": {"fingerprint": db.fingerprint, "rows": db.rows, "pose_width": db.pose_width,
                     "frame_time": db.frame_time, "clips": db.clip_names, "joints": db.joint_names,
                     "roles": db.roles, "config": db.config.to_dict(), "mirror": db.mirror,
                     "sources": db.sources, "pose_layout": [list(g) for g in db.pose_layout],
                     "build_command": db_build_command(cfg)},
        "validation_clips": sorted({n.removesuffix("_mirror") for n in val.clip_names}),
        "test_clips": sorted(cfg["data"].get("test", [])),
        "retrieval": {"k": retriever.k, "top": retriever.top, "tau": retriever.tau, "refresh": retriever.refresh},
        "history": {"epochs": history, "first": history[0], "best": best_rec, "last": history[-1]},
        "parameters": model.parameter_groups(),
        "train_seconds": round(time.time() - t0, 1),
        "torch_threads": s.threads,
    }
    save_checkpoint(out, model, **meta)
    partial.unlink(missing_ok=True)
    return out, meta


