"""Inverse kinematics: FABRIK chains and trees (:mod:`kinema.ik.fabrik`), whole-pose
solving with joint rotations (:mod:`kinema.ik.pose`) and contact-driven foot locking
(:mod:`kinema.ik.foot_lock`)."""
from kinema.ik.fabrik import FabrikResult, fabrik, path, solve
from kinema.ik.foot_lock import FootLockResult, foot_lock, lock_targets
from kinema.ik.pose import PoseResult, solve_pose

__all__ = ["FabrikResult", "fabrik", "path", "solve", "PoseResult", "solve_pose",
           "FootLockResult", "foot_lock", "lock_targets"]
