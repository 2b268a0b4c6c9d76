"""Skeletons and motions: forward/inverse kinematics, resampling, mirroring, slicing."""
from kinema.motion.skeleton import Skeleton
from kinema.motion.motion import Motion, concatenate

__all__ = ["Skeleton", "Motion", "concatenate"]
