"""Body roles of a humanoid skeleton, found from joint names.

A role is an anatomical place (``hips``, ``left_upper_leg``, ``chest``...). Each role has
the names it goes by in the skeleton families kinema meets (LaFAN1, CMU, Bandai-Namco,
GAMES-105, Mixamo, Geno, 100STYLE); names are compared case-insensitively after dropping
a namespace prefix (``mixamorig:Hips`` -> ``hips``). The chest is found from the
hierarchy (the joint the clavicles hang from) and the spine as the joint between it and
the hips, so skeletons with two to four spine joints all map.
"""
from __future__ import annotations

import numpy as np

from kinema.errors import SkeletonError
from kinema.motion import Skeleton

# Centre roles: aliases in order of preference (the first one present wins).
_CENTRE = {
    "hips": ("hips", "pelvis", "rootjoint", "hip"),
    "neck": ("neck", "neck0"),
    "head": ("head", "torso_head"),
}
# Side roles, written for the left side; the right side's names are derived.
_LEFT = {
    "clavicle": ("leftshoulder", "shoulder_l", "ltorso_clavicle", "lclavicle", "l_clavicle", "clavicle_l",
                 "leftcollar", "lcollar"),
    "upper_arm": ("leftarm", "upperarm_l", "lshoulder", "lhumerus", "l_upperarm", "leftupperarm"),
    "forearm": ("leftforearm", "lowerarm_l", "lelbow", "lradius", "l_forearm", "leftlowerarm"),
    "hand": ("lefthand", "hand_l", "lwrist", "lhand", "l_hand"),
    "upper_leg": ("leftupleg", "upperleg_l", "lhip", "lfemur", "leftthigh", "l_thigh", "leftupperleg"),
    "lower_leg": ("leftleg", "lowerleg_l", "lknee", "ltibia", "leftshin", "l_calf", "leftlowerleg"),
    "foot": ("leftfoot", "foot_l", "lankle", "l_foot"),
    "toe": ("lefttoe", "lefttoebase", "toes_l", "ltoejoint", "ltoes", "l_toe", "toe_l"),
}
SIDE_ROLES = tuple(_LEFT)
REQUIRED = ("hips", "left_upper_leg", "left_lower_leg", "left_foot",
            "right_upper_leg", "right_lower_leg", "right_foot")


def _right(name: str) -> str:
    """The right-side spelling of a left-side alias."""
    if name.startswith("left"):
        return "right" + name[4:]
    if name.endswith("_l"):
        return name[:-2] + "_r"
    if name.startswith("l_"):
        return "r_" + name[2:]
    if name.startswith("l"):
        return "r" + name[1:]
    raise ValueError(name)


def aliases() -> dict[str, tuple[str, ...]]:
    """Every role (``hips``, ``left_foot``, ``right_toe``...) -> the names it goes by."""
    out = dict(_CENTRE)
    for role, names in _LEFT.items():
        out["left_" + role] = names
        out["right_" + role] = tuple(_right(n) for n in names)
    return out


def _key(name: str) -> str:
    return name.rsplit(":", 1)[-1].strip().lower()


def find_roles(skeleton: Skeleton) -> dict[str, int]:
    """Joint index of every role the skeleton has (``spine`` and ``chest`` included).

    Raises:
        SkeletonError: naming the skeleton's joints when a role needed to retarget a body
            (the hips, both legs down to the feet) is not found.
    """
    index = {}
    for i, n in enumerate(skeleton.names):
        index.setdefault(_key(n), i)
    found = {}
    for role, names in aliases().items():
        for n in names:
            if n in index:
                found[role] = index[n]
                break
    missing = [r for r in REQUIRED if r not in found]
    if missing:
        raise SkeletonError(f"cannot find the {', '.join(missing)} among the joints {skeleton.names}: "
                            "not a humanoid skeleton kinema knows (LaFAN1, CMU, Bandai, GAMES-105, Mixamo, Geno)")
    _spine_roles(skeleton, found)
    return found


def ancestors(parents: np.ndarray, j: int) -> list[int]:
    """``j`` and its ancestors, from ``j`` up to the root."""
    out = [j]
    while parents[out[-1]] >= 0:
        out.append(int(parents[out[-1]]))
    return out


def _spine_roles(skeleton: Skeleton, found: dict[str, int]) -> None:
    """Add ``chest`` (parent of the clavicles or upper arms) and ``spine`` (the child of
    the hips on the way to it) when the skeleton has them."""
    hips = found["hips"]
    top = found.get("left_clavicle", found.get("left_upper_arm"))
    if top is None:
        return
    chest = int(skeleton.parents[top])
    up = ancestors(skeleton.parents, chest)
    if hips not in up or chest == hips:
        return
    found["chest"] = chest
    path = up[:up.index(hips)]            # chest ... first joint above the hips
    if len(path) > 1:
        found["spine"] = path[-1]
    for role in ("neck", "head"):         # a "neck" that is not above the chest is another joint
        if role in found and chest not in ancestors(skeleton.parents, found[role]):
            del found[role]
