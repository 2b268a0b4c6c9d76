"""Sticks as a rollout's joystick: training rollouts driven as a user drives the controller.

A truth-driven rollout (:func:`kinema.control.retrieval.rollout.rollout`) asks the model to
follow the clip's own future root path, a path the actor's legs really walked. A user's
stick asks for other paths, and there the LaFAN1 models glide: the root follows the stick
while the legs barely step (the scenarios' stride ratio, ``benchmarks/results/
controller_protocol.md``). A :class:`StickSteer` gives a rollout its joystick from wandering
sticks instead (:func:`~kinema.control.retrieval.scenarios.crowd_sticks`: a heading that
drifts, a push that swells and fades, a 1.5-s stop in every 8 s, walking or running; a
rollout may let go of the stick for good after its ``release`` time, as a user who stops
driving: at once (idle from rest) or after a walk or a run; a rollout may also snap its stick
to the opposite direction every ``reverse`` seconds, as a user who runs back and forth does:
the wandering sticks turn at most 0.4 rad/s, and a network never trained on a reversal folds at
the waist in one),
through the runtime's own trajectory springs
(:class:`~kinema.control.trajectory.TrajectoryController`): every frame the springs
advance and their prediction relative to the rollout's own root is the joystick, as
:meth:`~kinema.control.retrieval.controller.RetrievalCrowd.drive` makes it. No truth
exists for such a rollout; its losses are self-supervised (``stick_terms`` in
:mod:`kinema.control.retrieval.training`). The evaluation's scripted scenarios are
other sticks, never trained on; a reversing rollout shares the kind of input of the turns
stick (a 180-degree snap), not its script (a random period, on a wandering, swelling stick,
walking or running).
"""
from __future__ import annotations

import numpy as np

from kinema.control.retrieval.scenarios import SETTLE_S, STILL_M_S, crowd_sticks
from kinema.control.trajectory import ControlConfig, TrajectoryController
from kinema.maths import angles


class StickSteer:
    """Joysticks (B, 12) for B rollouts from wandering sticks (see the module docstring).

    Args:
        seeds: (B, 4) in [0, 1), each rollout's stick script (:func:`crowd_sticks`).
        walk: (B,) bool, walking speeds (else running) of the springs.
        fps: frames per second of the rollout (the springs advance 1 / fps per call).
        config: the springs' speeds and halflives (None: the runtime's defaults).
        release: (B,) seconds after which each rollout's stick stays released (0: idle
            from the start; inf: never; None: none is released).
        reverse: (B,) seconds between each rollout's 180-degree stick reversals (inf: never;
            None: none reverses).

    :meth:`start` puts the springs at rest at the rollouts' roots; each call advances them
    one frame and returns the joystick relative to the given roots. :meth:`path` is the
    requested path of the frames of the current rollout: the springs' simulated root at the
    start and after each call, or, after :meth:`continue_path` (a rollout that continues the
    last one, whose first frame is already a call's), after each call since. :meth:`settled`
    marks the same frames where that path has stood still for SETTLE_S (as
    :func:`~kinema.control.retrieval.scenarios.settled_frames` marks a scenario's).
    """

    def __init__(self, seeds: np.ndarray, walk: np.ndarray, fps: float, config: ControlConfig | None = None,
                 release: np.ndarray | None = None, reverse: np.ndarray | None = None):
        self.seeds = np.asarray(seeds, np.float64)
        self.walk = np.asarray(walk, bool)
        self.release = np.full(len(self.seeds), np.inf) if release is None else np.asarray(release, np.float64)
        self.reverse = np.full(len(self.seeds), np.inf) if reverse is None else np.asarray(reverse, np.float64)
        self.fps = float(fps)
        self.dt = 1.0 / self.fps
        self.config = config
        self.springs: TrajectoryController | None = None

    @classmethod
    def random(cls, count: int, rng: np.random.Generator, fps: float, walk_share: float = 0.5,
               idle_share: float = 0.0, release_share: float = 0.0,
               release_after: tuple[float, float] = (0.5, 6.0), reverse_share: float = 0.0,
               reverse_every: tuple[float, float] = (1.5, 5.0)) -> StickSteer:
        """``count`` rollouts with random stick scripts, ``walk_share`` of them walking,
        ``idle_share`` of them idle from the start, ``release_share`` of the others
        letting go after a time drawn uniformly in ``release_after`` seconds and
        ``reverse_share`` of all reversing their stick every period drawn uniformly in
        ``reverse_every`` seconds (each share is drawn only when above 0, so the draws without
        it are the same as before it existed)."""
        seeds, walk = rng.random((count, 4)), rng.random(count) < walk_share
        release = np.full(count, np.inf)
        if idle_share > 0:
            release[rng.random(count) < idle_share] = 0.0
        if release_share > 0:
            let_go, when = rng.random(count) < release_share, rng.uniform(*release_after, count)
            release = np.where(let_go & (release > 0), when, release)
        reverse = np.full(count, np.inf)
        if reverse_share > 0:
            flip, every = rng.random(count) < reverse_share, rng.uniform(*reverse_every, count)
            reverse = np.where(flip, every, reverse)
        return cls(seeds, walk, fps, release=release, reverse=reverse)

    def start(self, root_pos: np.ndarray, root_dir: np.ndarray) -> None:
        """Springs at rest at roots (B, 3) facing (B, 3); time 0 of the sticks."""
        b = len(self.seeds)
        self.springs = TrajectoryController(self.config, np.asarray(root_pos, np.float64),
                                            angles.yaw(np.asarray(root_dir, np.float64)), batch=b)
        self.frames = 0
        self._still = np.zeros(b, np.int64)   # frames the requested path has stood still, in a row
        sim = self.springs.sim
        self._pos, self._dir, self._settled = [sim.position.copy()], [sim.direction.copy()], [self._still > 0]

    def __call__(self, root_pos: np.ndarray, root_dir: np.ndarray) -> np.ndarray:
        """Advance one frame; the joystick (B, 12) float32 relative to roots (B, 3), (B, 3)."""
        if self.springs is None:
            raise RuntimeError("StickSteer.start must place the springs before the first frame")
        t = self.frames * self.dt
        flipped = np.floor(t / self.reverse) % 2 == 1                    # inf periods never flip
        stick = crowd_sticks(t, self.seeds) * (np.where(flipped, -1.0, 1.0) * (t < self.release))[:, None]
        before = self.springs.sim.position.copy()
        sim = self.springs.update(stick, self.dt, walk=self.walk)
        self.frames += 1
        speed = np.linalg.norm((sim.position - before)[:, [0, 2]], axis=-1) * self.fps
        self._still = np.where(speed < STILL_M_S, self._still + 1, 0)
        self._pos.append(sim.position.copy())
        self._dir.append(sim.direction.copy())
        self._settled.append(self._still >= SETTLE_S * self.fps)
        return self.springs.predict().features(root_pos, root_dir).astype(np.float32)

    def continue_path(self) -> None:
        """Start a new :meth:`path` for a continued rollout: the springs and the sticks'
        clock run on, the path holds only the calls made from now on."""
        self._pos, self._dir, self._settled = [], [], []

    def path(self) -> tuple[np.ndarray, np.ndarray]:
        """The requested roots of the current rollout's frames: positions and facings
        (B, frames, 3), metres."""
        return np.stack(self._pos, 1), np.stack(self._dir, 1)

    def settled(self) -> np.ndarray:
        """(B, frames) bool: the frames of :meth:`path` at which the requested path has moved
        slower than STILL_M_S for at least SETTLE_S (the stick asks the character to stand)."""
        return np.stack(self._settled, 1)
