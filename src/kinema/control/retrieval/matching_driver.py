"""The motion-matching controller driven as the scenarios and the crowd drive a retrieval
controller, so the evaluation's scripted sticks and crowd compare every network against
motion matching as a user runs it (:class:`~kinema.control.matching.MotionMatchingController`:
its springs, searches, inertialized transitions, root pull and clamp; the pose drawn with
every bone at its rest length), not against bare playback.

:class:`MatchingDriver` gives a controller the interface of
:class:`~kinema.control.retrieval.controller.RetrievalController` (one character) and of
:class:`~kinema.control.retrieval.controller.RetrievalCrowd` (a batch) that
:func:`~kinema.control.retrieval.scenarios.run_scenario` and
:func:`~kinema.control.retrieval.scenarios.run_crowd` read: ``drive``, ``world_pose``,
``joint_positions``, ``contacts``, ``root``, ``pose``, ``reset``. The controller's own
foot lock stays off: the scenario applies the one every method gets.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kinema.control.matching import MatchingOutput, MotionMatchingController
from kinema.control.retrieval.metrics import pose_slice
from kinema.control.trajectory import Simulation
from kinema.errors import KinemaError
from kinema.features.root import yaw_rotate
from kinema.matching.database import Database


class MatchingDriver:
    """A motion-matching controller behind the retrieval controllers' runtime interface.

    Args:
        make: ``make(start_frame=, batch=)`` builds a fresh controller (every :meth:`reset`),
            e.g. ``lambda **kw: MotionMatchingController(db, search_mask=mask, **kw)``.
        db: its database.
        batch: None for one character (unbatched outputs, as
            :class:`~kinema.control.retrieval.controller.RetrievalController`), else B.
        rows: the start row(s) (int or (B,)).
    """

    def __init__(self, make: Callable[..., MotionMatchingController], db: Database, batch: int | None = None,
                 rows: int | np.ndarray = 0):
        self.make, self.db, self.batch = make, db, batch
        self.reset(rows)

    def reset(self, row: int | np.ndarray = 0) -> None:
        """A fresh controller at row(s) ``row``, its root at the origin facing +z."""
        self.ctl = self.make(start_frame=row, batch=self.batch)
        self.out: MatchingOutput | None = None

    def drive(self, sticks: np.ndarray, dt: float, walk: bool | np.ndarray = False, adjust: bool = True
              ) -> Simulation:
        """One runtime frame of ``dt`` seconds from the stick(s) (2,) or (B, 2); returns the
        springs' simulation object. Motion matching always pulls its root toward the springs
        (its :class:`~kinema.control.matching.MatchingConfig`), so ``adjust`` must stay on."""
        if not adjust:
            raise KinemaError("motion matching's root pull is part of its MatchingConfig (adjust_halflife, "
                              "clamp_distance); it cannot be driven with adjust=False")
        self.out = self.ctl.step(np.asarray(sticks, np.float64), dt, walk=walk)
        return self.ctl.trajectory.sim

    def world_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(rotations (..., J, 4), positions (..., J, 3)) of the drawn world pose, unlocked."""
        return self.out.rotations, self.out.positions

    def joint_positions(self) -> np.ndarray:
        """World joint positions (..., J, 3) of the drawn pose."""
        return self.out.positions

    @property
    def contacts(self) -> np.ndarray:
        """Toe contact labels (..., 2) of the rows playing (what the foot lock reads)."""
        return self.out.contacts

    @property
    def root(self) -> tuple[np.ndarray, np.ndarray]:
        """(root position, root direction), each (..., 3)."""
        return self.out.root_position, self.out.root_direction

    @property
    def pose(self) -> np.ndarray:
        """(P,) the playing row's pose vector with its joint positions as drawn (root space;
        one character; before the first frame the start row's): what the scenarios' stride
        ratio reads."""
        if self.out is None:
            return self.db.pose[self.ctl.frame].copy()
        v = self.db.pose[self.out.frame].copy()
        local = yaw_rotate(self.out.root_direction, self.out.positions - self.out.root_position, inverse=True)
        v[pose_slice(self.db, "joint_positions")] = local.reshape(-1)
        return v
