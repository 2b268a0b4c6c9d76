"""Sticks as a rollout's joystick: training rollouts driven as a user drives the controller.

A truth-driven rollout (:func:`kinema.control.retrieval.rollout.rollout`) asks the model to
follow the clip's own future root path, a path the actor's legs really walked. A user's
stick asks for other paths, and there the LaFAN1 models glide: the root follows the stick
while the legs barely step (the scenarios' stride ratio, ``benchmarks/results/
controller_protocol.md``). A :class:`StickSteer` gives a rollout its joystick from wandering
sticks instead (:func:`~kinema.control.retrieval.scenarios.crowd_sticks`: a heading that
drifts, a push that swells and fades, a 1.5-s stop in every 8 s, walking or running; or,
for an ``idle`` rollout, a stick that stays released, as a user who lets go of it),
through the runtime's own trajectory springs
(:class:`~kinema.control.trajectory.TrajectoryController`): every frame the springs
advance and their prediction relative to the rollout's own root is the joystick, as
:meth:`~kinema.control.retrieval.controller.RetrievalCrowd.drive` makes it. No truth
exists for such a rollout; its losses are self-supervised (``stick_terms`` in
:mod:`kinema.control.retrieval.training`). The evaluation's scripted scenarios are
other sticks, never trained on.
"""
from __future__ import annotations

import numpy as np

from kinema.control.retrieval.scenarios import crowd_sticks
from kinema.control.trajectory import ControlConfig, TrajectoryController
from kinema.maths import angles


class StickSteer:
    """Joysticks (B, 12) for B rollouts from wandering sticks (see the module docstring).

    Args:
        seeds: (B, 4) in [0, 1), each rollout's stick script (:func:`crowd_sticks`).
        walk: (B,) bool, walking speeds (else running) of the springs.
        fps: frames per second of the rollout (the springs advance 1 / fps per call).
        config: the springs' speeds and halflives (None: the runtime's defaults).
        idle: (B,) bool, rollouts whose stick stays released (None: none).

    :meth:`start` puts the springs at rest at the rollouts' roots; each call advances them
    one frame and returns the joystick relative to the given roots. :meth:`path` is the
    requested path of the frames of the current rollout: the springs' simulated root at the
    start and after each call, or, after :meth:`continue_path` (a rollout that continues the
    last one, whose first frame is already a call's), after each call since.
    """

    def __init__(self, seeds: np.ndarray, walk: np.ndarray, fps: float, config: ControlConfig | None = None,
                 idle: np.ndarray | None = None):
        self.seeds = np.asarray(seeds, np.float64)
        self.walk = np.asarray(walk, bool)
        self.held = np.ones(len(self.seeds)) if idle is None else (~np.asarray(idle, bool)).astype(np.float64)
        self.dt = 1.0 / float(fps)
        self.config = config
        self.springs: TrajectoryController | None = None

    @classmethod
    def random(cls, count: int, rng: np.random.Generator, fps: float, walk_share: float = 0.5,
               idle_share: float = 0.0) -> StickSteer:
        """``count`` rollouts with random stick scripts, ``walk_share`` of them walking and
        ``idle_share`` of them idle (drawn only when above 0, so the draws without idle
        rollouts are the same as before there were any)."""
        seeds, walk = rng.random((count, 4)), rng.random(count) < walk_share
        return cls(seeds, walk, fps, idle=rng.random(count) < idle_share if idle_share > 0 else None)

    def start(self, root_pos: np.ndarray, root_dir: np.ndarray) -> None:
        """Springs at rest at roots (B, 3) facing (B, 3); time 0 of the sticks."""
        b = len(self.seeds)
        self.springs = TrajectoryController(self.config, np.asarray(root_pos, np.float64),
                                            angles.yaw(np.asarray(root_dir, np.float64)), batch=b)
        self.frames = 0
        sim = self.springs.sim
        self._pos, self._dir = [sim.position.copy()], [sim.direction.copy()]

    def __call__(self, root_pos: np.ndarray, root_dir: np.ndarray) -> np.ndarray:
        """Advance one frame; the joystick (B, 12) float32 relative to roots (B, 3), (B, 3)."""
        if self.springs is None:
            raise RuntimeError("StickSteer.start must place the springs before the first frame")
        stick = crowd_sticks(self.frames * self.dt, self.seeds) * self.held[:, None]
        sim = self.springs.update(stick, self.dt, walk=self.walk)
        self.frames += 1
        self._pos.append(sim.position.copy())
        self._dir.append(sim.direction.copy())
        return self.springs.predict().features(root_pos, root_dir).astype(np.float32)

    def continue_path(self) -> None:
        """Start a new :meth:`path` for a continued rollout: the springs and the sticks'
        clock run on, the path holds only the calls made from now on."""
        self._pos, self._dir = [], []

    def path(self) -> tuple[np.ndarray, np.ndarray]:
        """The requested roots of the current rollout's frames: positions and facings
        (B, frames, 3), metres."""
        return np.stack(self._pos, 1), np.stack(self._dir, 1)
