"""Skeletons and motions: forward/inverse kinematics, resampling, mirroring, slicing."""
from kinema.motion.motion import Motion, concatenate
from kinema.motion.skeleton import Skeleton

__all__ = ["Skeleton", "Motion", "concatenate"]
