"""Retargeting: one skeleton's motion on another skeleton or character
(:func:`retarget`); body roles found from joint names (:func:`find_roles`)."""
from kinema.motion.roles import find_roles
from kinema.retargeting.retarget import Retargeter, Rig, as_rig, fit, leg_length, retarget

__all__ = ["Retargeter", "Rig", "as_rig", "find_roles", "fit", "leg_length", "retarget"]
