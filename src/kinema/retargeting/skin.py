"""The skinned character drawn for a controller's skeleton, pose by pose.

:func:`character_skin` picks it: the dataset's own (the LaFAN1 character of the shared
data for a LaFAN1 skeleton, joints matched by name), else the bundled Geno (or a given
character file), retargeted pose by pose (:class:`~kinema.retargeting.Retargeter`); None,
with a :class:`~kinema.data.DataFallbackWarning` saying so, only for a skeleton that is no
humanoid (a caller then draws a procedural body). :class:`Skin` turns the controller's
world poses (rotations (J, 4) w,x,y,z, positions (J, 3) metres) into the character's,
mirrored clips included.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

import kinema.io
from kinema.data import DataFallbackWarning, data_relative, sample_path, shared_path
from kinema.errors import SkeletonError
from kinema.maths import quat
from kinema.motion import Skeleton, kinematics
from kinema.motion.roles import find_roles
from kinema.retargeting.binding import character_pose_world
from kinema.retargeting.retarget import Retargeter

# roles whose joints lie inside the body's mesh (not the thin hands and feet): the joints a
# test looks for on the rendered figure
BODY_ROLES = ("hips", "spine", "chest", "neck", "left_upper_leg", "right_upper_leg", "left_lower_leg",
              "right_lower_leg", "left_upper_arm", "right_upper_arm")


def skinned_character(joint_names, path: Path | None = None):
    """The LaFAN1 character (``characters/lafan1_character/character.bin`` in the shared
    data folder, or ``path``) when it exists and every joint of it but the ``Simulation``
    root is in ``joint_names`` (a LaFAN1 skeleton); else None."""

    if path is None:
        path = shared_path("characters", "lafan1_character", "character.bin")
    if path is None:
        return None
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no character file {path}")
    character = kinema.io.load_character(path)
    names = set(joint_names)
    if not character.has_mesh or any(n not in names for n in character.skeleton.names if n != "Simulation"):
        return None
    return character


def _pose_by_name(character, joint_names, rotations: np.ndarray, positions: np.ndarray):
    """World pose (rotations (J', 4), positions (J', 3)) of ``character`` from a world pose of
    the joints ``joint_names`` (joints matched by name; the rest keep their bind transform)."""

    rot, pos = character_pose_world(character, list(joint_names), rotations[None], positions[None])
    return rot[0], pos[0]


class Skin:
    """The skinned character drawn for the controller's skeleton: joints matched by name
    (the LaFAN1 character on a LaFAN1 skeleton) or through a
    :class:`~kinema.retargeting.Retargeter` (the bundled Geno on any other humanoid).

    Attributes: character, joint_names (the controller's), retargeter (or None), lift (m
    added to the retargeted pose's height so its planted feet stand on the floor), name,
    hips and body (the character's joint indices of the hips and of :data:`BODY_ROLES`).
    The retargeted hips stay above the controller's.
    """

    def __init__(self, character, joint_names, retargeter=None, lift: float = 0.0,
                 source_twins: np.ndarray | None = None) -> None:
        self.character, self.joint_names = character, list(joint_names)
        self.retargeter, self.lift = retargeter, float(lift)
        self.name = character.name
        roles = find_roles(character.skeleton)
        self.hips = roles["hips"]
        self.body = [roles[r] for r in BODY_ROLES if r in roles]
        self.source_twins = source_twins
        self.twins = character.skeleton.mirror_map()
        # C_j = M B_twin^-1 M B_j (B: bind world rotations, M: the x mirror): the mirror image
        # of a skinned pose, as rotations of the character's own joint frames
        bind_rot, bind_pos = kinematics.forward(character.bind_rotations.astype(np.float64),
                                                character.bind_positions.astype(np.float64),
                                                character.skeleton.parents)
        self.mirror_fix = quat.mul(quat.inv(bind_rot[self.twins]) * _MIRROR_Q, bind_rot)
        # per driven joint: its driven children and their bind bones in the joint's frame
        driven = set(self.joint_names)
        names, parents = character.skeleton.names, character.skeleton.parents
        self.bones: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for j, name in enumerate(names):
            kids = [c for c in range(len(names)) if parents[c] == j and names[c] in driven
                    and np.linalg.norm(bind_pos[c] - bind_pos[j]) > 1e-3]
            if name in driven and kids:
                self.bones[j] = (np.array(kids), quat.rotate(quat.inv(bind_rot[j]), bind_pos[kids] - bind_pos[j]))

    def bone_error(self, rotations: np.ndarray, positions: np.ndarray) -> float:
        """Largest angle (degrees) between a driven bone as the character's world pose
        (rotations (J', 4), positions (J', 3)) skins it and as its joints place it: near 0
        for a pose in the character's joint frames, large where the mesh tears."""
        worst = 0.0
        for j, (kids, local) in self.bones.items():
            skinned, placed = quat.rotate(rotations[j], local), positions[kids] - positions[j]
            cos = (skinned * placed).sum(-1) / np.maximum(np.linalg.norm(skinned, axis=-1)
                                                          * np.linalg.norm(placed, axis=-1), 1e-12)
            worst = max(worst, float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))).max()))
        return worst

    def fit_bones(self, rotations: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """World rotations (J', 4) turned, joint by joint, the least that makes every driven
        bone skin where its joints are (one child: the shortest arc; several: the best-fit
        rotation of all), so a pose between joint-frame conventions (an inertialized switch
        between a clip and a mirrored one) does not tear the mesh."""
        out = np.asarray(rotations, np.float64).copy()
        for j, (kids, local) in self.bones.items():
            skinned = quat.rotate(out[j], local)
            placed = np.asarray(positions, np.float64)[kids] - positions[j]
            if len(kids) == 1:
                q = quat.between(skinned[0], placed[0])
            else:       # Kabsch: the rotation taking the skinned bones onto the placed ones
                u, _, vt = np.linalg.svd(skinned.T @ placed)
                d = np.sign(np.linalg.det(vt.T @ u.T))
                q = quat.from_matrix(vt.T @ np.diag([1.0, 1.0, d]) @ u.T)
            out[j] = quat.mul(q, out[j])
        return quat.normalize(out)

    def pose(self, rotations: np.ndarray, positions: np.ndarray, mirrored: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Character world pose (rotations (J', 4), positions (J', 3)) for a controller world
        pose (rotations (J, 4), positions (J, 3), metres).

        With ``source_twins``, a mirrored clip's pose (:meth:`kinema.motion.Motion.mirror`:
        rotations ``M R M``, right for the skeleton's positions but not for the character's
        bind frames, which skin torn) is handled: the pose is also mirrored back, skinned and
        the character's pose mirrored again (its rotations taken to its own joint frames).
        Matched by name, the one of the two whose bones skin closer to the joints is kept and
        its bones fitted to them (:meth:`fit_bones`); retargeted, the one whose limbs point as
        the controller's do (:meth:`limb_agreement`; a tie goes to the mirrored one when
        ``mirrored``, how much the pose is a mirrored clip's, 0-1, is at least 0.5)."""
        rot, pos = self._pose(rotations, positions)
        if self.source_twins is None:
            return rot, pos
        r2, p2 = self._pose(*mirror_pose(rotations, positions, self.source_twins))
        r2, p2 = mirror_pose(r2, p2, self.twins)
        r2 = quat.normalize(quat.mul(r2, self.mirror_fix))
        if self.retargeter is not None:
            # a network's pose carries no clip, and a mirrored clip's rotations retarget into
            # a folded figure: keep the one whose limbs point where the controller's do
            plain, flipped = self.limb_agreement(positions, pos), self.limb_agreement(positions, p2)
            if flipped > plain or (flipped == plain and mirrored >= 0.5):
                return r2.astype(np.float32), p2.astype(np.float32)
            return rot, pos
        if self.bone_error(r2, pos) < self.bone_error(rot, pos):
            rot = r2
        return self.fit_bones(rot, pos).astype(np.float32), np.asarray(pos, np.float32)

    def limb_agreement(self, source_positions: np.ndarray, character_positions: np.ndarray) -> float:
        """Sum over the retargeter's matched body roles of the cosine between the direction
        from the hips to that joint in the controller's pose (J, 3) and in the character's
        (J', 3): near the number of roles when the character stands as the controller does,
        far lower for a folded one."""
        src, dst = self.retargeter.source_roles, self.retargeter.target_roles
        roles = [r for r in self.retargeter.matched if r != "hips" and r in src and r in dst]
        a = np.asarray(source_positions, np.float64)
        b = np.asarray(character_positions, np.float64)
        u = a[[src[r] for r in roles]] - a[src["hips"]]
        v = b[[dst[r] for r in roles]] - b[dst["hips"]]
        cos = (u * v).sum(-1) / np.maximum(np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1), 1e-9)
        return float(cos.sum())

    def _pose(self, rotations: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.retargeter is None:
            return _pose_by_name(self.character, self.joint_names, rotations, positions)
        rot, pos = self.retargeter.world(rotations, positions)
        # the hips stay over the controller's (a live character's path is the controller's, not
        # one scaled about the world origin); only the height follows the new legs
        hips = np.asarray(positions, np.float64)[..., self.retargeter.source_roles["hips"], :]
        shift = hips * (1.0 - self.retargeter.scale)
        shift[..., 1] = self.lift
        pos += shift[..., None, :]
        return rot.astype(np.float32), pos.astype(np.float32)

    def summary(self) -> dict:
        """The metrics' description of what is drawn: ``character`` ("skinned"),
        ``character_file`` (the character's name), ``character_source`` (its file, as
        :func:`kinema.data.data_relative` writes it) and ``retargeted``."""
        source = self.character.source
        return {"character": "skinned", "character_file": self.name,
                "character_source": None if source is None else data_relative(source),
                "retargeted": self.retargeter is not None}


_MIRROR_Q = np.array([1.0, 1.0, -1.0, -1.0])     # M q M for the x mirror: y and z components negate


def mirror_pose(rotations: np.ndarray, positions: np.ndarray, twins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mirror image across x = 0 of a world pose (rotations (J, 4), positions (J, 3)):
    left and right joints swap (``twins``: each joint's twin index), rotations ``M R M``."""
    return (np.asarray(rotations, np.float64)[..., twins, :] * _MIRROR_Q,
            np.asarray(positions, np.float64)[..., twins, :] * [-1.0, 1.0, 1.0])


NO_SKIN = {"character": None, "character_file": None, "character_source": None, "retargeted": False}


def character_skin(skeleton: Skeleton, reference: tuple[np.ndarray, np.ndarray, float], path: Path | None = None,
              lafan1: bool = False) -> Skin | None:
    """What to skin for ``skeleton``: the LaFAN1 character when it fits (``path`` or the
    shared data's), else ``path``'s character or the bundled Geno, retargeted (its frames and
    foot heights measured on ``reference``: world rotations (F, J, 4), positions (F, J, 3)
    and fps of the skeleton's own poses); None (the procedural body, with a warning) for a
    skeleton that is no humanoid. ``lafan1``: the skeleton is LaFAN1's, so a missing LaFAN1
    character is a fallback worth a warning."""

    fit = skinned_character(skeleton.names, path)
    twins = skeleton.mirror_map()
    if fit is not None:
        return Skin(fit, skeleton.names, source_twins=twins)
    target = kinema.io.load_character(path if path is not None else sample_path("geno", "geno.glb"))
    if path is None and lafan1:
        warnings.warn("the LaFAN1 character (characters/lafan1_character/character.bin) is not in the shared "
                      "data folder; drawing the bundled Geno, retargeted, instead (set KINEMA_DATA or pass "
                      "kinema --data)", DataFallbackWarning, stacklevel=2)
    try:
        r = Retargeter(skeleton, target, reference)
    except SkeletonError as exc:
        warnings.warn(f"cannot retarget onto {target.name} ({exc}); drawing the procedural body instead",
                      DataFallbackWarning, stacklevel=2)
        return None
    return Skin(target, skeleton.names, r, r.floor_offset(), twins)
