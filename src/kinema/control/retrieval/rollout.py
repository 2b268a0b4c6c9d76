"""Free-running rollouts of the retrieval controller (training and evaluation share them).

A rollout warms the model's state on ``context`` ground-truth frames (teacher forcing,
candidates from the ground-truth queries), then runs ``horizon`` frames with :meth:`step`:

- the predicted root is integrated from the predicted root motion (pose[0:3]);
- the joystick is the clip's real future root trajectory re-expressed relative to the
  *predicted* root every frame (as Motion Matching does at runtime);
- retrieval re-runs every ``refresh`` frames from the *predicted* pose's matching features
  and that joystick; candidate rows advance by one per frame in between;
- the predicted pose is fed back (or, with probability ``1 - student``, the ground truth:
  scheduled sampling); gradients flow through the fed-back predictions unless
  ``detach_every`` cuts them (truncated BPTT).

``source`` is any :class:`~kinema.matching.database.Database` holding the clips the
rollouts follow (the training database itself, or held-out clips built with the same
config). The root moves by the pose's own root velocity and turning rate (its last six
numbers, :func:`kinema.matching.database.pose_layout`), and with ``planted`` (a floor
height) is then corrected so that toes on the floor stay put
(:func:`kinema.control.planted.planted_root`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from kinema.control.planted import planted_root
from kinema.control.retrieval.metrics import joint_positions
from kinema.control.retrieval.pose import rigid_pose_normalised
from kinema.control.retrieval.sequences import OwnTake, Retriever
from kinema.control.retrieval.steering import StickSteer
from kinema.errors import KinemaError
from kinema.features.root import yaw_rotate
from kinema.matching.database import Database
from kinema.matching.search import Exclusion
from kinema.maths import angles


def root_motion(db: Database, poses: np.ndarray) -> np.ndarray:
    """(B, 3) root velocity x, z (root space, m/s) and turning rate (rad/s) of raw pose
    vectors (B, P) of ``db``'s layout."""
    lay = {name: a for name, a, _ in db.pose_layout}
    v, w = lay["root_velocity"], lay["root_angular_velocity"]
    return np.stack([poses[:, v], poses[:, v + 2], poses[:, w + 1]], -1)


def toe_positions(db: Database, poses):
    """Root-space toe positions (..., 2, 3) (left, right; metres) of raw pose vectors (..., P)
    (NumPy or torch)."""
    return joint_positions(db, poses)[..., [db.roles["left_toe"], db.roles["right_toe"]], :]


class RootMover:
    """Roots (B, 3) moved frame by frame by raw pose vectors of ``db``'s layout: the pose's
    own root motion (:func:`integrate_root`), then, with ``planted`` (a toe floor height in
    metres, e.g. :func:`kinema.control.retrieval.metrics.floor_height`), the planted-foot
    correction (:func:`kinema.control.planted.planted_root`) from the toes drawn the frame
    before. One mover serves the runtime, the rollouts and the playback baselines, so every
    method's root is moved by the same rule."""

    def __init__(self, db: Database, planted: float | None = None):
        self.db, self.planted = db, planted
        self.toes = None   # (B, 2, 3) world toes drawn last frame (None: not yet known)

    def start(self, poses: np.ndarray, root_pos: np.ndarray, root_dir: np.ndarray) -> None:
        """Set last frame's toes from raw poses (B, P) drawn at roots (B, 3), (B, 3)."""
        self.toes = yaw_rotate(np.asarray(root_dir)[:, None], toe_positions(self.db, poses)) + np.asarray(root_pos)[:, None]

    def __call__(self, root_pos: np.ndarray, root_dir: np.ndarray, poses: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Roots (B, 3), (B, 3) advanced one frame by raw poses (B, P)."""
        pos, dirs = integrate_root(root_pos, root_dir, root_motion(self.db, poses), self.db.fps)
        return self.plant(pos, dirs, poses), dirs

    def plant(self, root_pos: np.ndarray, root_dir: np.ndarray, poses: np.ndarray) -> np.ndarray:
        """Roots (B, 3) that already moved this frame, corrected by the planted-foot rule for
        raw poses (B, P) (unchanged without ``planted``); for a controller that moves its
        own roots (motion matching)."""
        if self.planted is None:
            return root_pos
        if self.toes is None:
            self.start(poses, root_pos, root_dir)
            return root_pos
        pos, self.toes = planted_root(root_pos, root_dir, toe_positions(self.db, poses), self.toes, self.planted)
        return pos


ADJUST_HALFLIFE = 0.2   # s, position and facing pulled toward the simulation object
ADJUST_CLAMP = 0.5      # m, the root never lags the simulation object by more


def adjust_roots(root_pos: np.ndarray, root_dir: np.ndarray, goal_pos: np.ndarray, goal_dir: np.ndarray,
                 dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Motion Matching's adjustment and clamping (NOTES.md 1.5) for one frame of ``dt``
    seconds: roots (B, 3) move toward the simulation objects at ``goal_pos`` (B, 3, height
    ignored) with a damper of ADJUST_HALFLIFE and never lag them by more than ADJUST_CLAMP
    (m); facings (B, 3) turn toward ``goal_dir`` (B, 3) the same way. Returns the new
    roots and facings (B, 3) float32."""
    a = 1.0 - 0.5 ** (dt / ADJUST_HALFLIFE)
    goal = np.asarray(goal_pos, np.float32).reshape(-1, 3) * [1, 0, 1]
    pos = root_pos + a * (goal - root_pos)
    off = pos - goal
    dist = np.sqrt((off * off).sum(-1))
    far = dist > ADJUST_CLAMP
    if far.any():
        pos[far] -= off[far] * (1 - ADJUST_CLAMP / dist[far])[:, None]
    yaw = angles.yaw(root_dir)
    yaw = yaw + a * angles.wrap(angles.yaw(np.asarray(goal_dir).reshape(-1, 3)) - yaw)
    return (pos.astype(np.float32),
            np.stack([np.sin(yaw), np.zeros_like(yaw), np.cos(yaw)], -1).astype(np.float32))


def control_at(source: Database, rows: np.ndarray, root_pos: np.ndarray, root_dir: np.ndarray) -> np.ndarray:
    """Joystick (B, 12) of ``rows`` (B,): the clip's future root at +20/+40/+60 frames
    (clamped to the clip) relative to the given (predicted) roots (B, 3), (B, 3)."""
    stop = source.ranges[source.clip_of(rows), 1] - 1
    fut = np.minimum(rows[:, None] + np.asarray(source.config.trajectory_frames)[None], stop[:, None])
    tp = yaw_rotate(root_dir[:, None], source.root_positions[fut] - root_pos[:, None], inverse=True)
    td = yaw_rotate(root_dir[:, None], source.root_directions[fut], inverse=True)
    b = len(rows)
    return np.concatenate([tp[..., [0, 2]].reshape(b, 6), td[..., [0, 2]].reshape(b, 6)], -1).astype(np.float32)


def integrate_root(root_pos: np.ndarray, root_dir: np.ndarray, motion: np.ndarray, fps: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Advance roots (B, 3), (B, 3) by one frame (1 / ``fps`` s) of root motion (B, 3) =
    (vx, vz, yaw rate) given in the root frame of the frame reached (m/s, rad/s): turn
    first, then move along the new facing."""
    yaw = angles.yaw(root_dir) + motion[:, 2] / fps
    s, c = np.sin(yaw), np.cos(yaw)
    dx, dz = motion[:, 0] / fps, motion[:, 1] / fps
    pos = root_pos + np.stack([c * dx + s * dz, np.zeros_like(dx), c * dz - s * dx], -1)
    return pos.astype(np.float32), np.stack([s, np.zeros_like(yaw), c], -1).astype(np.float32)


def query(retriever: Retriever, poses: np.ndarray, control: np.ndarray) -> np.ndarray:
    """Normalised matching features (B, D) of raw poses (B, P) and joysticks (B, 4T)."""
    db = retriever.db
    return db.normalise(db.features_from_pose(poses, control))




class CandidateStream:
    """Retrieval during a rollout: search every ``refresh`` frames, advance rows between.

    ``phase`` (B,) staggers the searches (a runtime crowd): sequence i searches on the frames
    where ``(t + phase[i]) % refresh == 0`` (and on the first call); None searches every
    sequence on the same frames. ``own`` (training, :meth:`OwnTake.pick`): the rollouts
    whose searches put one slot on their own take, read from the ``truth`` rows passed
    with each call."""

    def __init__(self, retriever: Retriever, exclude: np.ndarray | None, rng: np.random.Generator | None,
                 phase: np.ndarray | None = None,
                 own: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None):
        self.r, self.exclude, self.rng = retriever, exclude, rng
        self.rows = self.cost = None
        self.since = 0
        self.phase = None if phase is None else np.asarray(phase, np.int64)
        self.own = own if own is not None and own[0].any() else None

    def __call__(self, t: int, poses: np.ndarray, control: np.ndarray, truth: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Rows (B, k) and payloads (B, k, W) for frame ``t`` from raw poses/joysticks
        (``truth``: (B,) the rows the rollouts' takes have reached, for ``own``)."""
        if self.phase is not None and self.rows is not None:
            self._staggered(t, poses, control)
        elif self.rows is None or t % self.r.refresh == 0:
            q = query(self.r, poses, control)
            idx, cost = self.r.search(q, self.exclude)
            self.rows, self.cost = self.r.sample(idx, cost, self.rng)
            self.since = 0 if self.phase is None else np.zeros(len(poses), np.int64)
            if self.own is not None and truth is not None:
                self._own_take(q, truth)
        else:
            self.since += 1
        rows = self.r.db.successor(self.rows, self.since if self.phase is None else self.since[:, None])
        return rows, self.r.payload(rows, self.cost)

    def _own_take(self, q: np.ndarray, truth: np.ndarray) -> None:
        """Put the own take's row (truth + shift, inside its clip) in the chosen slot."""
        which, shift, slot = self.own
        own = OwnTake.place(self.r.db, truth[which], shift[which])
        self.rows, self.cost = self.rows.copy(), self.cost.copy()
        self.rows[which, slot[which]] = own
        self.cost[which, slot[which]] = ((self.r.db.features[own] - q[which]) ** 2).sum(-1)

    def _staggered(self, t: int, poses: np.ndarray, control: np.ndarray) -> None:
        """Search only the sequences due at frame ``t``; the others advance one row."""
        due = (t + self.phase) % self.r.refresh == 0
        self.since += 1
        if due.any():
            ex = None if self.exclude is None else self.exclude[due]
            idx, cost = self.r.search(query(self.r, poses[due], control[due]), ex)
            self.rows[due], self.cost[due] = self.r.sample(idx, cost, self.rng)
            self.since[due] = 0


@dataclass
class Carry:
    """Where a :func:`rollout` stopped, to continue it (detached from the autograd graph):
    the model state, the last predicted normalised pose (B, P) and its row (B,) of the
    source, the roots (B, 3), the root mover and candidate stream, the frames run so far,
    the per-rollout exclusions and kept-retrieval flags (B,), and the stick steer that drove
    it (None: the clip's own path)."""

    state: object
    prev: torch.Tensor
    row: np.ndarray
    root_pos: np.ndarray
    root_dir: np.ndarray
    mover: RootMover
    stream: CandidateStream | None
    frames: int
    exclude: np.ndarray | None
    seq_keep: np.ndarray
    steer: StickSteer | None = None


@dataclass
class Rollout:
    """Output of :func:`rollout`: predicted normalised poses (B, H, P) (torch, with grad
    when asked), contact logits (B, H, 2), targets (B, H, P) normalised, the predicted and
    true roots (B, H, 3) positions and directions, the target rows (B, H), the roots
    (B, 3) and world toes (B, 2, 3) before the first frame, and the :class:`Carry` that
    continues it."""

    pose: torch.Tensor
    contact_logits: torch.Tensor
    target: torch.Tensor
    target_contacts: torch.Tensor
    root_pos: np.ndarray
    root_dir: np.ndarray
    true_pos: np.ndarray
    true_dir: np.ndarray
    rows: np.ndarray
    start_pos: np.ndarray
    start_dir: np.ndarray
    start_toes: np.ndarray
    carry: Carry


def _dropout_mask(b: int, k: int, rng: np.random.Generator | None, p_all: float, p_each: float) -> np.ndarray:
    if rng is None or (p_all <= 0 and p_each <= 0):
        return np.ones((b, k), bool)
    keep = rng.random((b, k)) >= p_each
    keep &= (rng.random((b, 1)) >= p_all)
    return keep


def teacher_forced_candidates(retriever: Retriever, source: Database, rows: np.ndarray,
                              exclude: np.ndarray | None, rng: np.random.Generator | None) -> np.ndarray:
    """Payloads (B, L, k, W) for ground-truth input rows (B, L): the query of each refresh
    frame is the row's own matching features (joystick from the true root)."""
    b, length = rows.shape
    stream = CandidateStream(retriever, exclude, rng)
    out = []
    for t in range(length):
        if t % retriever.refresh == 0:
            idx, cost = retriever.search(retriever.db.normalise(source.raw_features[rows[:, t]]), exclude)
            stream.rows, stream.cost = retriever.sample(idx, cost, rng)
            stream.since = 0
        else:
            stream.since += 1
        out.append(retriever.payload(retriever.db.successor(stream.rows, stream.since), stream.cost))
    return np.stack(out, 1)


def rollout(model, retriever: Retriever, source: Database, starts: np.ndarray | None, context: int, horizon: int, *,
            retrieval: bool = True, exclude: np.ndarray | None = None, rng: np.random.Generator | None = None,
            student: float = 1.0, dropout: tuple[float, ...] = (0.0, 0.0, 0.0), detach_every: int | None = None,
            rigid: bool = False, ground: bool = True, unit: bool = False, velocities: bool = False,
            planted: float | None = None,
            carry: Carry | None = None,
            steer: StickSteer | None = None, adjust: bool = False, own: OwnTake | None = None) -> Rollout:
    """Roll ``model`` out from rows ``starts`` (B,) (see the module docstring): ``horizon``
    predicted frames, rows ``starts + context .. starts + context + horizon - 1``, which must
    lie in one clip each (the first is the context's own last prediction).

    ``retrieval=False`` feeds only the null token (the ablation); a model built without
    retrieval ignores the argument. ``rng`` enables candidate sampling and dropout
    (``dropout`` = (all per frame, each per frame, the whole rollout including its context:
    so a rollout with only the null token, the ablation, is a case the model was trained on))
    and scheduled sampling; None is deterministic. ``rigid``: every predicted pose has its
    joint positions rebuilt from its rotations, its hips kept within the ``retriever``'s
    reach of the root (always, as at runtime) and, with ``ground``, lifted above its ground
    (:func:`kinema.control.retrieval.pose.rigid_pose`, differentiable)
    before it is scored and fed back, as the runtime controller does; with ``unit`` its 6D
    rotations are also made the unit columns of the rotations they encode, and with
    ``velocities`` its joint velocities are its joints' motion from the pose before it.
    ``planted``: toe floor height (m) of the planted-foot root correction (:class:`RootMover`).

    ``carry`` (the :attr:`Rollout.carry` of an earlier rollout) continues that rollout
    instead: no context, ``horizon`` more frames from the state, pose, roots and candidates
    it reached (``starts``, ``context`` and ``exclude`` are then ignored), the rows
    following its last one, which must lie in the same clips. Training chains rollouts so
    that its losses read states a model reaches only after a long drive.

    ``steer`` (a :class:`~kinema.control.retrieval.steering.StickSteer`) gives the
    predicted frames their joystick from sticks through the runtime's springs, started at
    rest at the context's last root, instead of from the clip's future path: the rows then
    only say where the context comes from (the targets are the clip's, held at its last
    frame past its end, unused by a stick-driven loss). A carried rollout continues with the steer it was steered by (its
    springs and sticks run on), and only with it. With ``adjust`` every predicted frame's
    root is then also pulled toward the springs' simulation object (:func:`adjust_roots`),
    as :meth:`~kinema.control.retrieval.controller.RetrievalCrowd.drive` pulls the runtime's:
    :attr:`Rollout.root_pos` and ``root_dir`` are then the roots the runtime would draw.

    ``own`` (training, :class:`OwnTake`): a share of the fresh rollouts that follow their
    take get one candidate slot from it at every search (a carried rollout keeps its draw).
    """
    if carry is not None and (steer is None) != (carry.steer is None):
        raise KinemaError("a carried rollout continues with the steer it was driven by (and only a steered one with a steer)")
    if adjust and steer is None:
        raise KinemaError("only a steered rollout's roots can be adjusted toward its springs (adjust needs a steer)")
    norm = retriever.norm
    uses = getattr(model, "use_retrieval", False) and retrieval
    device = next(model.parameters()).device
    t_ = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
    mean, std = t_(norm.mean), t_(norm.std)

    def project(x: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
        """The pose drawn and fed back of the prediction ``x`` following the pose ``before``."""
        if not rigid:
            return x
        return rigid_pose_normalised(source, x, mean, std, retriever.ground if ground else None, unit,
                                     before if velocities else None, retriever.reach)
    # normalised target poses of rows (the retriever's cached array when rolling out on its database)
    poses_n = retriever.poses_n if source is retriever.db else None

    def target(rows: np.ndarray) -> np.ndarray:
        return poses_n[rows] if poses_n is not None else norm.normalise(source.pose[rows])

    p_all, p_each, p_seq = (tuple(dropout) + (0.0, 0.0, 0.0))[:3]
    preds, logits, targets, tcont, rp, rd, tp, td, rows_out = ([] for _ in range(9))
    if carry is None:
        b = len(starts)
        ctx_rows = starts[:, None] + np.arange(context)[None]
        pose_n = norm.normalise(source.pose[ctx_rows])
        cands = teacher_forced_candidates(retriever, source, ctx_rows, exclude, rng) if uses else None
        seq_keep = np.ones(b, bool) if rng is None or p_seq <= 0 else rng.random(b) >= p_seq
        ctx_mask = None if seq_keep.all() else t_(np.broadcast_to(seq_keep[:, None, None], ctx_rows.shape + (retriever.k,)).copy())
        out, state = model(t_(source.trajectory[ctx_rows]), t_(pose_n), None if cands is None else t_(cands),
                           None if cands is None else ctx_mask)
        prev = project(out["pose"][:, -1], t_(pose_n[:, -1]))
        last = ctx_rows[:, -1]
        mover = RootMover(source, planted)
        mover.start(source.pose[last], source.root_positions[last], source.root_directions[last])
        start_pos, start_dir, start_toes = source.root_positions[last], source.root_directions[last], mover.toes.copy()
        if steer is not None:
            steer.start(start_pos, start_dir)
        root_pos, root_dir = mover(start_pos, start_dir, norm.denormalise(prev.detach().cpu().numpy()))
        pick = None if own is None or steer is not None else own.pick(b, retriever.k)
        stream = CandidateStream(retriever, exclude, rng, own=pick) if uses else None
        # The context's last output is the first predicted frame (row last + 1), as for the
        # playback baselines: every rollout and baseline is scored on rows last+1 .. last+horizon.
        row0, steps, frames = last + 1, horizon - 1, 0
        preds.append(prev)
        logits.append(out["contact_logits"][:, -1])
        targets.append(target(row0))
        tcont.append(source.contacts[row0].astype(np.float32))
        rp.append(root_pos)
        rd.append(root_dir)
        tp.append(source.root_positions[row0])
        td.append(source.root_directions[row0])
        rows_out.append(row0)
    else:
        state, prev, mover, stream, exclude, seq_keep = (carry.state, carry.prev, carry.mover, carry.stream,
                                                          carry.exclude, carry.seq_keep)
        b, root_pos, root_dir = len(carry.row), carry.root_pos, carry.root_dir
        start_pos, start_dir = root_pos, root_dir
        if steer is not None:
            steer.continue_path()
        start_toes = None if mover.toes is None else mover.toes.copy()
        row0, steps, frames = carry.row, horizon, carry.frames
    # a steered rollout's rows stop at its clip's end (only the context reads them)
    last_row = None if steer is None else source.ranges[source.clip_of(row0), 1] - 2
    for h in range(steps):
        rows = row0 + h if last_row is None else np.minimum(row0 + h, last_row)
        if rng is not None and student < 1.0:
            use_gt = torch.as_tensor(rng.random(b) >= student, device=device)[:, None]
            prev = torch.where(use_gt, t_(retriever.poses_n[rows]), prev)
        if detach_every and h % detach_every == 0 and h:
            prev = prev.detach()
            state = state.detach()
        raw_prev = norm.denormalise(prev.detach().cpu().numpy())
        ctrl = control_at(source, rows, root_pos, root_dir) if steer is None else steer(root_pos, root_dir)
        cand = mask = None
        if uses:
            _, cand = stream(frames + h, raw_prev, ctrl, rows)
            mask = t_(_dropout_mask(b, retriever.k, rng, p_all, p_each) & seq_keep[:, None])
            cand = t_(cand)
        o, state = model.step(state, t_(ctrl), prev, cand, mask)
        prev = project(o["pose"], prev)
        preds.append(prev)
        logits.append(o["contact_logits"])
        targets.append(target(rows + 1))
        tcont.append(source.contacts[rows + 1].astype(np.float32))
        drawn = norm.denormalise(prev.detach().cpu().numpy())
        root_pos, root_dir = mover(root_pos, root_dir, drawn)
        if adjust:
            sim = steer.springs.sim
            root_pos, root_dir = adjust_roots(root_pos, root_dir, sim.position, sim.direction, 1.0 / source.fps)
            mover.start(drawn, root_pos, root_dir)   # the toes as now drawn, as the runtime restarts them
        rp.append(root_pos)
        rd.append(root_dir)
        tp.append(source.root_positions[rows + 1])
        td.append(source.root_directions[rows + 1])
        rows_out.append(rows + 1)
    after = Carry(state.detach(), prev.detach(), rows_out[-1], root_pos, root_dir, mover, stream,
                  frames + steps, exclude, seq_keep, steer)
    return Rollout(torch.stack(preds, 1), torch.stack(logits, 1), t_(np.stack(targets, 1)), t_(np.stack(tcont, 1)),
                   np.stack(rp, 1), np.stack(rd, 1), np.stack(tp, 1), np.stack(td, 1), np.stack(rows_out, 1),
                   start_pos, start_dir, start_toes, after)


def playback_rollout(retriever: Retriever, source: Database, starts: np.ndarray, context: int, horizon: int,
                     every: int, exclude: np.ndarray | None = None, planted: float | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Database playback driven like :func:`rollout` (the nearest-candidate and
    motion-matching baselines): every ``every`` frames search from the *played* pose and
    the joystick relative to the played root, then play the best row's successors.
    ``planted``: as for :func:`rollout`. Returns raw poses (B, H, P), root positions and
    directions (B, H, 3)."""
    db = retriever.db
    last = starts + context - 1
    pose = source.pose[last]
    root_pos, root_dir = source.root_positions[last].copy(), source.root_directions[last].copy()
    mover = RootMover(db, planted)
    mover.start(pose, root_pos, root_dir)
    played = since = None
    poses, rps, rds = [], [], []
    for h in range(horizon):
        rows = last + h
        if played is None or h % every == 0:
            idx, _ = db.search(query(retriever, pose, control_at(source, rows, root_pos, root_dir)), 1,
                               Exclusion(clip_end=1, clips=exclude))
            played, since = idx[:, 0], 0
        since += 1
        pose = db.pose[db.successor(played, since)]
        root_pos, root_dir = mover(root_pos, root_dir, pose)
        poses.append(pose)
        rps.append(root_pos)
        rds.append(root_dir)
    return np.stack(poses, 1), np.stack(rps, 1), np.stack(rds, 1)
