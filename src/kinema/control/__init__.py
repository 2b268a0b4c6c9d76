"""Controllers: springs, inertialization, stick -> trajectory, motion matching.

- :mod:`kinema.control.springs`: exact critically damped springs and dampers.
- :mod:`kinema.control.inertialize`: :class:`Inertializer`, :class:`PoseState`.
- :mod:`kinema.control.trajectory`: :class:`TrajectoryController`, :class:`ControlConfig`.
- :mod:`kinema.control.matching`: :class:`MotionMatchingController`, :class:`MatchingConfig`.
"""
from kinema.control.inertialize import Inertializer, PoseState
from kinema.control.matching import MatchingConfig, MotionMatchingController
from kinema.control.trajectory import ControlConfig, TrajectoryController

__all__ = ["ControlConfig", "Inertializer", "MatchingConfig", "MotionMatchingController", "PoseState",
           "TrajectoryController"]
