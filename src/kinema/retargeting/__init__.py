"""Retargeting: one skeleton's motion on another skeleton or character
(:func:`retarget`); body roles found from joint names (:func:`find_roles`); a character
skinned to world poses of a skeleton with the same joints but other joint frames, or its
mirror image (:class:`WorldBinding`); a character posed by joint names from a motion's local
transforms or a pose's world transforms (:func:`character_pose`, :func:`character_pose_world`);
the skinned character drawn for a controller's skeleton, live (:class:`Skin`,
:func:`character_skin`)."""
from kinema.motion.roles import find_roles
from kinema.retargeting.binding import WorldBinding, character_pose, character_pose_world, mirror_character
from kinema.retargeting.retarget import Retargeter, Rig, as_rig, fit, leg_length, retarget
from kinema.retargeting.skin import Skin, character_skin

__all__ = ["Retargeter", "Rig", "Skin", "WorldBinding", "as_rig", "character_pose", "character_pose_world",
           "character_skin", "find_roles", "fit", "leg_length", "mirror_character", "retarget"]
