"""Retargeting: one skeleton's motion on another skeleton or character
(:func:`retarget`); body roles found from joint names (:func:`find_roles`); a character
skinned to world poses of a skeleton with the same joints but other joint frames, or its
mirror image (:class:`WorldBinding`)."""
from kinema.motion.roles import find_roles
from kinema.retargeting.binding import WorldBinding, mirror_character
from kinema.retargeting.retarget import Retargeter, Rig, as_rig, fit, leg_length, retarget

__all__ = ["Retargeter", "Rig", "WorldBinding", "as_rig", "find_roles", "fit", "leg_length", "mirror_character",
           "retarget"]
