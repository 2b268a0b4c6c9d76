"""A skinned character whose joints take their world transforms from a motion skeleton
with the same joints (by name) but its own joint frames, and possibly its mirror image.

Skinning multiplies each joint's world transform by its inverse bind matrix, so the world
rotation given to a character joint must be that of the *character's* joint frame. A
motion's world rotation ``R`` is that of the motion's frame; where the two frames differ
by a constant rotation ``C`` (the character's frame seen from the motion's), the character
joint's world rotation is ``R C``. :class:`WorldBinding` fits ``C`` per joint from the
two skeletons' rest offsets: the bones from a joint to its children, in the motion joint's
frame (the motion skeleton's rest pose) and in the character joint's frame (its bind
pose), are turned onto each other (the best-fit rotation of all children, the shortest
arc for one; a joint without matched children inherits its parent's ``C``).

A character can also be the mirror image of its motion skeleton: the MANN dog's GLB (from
AI4AnimationPy) has every local offset of the BVH with x negated, so its ``Left`` joints lie
on the dog's right and no rotation of any joint frame turns the hips' children (legs,
tail) onto the BVH's; each joint's mesh skinned without the fix is turned 180 degrees off
its bones. A binding fits both the character and its mirror image
(:func:`mirror_character`) and keeps the one whose bones fit.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kinema.errors import KinemaError
from kinema.io.character import Character
from kinema.maths import quat
from kinema.maths.backend import unit
from kinema.motion import Skeleton, kinematics

_MIRROR = np.diag([-1.0, 1.0, 1.0, 1.0])          # the x = 0 reflection, homogeneous
_MIRROR_Q = np.array([1.0, 1.0, -1.0, -1.0])      # M q M for it: y and z components negate
MIN_BONE = 1e-3                                   # metres: shorter child offsets define no direction


def mirror_character(character: Character) -> Character:
    """The mirror image of ``character`` across x = 0, joint names kept: vertices and
    normals with x negated, triangles wound the other way, local bind translations ``M t``
    and rotations ``M q M``, inverse bind matrices ``M B^-1 M`` (M: the reflection), so the
    joint frames stay proper rotations and skin the mirrored mesh."""
    meshes = [replace(m, positions=(np.asarray(m.positions) * [-1, 1, 1]).astype(np.float32),
                      normals=(np.asarray(m.normals) * [-1, 1, 1]).astype(np.float32),
                      indices=np.asarray(m.indices)[:, ::-1].copy()) for m in character.meshes]
    sk = character.skeleton
    skeleton = Skeleton(list(sk.names), np.asarray(sk.parents), np.asarray(sk.offsets) * [-1, 1, 1])
    return replace(character, skeleton=skeleton, meshes=meshes,
                   bind_positions=(np.asarray(character.bind_positions, np.float64) * [-1, 1, 1]).astype(np.float32),
                   bind_rotations=(np.asarray(character.bind_rotations, np.float64) * _MIRROR_Q).astype(np.float32),
                   inverse_bind=(_MIRROR @ np.asarray(character.inverse_bind, np.float64) @ _MIRROR).astype(np.float32))


def _best_rotation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Quaternion (4,) turning unit directions ``a`` (N, 3) onto ``b`` (N, 3): the shortest
    arc for one, the least-squares rotation (Kabsch) for several."""
    if len(a) == 1:
        return quat.between(a[0], b[0])
    u, _, vt = np.linalg.svd(a.T @ b)
    d = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
    return quat.from_matrix(vt.T @ np.diag([1.0, 1.0, d]) @ u.T)


class WorldBinding:
    """How ``character``'s joints follow world poses of ``skeleton`` (joints matched by name).

    Attributes:
        character: the character to draw (the given one, or its mirror image when that is
            the one whose bones fit the skeleton's).
        mirrored: whether it is the mirror image.
        source: (J',) per character joint, the skeleton's joint index, -1 for joints the
            skeleton lacks (end sites: they follow their parent with their bind transform).
        corrections: (J', 4) per character joint, its frame in the motion joint's frame (C).
        residual_deg: the largest angle between a matched bone as the corrections turn it and
            as the skeleton has it (0 for skeletons with the same bones).
    """

    def __init__(self, character: Character, skeleton: Skeleton) -> None:
        index = {n: i for i, n in enumerate(skeleton.names)}
        self.source = np.array([index.get(n, -1) for n in character.skeleton.names])
        if not (self.source >= 0).any():
            raise KinemaError(f"skeleton shares no joint names with character {character.name!r}")
        # the motion skeleton's rest pose: every joint frame aligned with the world
        rest = np.zeros((skeleton.num_joints, 4))
        rest[:, 0] = 1.0
        _, self._rest = kinematics.forward(rest, np.asarray(skeleton.offsets, np.float64), skeleton.parents)
        candidates = (character, mirror_character(character))
        fits = [self._fit(c) for c in candidates]
        k = int(np.argmin([f[1] for f in fits]))
        self.character, self.mirrored = candidates[k], k == 1
        self.corrections, self.residual_deg = fits[k]

    def _fit(self, character: Character) -> tuple[np.ndarray, float]:
        """(corrections (J', 4), residual degrees) of ``character``'s joint frames."""
        parents = np.asarray(character.skeleton.parents)
        local = np.asarray(character.bind_positions, np.float64)
        out = np.zeros((len(parents), 4))
        worst = 0.0
        for j in range(len(parents)):
            kids = [c for c in np.nonzero(parents == j)[0]
                    if self.source[c] >= 0 and self.source[j] >= 0 and np.linalg.norm(local[c]) > MIN_BONE
                    and np.linalg.norm(self._rest[self.source[c]] - self._rest[self.source[j]]) > MIN_BONE]
            if not kids:
                out[j] = out[parents[j]] if parents[j] >= 0 else [1.0, 0.0, 0.0, 0.0]
                continue
            a = unit(local[kids])                                         # character frame
            b = unit(self._rest[self.source[kids]] - self._rest[self.source[j]])   # motion frame
            out[j] = _best_rotation(a, b)
            cos = np.clip((quat.rotate(out[j], a) * b).sum(-1), -1.0, 1.0)
            worst = max(worst, float(np.degrees(np.arccos(cos)).max()))
        return quat.normalize(out), worst

    def pose(self, rotations: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World pose of :attr:`character` (rotations (..., J', 4), positions (..., J', 3),
        float32) for a world pose of the skeleton (rotations (..., J, 4) w,x,y,z, positions
        (..., J, 3) metres): a matched joint at its motion joint, turned by its correction."""
        g_rot, g_pos = np.asarray(rotations, np.float64), np.asarray(positions, np.float64)
        lead = g_rot.shape[:-2]
        ch = self.character
        n = len(self.source)
        rot, pos = np.zeros(lead + (n, 4)), np.zeros(lead + (n, 3))
        parents = np.asarray(ch.skeleton.parents)
        for j in range(n):
            s, p = self.source[j], parents[j]
            if s >= 0:
                rot[..., j, :] = quat.mul(g_rot[..., s, :], self.corrections[j])
                pos[..., j, :] = g_pos[..., s, :]
            elif p < 0:
                rot[..., j, :], pos[..., j, :] = ch.bind_rotations[j], ch.bind_positions[j]
            else:
                rot[..., j, :] = quat.mul(rot[..., p, :], ch.bind_rotations[j].astype(np.float64))
                pos[..., j, :] = pos[..., p, :] + quat.rotate(rot[..., p, :], ch.bind_positions[j].astype(np.float64))
        return quat.normalize(rot).astype(np.float32), pos.astype(np.float32)

    def bone_errors(self, rotations: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """(B,) degrees between each matched bone of a character world pose (rotations
        (J', 4), positions (J', 3)) as skinning turns it (the joint's world rotation times its
        bind offset to the child) and as the joints place it (joint to child)."""
        parents = np.asarray(self.character.skeleton.parents)
        local = np.asarray(self.character.bind_positions, np.float64)
        kids = [c for c in range(len(parents)) if parents[c] >= 0 and self.source[c] >= 0
                and self.source[parents[c]] >= 0 and np.linalg.norm(local[c]) > MIN_BONE]
        rot, pos = np.asarray(rotations, np.float64), np.asarray(positions, np.float64)
        skinned = quat.rotate(rot[parents[kids]], local[kids])
        placed = pos[kids] - pos[parents[kids]]
        cos = (unit(skinned) * unit(placed)).sum(-1)
        return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def character_pose(character, motion) -> tuple[np.ndarray, np.ndarray]:
    """World pose of ``character``'s joints driven by ``motion`` (joints matched by name;
    the character's other joints keep their bind local transform).

    Returns:
        (rotations (F, J, 4), positions (F, J, 3)) float32 for the character's joints.
    """
    names = character.skeleton.names
    index = {n: i for i, n in enumerate(motion.skeleton.names)}
    src = np.array([index.get(n, -1) for n in names])
    if not (src >= 0).any():
        raise KinemaError(f"motion {motion.name!r} shares no joint names with character {character.name!r}")
    f = motion.num_frames
    rot = np.broadcast_to(character.bind_rotations.astype(np.float32), (f, len(names), 4)).copy()
    pos = np.broadcast_to(character.bind_positions.astype(np.float32), (f, len(names), 3)).copy()
    have = src >= 0
    rot[:, have] = motion.rotations[:, src[have]]
    pos[:, have] = motion.positions[:, src[have]]
    g_rot, g_pos = kinematics.forward(rot, pos, character.skeleton.parents)
    return np.asarray(g_rot, np.float32), np.asarray(g_pos, np.float32)


def character_pose_world(character, names, g_rot: np.ndarray, g_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World pose of ``character`` taking each joint's *world* transform from a pose with joint
    ``names`` (rotations (F, J, 4), positions (F, J, 3)); joints the pose lacks (end sites)
    follow their parent with their bind local transform.

    Right only where the character's joint frames are the motion's (the LaFAN1 character
    and its BVHs); :class:`WorldBinding` also fits frames that differ and
    a character that is its skeleton's mirror image (the AI4AnimationPy dog and the MANN BVH)."""
    index = {n: i for i, n in enumerate(names)}
    g_rot, g_pos = np.asarray(g_rot, np.float64), np.asarray(g_pos, np.float64)
    f, parents = g_rot.shape[0], np.asarray(character.skeleton.parents)
    jn = character.skeleton.num_joints
    rot, pos = np.zeros((f, jn, 4)), np.zeros((f, jn, 3))
    if not any(n in index for n in character.skeleton.names):
        raise KinemaError(f"pose shares no joint names with character {character.name!r}")
    for j, name in enumerate(character.skeleton.names):
        if name in index:
            rot[:, j], pos[:, j] = g_rot[:, index[name]], g_pos[:, index[name]]
        else:
            p = parents[j]
            lr = np.broadcast_to(character.bind_rotations[j].astype(np.float64), (f, 4))
            lp = np.broadcast_to(character.bind_positions[j].astype(np.float64), (f, 3))
            if p < 0:
                rot[:, j], pos[:, j] = lr, lp
            else:
                rot[:, j] = quat.mul(rot[:, p], lr)
                pos[:, j] = pos[:, p] + quat.rotate(rot[:, p], lp)
    return rot.astype(np.float32), pos.astype(np.float32)
