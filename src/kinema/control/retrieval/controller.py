"""Runtime character controllers around a retrieval checkpoint, per frame.

:class:`RetrievalCrowd` steps B characters at once (one batched network step, one batched
search over the characters due a refresh); :class:`RetrievalController` is one character,
a view of a crowd of one (the same arrays and the same operations, so its outputs are
those of the crowd's first character).

Three modes share one character state (pose vector, root on the floor) so they can be
switched live:

- ``"retrieval"``: the retrieval-augmented Mamba, candidates searched every ``refresh``
  frames from the character's own pose and the joystick, advanced one row per frame;
- ``"no_retrieval"``: a model trained without retrieval when one is given, else the same
  model fed only its learned null token;
- ``"matching"``: motion-matching playback from the same database (search every
  ``refresh`` frames, play the best row's successors).

The joystick is the 12-d trajectory request relative to the character's root
(:meth:`kinema.control.trajectory.Prediction.features` gives it from a gamepad).
:meth:`RetrievalCrowd.drive` is the whole runtime frame from sticks, as the demos, the
scenarios and the benchmarks run it: the crowd's own trajectory springs
(``trajectory``, a batched :class:`~kinema.control.trajectory.TrajectoryController`) take
the sticks, their prediction relative to each root is the joystick, the network steps, and
each root is pulled toward its simulation object (:meth:`RetrievalCrowd.adjust_toward`).

A crowd may stagger its searches: character i refreshes its candidates on the frames where
``(frame + phase[i]) % refresh == 0`` (``phase`` 0 for all: every character searches on the
same frames, as one controller does), so a frame searches about B / refresh characters
instead of B every ``refresh`` frames.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from kinema.control.retrieval.metrics import floor_height, joint_positions
from kinema.control.retrieval.pose import rigid_pose
from kinema.control.retrieval.rollout import CandidateStream, RootMover, adjust_roots, query
from kinema.control.retrieval.sequences import Retriever
from kinema.control.trajectory import ControlConfig, Simulation, TrajectoryController
from kinema.errors import KinemaError, NonFiniteError
from kinema.features.normalisation import Normaliser
from kinema.features.root import yaw_rotate
from kinema.matching.database import Database, pose_to_world
from kinema.matching.search import Exclusion
from kinema.maths import angles
from kinema.nn.checkpoint import load_checkpoint

MODES = ("retrieval", "no_retrieval", "matching")


def trained_planted(meta: dict) -> bool:
    """Whether a checkpoint's rollouts were trained with planted-foot roots (its config's
    ``train.planted``): how its runtime and its evaluation move the root by default."""
    return bool(meta.get("config", {}).get("train", {}).get("planted", False))


def trained_unit_6d(meta: dict) -> bool:
    """Whether a checkpoint was trained with its predicted 6D rotations made unit columns
    before they were fed back (its config's ``train.unit_6d``,
    :func:`kinema.control.retrieval.pose.rigid_pose`): how its runtime and its evaluation
    feed its poses back (a network trained on its raw 6D expects them raw)."""
    return bool(meta.get("config", {}).get("train", {}).get("unit_6d", False))


def trained_rebuilt_velocities(meta: dict) -> bool:
    """Whether a checkpoint was trained with the joint velocities of every predicted pose
    rebuilt from its joints' motion (its config's ``train.rebuilt_velocities``,
    :func:`kinema.control.retrieval.pose.rigid_pose` with ``prev``): how its runtime and
    its evaluation feed its poses back."""
    return bool(meta.get("config", {}).get("train", {}).get("rebuilt_velocities", False))


class RetrievalCrowd:
    """Drive B characters with one retrieval checkpoint (see the module docstring).

    Args:
        checkpoint: path of a RetrievalMamba checkpoint (one trained without retrieval runs without candidates).
        db: its database (fingerprint checked).
        batch: number of characters B.
        baseline: optional checkpoint trained without retrieval (same database).
        start_row: database row(s) (int or (B,)) whose pose starts each character.
        rigid: rebuild the joint positions of every predicted pose from its rotations
            (:func:`kinema.control.retrieval.pose.rigid_pose`): no drawn pose can stretch a
            bone or sink below the lowest any pose of the database reaches (False: draw the
            network's positions as predicted); for a checkpoint trained with ``train.unit_6d``
            its 6D rotations are also fed back as unit columns, and for one trained with
            ``train.rebuilt_velocities`` its joint velocities are rebuilt from the joints'
            motion, as in its training.
        phase: (B,) search offsets in frames (None: 0 for all; see the module docstring).
        planted: move each root so that its toes on the floor stay put (planted-foot root
            motion, :func:`kinema.control.planted.planted_root`, floor height
            :func:`kinema.control.retrieval.metrics.floor_height`), after the pose's own
            root motion; False: the pose's root motion alone; None: as the checkpoint was
            trained (its ``train.planted``).
        control: the trajectory springs' speeds and halflives (None: the defaults).
        search_mask: (N,) bool, the database rows the candidate search may return (None:
            every row); the demos pass :func:`kinema.matching.database.upright_mask`, so the
            candidates a stick retrieves are never a fall, a crawl or a crouch of the data.

    State (numpy, one row per character): ``poses`` (B, P) raw pose vectors, ``root_pos``
    and ``root_dir`` (B, 3) float32 roots on the floor, ``contacts`` (B, 2) toe contacts;
    ``trajectory`` the springs :meth:`drive` steps (started at each root by :meth:`reset`).
    """

    def __init__(self, checkpoint: str | Path, db: Database, batch: int = 1, baseline: str | Path | None = None,
                 start_row: int | np.ndarray = 0, mode: str = "retrieval", rigid: bool = True,
                 phase: np.ndarray | None = None, planted: bool | None = None,
                 control: ControlConfig | None = None, search_mask: np.ndarray | None = None):
        if batch < 1:
            raise KinemaError(f"a crowd needs at least one character, got batch={batch}")
        self.model, meta = load_checkpoint(checkpoint, fingerprint=db.fingerprint)
        self.base = None
        if baseline is not None:
            self.base, _ = load_checkpoint(baseline, fingerprint=db.fingerprint)
        self.db = db
        self.batch = int(batch)
        self.norm = Normaliser.from_json(meta["normalisation"]["pose"])
        self.retriever = Retriever.for_checkpoint(db, self.norm, meta, mask=search_mask)
        if mode not in MODES:
            raise KinemaError(f"unknown controller mode {mode!r}; choose from {MODES}")
        self.mode = mode
        self.rigid = rigid
        self.unit = trained_unit_6d(meta)
        self.velocities = trained_rebuilt_velocities(meta)
        self.planted = floor_height(db) if (trained_planted(meta) if planted is None else planted) else None
        self.control = control
        self.reset(start_row, phase=phase)

    def reset(self, row: int | np.ndarray = 0, position=(0.0, 0.0, 0.0), direction=(0.0, 0.0, 1.0),
              phase: np.ndarray | None = None) -> None:
        """Put every character in database row ``row``'s pose (int or (B,)) at a root on the
        floor: ``position`` and ``direction`` (3,) for all or (B, 3) each; ``phase`` (B,)
        search offsets (None keeps the current ones, 0 at construction). The trajectory
        springs start at rest at the roots."""
        b = self.batch
        rows = np.broadcast_to(np.asarray(row, np.int64), (b,))
        self.poses = self.db.pose[rows].copy()
        self.root_pos = np.array(np.broadcast_to(np.asarray(position, np.float32), (b, 3)))
        self.root_dir = np.array(np.broadcast_to(np.asarray(direction, np.float32), (b, 3)))
        self.state = self.model.initial_state(b)
        self.base_state = None if self.base is None else self.base.initial_state(b)
        if phase is not None:
            self.phase = np.broadcast_to(np.asarray(phase, np.int64), (b,)).copy()
        elif getattr(self, "phase", None) is None:
            self.phase = np.zeros(b, np.int64)
        self.stream = CandidateStream(self.retriever, None, None, phase=self.phase)
        self.frame = 0
        self.played = None
        self.since = np.zeros(b, np.int64)
        self.contacts = np.zeros((b, 2), np.float32)
        self.mover = RootMover(self.db, self.planted)
        self.mover.start(self.poses, self.root_pos, self.root_dir)
        self.trajectory = TrajectoryController(self.control, self.root_pos.astype(np.float64),
                                               angles.yaw(self.root_dir.astype(np.float64)), batch=b)

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise KinemaError(f"unknown controller mode {mode!r}; choose from {MODES}")
        self.mode = mode
        self.played = None

    @torch.no_grad()
    def step(self, control: np.ndarray) -> np.ndarray:
        """Advance every character one frame (1/60 s) with its joystick ``control`` (B, 12);
        returns the raw pose vectors (B, P) (the crowd's ``poses``)."""
        b = self.batch
        ctrl = np.asarray(control, np.float32).reshape(b, 12)
        pose_n = torch.as_tensor(self.norm.normalise(self.poses))
        c = torch.as_tensor(ctrl)
        _, cand = self.stream(self.frame, self.poses, ctrl)
        # the state is the crowd's own (reset makes a fresh one): overwritten in place, no
        # (B, Di, N) allocation per frame
        # a checkpoint trained without retrieval (a twin driven on its own) reads no candidates
        reads = self.mode == "retrieval" and self.model.use_retrieval
        out, self.state = self.model.step(self.state, c, pose_n, torch.as_tensor(cand) if reads else None, inplace=True)
        if self.base is not None:
            bout, self.base_state = self.base.step(self.base_state, c, pose_n, inplace=True)
        if self.mode == "matching":
            due = np.ones(b, bool) if self.played is None else (self.frame + self.phase) % self.retriever.refresh == 0
            if due.any():
                idx, _ = self.db.search(query(self.retriever, self.poses[due], ctrl[due]), 1,
                                        Exclusion(mask=self.retriever.mask))
                if self.played is None:
                    self.played = np.zeros(b, np.int64)
                self.played[due] = idx[:, 0]
                self.since[due] = 0
            self.since += 1
            rows = self.db.successor(self.played, self.since)
            new = self.db.pose[rows].copy()
            self.contacts = self.db.contacts[rows].astype(np.float32)
        else:
            o = bout if (self.mode == "no_retrieval" and self.base is not None) else out
            new = self.norm.denormalise(o["pose"].numpy())
            if self.rigid:
                new = rigid_pose(self.db, new, self.retriever.ground, self.unit,
                                 self.poses if self.velocities else None, self.retriever.reach)
            self.contacts = (torch.sigmoid(o["contact_logits"]).numpy() > 0.5).astype(np.float32)
        bad = ~np.isfinite(new).all(-1)
        if bad.any():
            raise NonFiniteError(f"the {self.mode} controller produced a non-finite pose at frame {self.frame} "
                                 f"(characters {np.flatnonzero(bad).tolist()[:8]})")
        self.poses = new
        self.root_pos, self.root_dir = self.mover(self.root_pos, self.root_dir, new)
        self.frame += 1
        return new

    def drive(self, sticks: np.ndarray, dt: float, walk: bool | np.ndarray = False, adjust: bool = True
              ) -> Simulation:
        """One runtime frame of ``dt`` seconds from sticks (B, 2) (dead-zoned; +y forward):
        the trajectory springs advance (``walk``: walk speeds, a bool or (B,)), their
        prediction relative to each character's root is its joystick for :meth:`step`, and
        with ``adjust`` each root is pulled toward its simulation object
        (:meth:`adjust_toward`). Returns the springs' simulation (batched shapes)."""
        sim = self.trajectory.update(np.asarray(sticks, np.float64).reshape(self.batch, 2), dt, walk=walk)
        self.step(self.trajectory.predict().features(self.root_pos, self.root_dir))
        if adjust:
            self.adjust_toward(sim.position, sim.direction, dt)
        return sim

    def adjust_toward(self, position: np.ndarray, direction: np.ndarray, dt: float) -> None:
        """Each character's root pulled toward its simulation object at ``position`` (B, 3),
        its facing toward ``direction`` (B, 3) (:func:`~kinema.control.retrieval.rollout.
        adjust_roots`: Motion Matching's adjustment and clamping)."""
        pos, dirs = adjust_roots(self.root_pos, self.root_dir, position, direction, dt)
        self.root_pos[:] = pos
        self.root_dir[:] = dirs
        self.mover.start(self.poses, self.root_pos, self.root_dir)   # the toes as now drawn

    def world_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World poses (rotations (B, J, 4), positions (B, J, 3)) of the current pose vectors."""
        return pose_to_world(self.poses, self.db.num_joints, self.root_pos, self.root_dir)

    def joint_positions(self) -> np.ndarray:
        """World joint positions (B, J, 3) of the current poses."""
        return yaw_rotate(self.root_dir[:, None], joint_positions(self.db, self.poses)) + self.root_pos[:, None]

    @property
    def root(self) -> tuple[np.ndarray, np.ndarray]:
        """(root positions, root directions), each (B, 3), as drawn."""
        return self.root_pos.copy(), self.root_dir.copy()


class RetrievalController:
    """Drive one character with a retrieval checkpoint: a view of a :class:`RetrievalCrowd`
    of one (``crowd``), with per-character shapes (pose (P,), joystick (12,)).

    Args: those of :class:`RetrievalCrowd` for one character (``phase`` an int).
    """

    def __init__(self, checkpoint: str | Path, db: Database, baseline: str | Path | None = None,
                 start_row: int = 0, mode: str = "retrieval", rigid: bool = True, phase: int = 0,
                 planted: bool | None = None, control: ControlConfig | None = None,
                 search_mask: np.ndarray | None = None):
        self.crowd = RetrievalCrowd(checkpoint, db, 1, baseline, start_row, mode, rigid, phase=np.array([phase]),
                                    planted=planted, control=control, search_mask=search_mask)

    def __getattr__(self, name: str):
        # model, base, db, norm, retriever, mode, rigid, state, base_state, frame, stream: the crowd's
        if name == "crowd":
            raise AttributeError(name)
        return getattr(self.crowd, name)

    def __setattr__(self, name: str, value) -> None:
        if name == "crowd":
            object.__setattr__(self, name, value)
        elif name in ("pose", "contacts"):
            raise AttributeError(f"{name} is read-only (write into it, or reset the character)")
        else:   # mode, rigid, ...: the crowd's, which the step reads
            setattr(self.crowd, name, value)

    @property
    def pose(self) -> np.ndarray:
        """The raw pose vector (P,)."""
        return self.crowd.poses[0]

    @property
    def root_pos(self) -> np.ndarray:
        """Root position (1, 3) float32 (the crowd's array: writing it moves the character)."""
        return self.crowd.root_pos

    @property
    def root_dir(self) -> np.ndarray:
        """Root facing (1, 3) float32 (the crowd's array)."""
        return self.crowd.root_dir

    @property
    def contacts(self) -> np.ndarray:
        """Toe contacts (2,) of the current pose."""
        return self.crowd.contacts[0]

    def reset(self, row: int = 0, position=(0.0, 0.0, 0.0), direction=(0.0, 0.0, 1.0)) -> None:
        """Put the character in database row ``row``'s pose at a root on the floor."""
        self.crowd.reset(row, position, direction)

    def set_mode(self, mode: str) -> None:
        self.crowd.set_mode(mode)

    def step(self, control: np.ndarray) -> np.ndarray:
        """Advance one frame (1/60 s) with the joystick ``control`` (12,); returns the raw
        pose vector (P,)."""
        return self.crowd.step(np.asarray(control, np.float32).reshape(1, 12))[0]

    def drive(self, stick: np.ndarray, dt: float, walk: bool = False, adjust: bool = True) -> Simulation:
        """:meth:`RetrievalCrowd.drive` for this character's ``stick`` (2,); returns its
        simulation object (one character's shapes)."""
        return self.crowd.drive(np.asarray(stick, np.float64).reshape(1, 2), dt, walk, adjust).at(0)

    def adjust_toward(self, position: np.ndarray, direction: np.ndarray, dt: float) -> None:
        """:meth:`RetrievalCrowd.adjust_toward` for this character's ``position`` and
        ``direction`` (3,)."""
        self.crowd.adjust_toward(position, direction, dt)

    def world_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World pose (rotations (J, 4), positions (J, 3)) of the current pose vector."""
        rot, pos = self.crowd.world_pose()
        return rot[0], pos[0]

    def joint_positions(self) -> np.ndarray:
        """World joint positions (J, 3) of the current pose."""
        return self.crowd.joint_positions()[0]

    @property
    def root(self) -> tuple[np.ndarray, np.ndarray]:
        """Root position and facing direction (3,), (3,)."""
        return self.crowd.root_pos[0].copy(), self.crowd.root_dir[0].copy()
