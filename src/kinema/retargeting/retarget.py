"""Put one skeleton's motion on another skeleton or character.

Steps (:func:`retarget`):

1. Joints are matched by body role (:mod:`kinema.motion.roles`): hips, spine, chest,
   neck, head, clavicles, arms, legs, feet, toes.
2. Every matched target joint takes the source joint's world rotation corrected by the
   constant offset between each skeleton's joint axes and the body part's anatomical frame
   (:mod:`kinema.retargeting.frames`): bones point the same way in the world whatever either
   skeleton's rest pose is (T-pose, A-pose, LaFAN1's all-along-x zero pose). Joints the
   source lacks (fingers, extra spine joints, end joints) keep the target's rest rotation
   relative to their parent.
3. Bone lengths are the target's: every joint but the hips sits at its rest offset.
4. The hips' path is scaled by the leg-length ratio (target / source, thigh plus shin), so
   strides fit the new legs and root speed scales by that ratio.
5. Feet are kept on the floor: the source's foot contacts (:func:`kinema.features.contacts`)
   say when a foot is planted; the hips move vertically (smoothly) to bring planted feet to
   the target's foot height, and a two-bone leg IK removes what is left on contact frames.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import gaussian_filter1d, maximum_filter1d

from kinema.errors import KinemaError, SkeletonError
from kinema.features.contacts import contacts
from kinema.ik.pose import solve_pose
from kinema.io.character import Character
from kinema.maths import quat
from kinema.motion import Motion, Skeleton, kinematics
from kinema.motion.roles import ancestors, find_roles
from kinema.retargeting.frames import frame_offsets

# A typical adult's thigh + shin (m): contact thresholds are given for it and scale with the legs.
_LEG = 0.8
_FOOT_ROLES = ("left_foot", "left_toe", "right_foot", "right_toe")
_MAX_REFERENCE_FRAMES = 4000


@dataclass(eq=False)
class Rig:
    """A target to retarget onto: a skeleton with a rest pose and reference poses.

    Attributes:
        skeleton: the target's joints (the output motion's skeleton).
        rest_rotations: (J, 4) local rest rotations (bind pose of a character; the first
            frame of a motion; identity for a bare skeleton).
        rest_positions: (J, 3) local rest translations, metres.
        reference_rotations, reference_positions: (F, J, 4) / (F, J, 3) world poses the
            skeleton's anatomical frames are measured in (a character's bind pose, a motion's
            frames).
        fps: frame rate of the reference poses.
        standing: True when the reference poses stand on the floor at y = 0 (a character's
            bind pose, a captured motion), so foot heights can be read from them.
    """

    skeleton: Skeleton
    rest_rotations: np.ndarray
    rest_positions: np.ndarray
    reference_rotations: np.ndarray
    reference_positions: np.ndarray
    fps: float = 30.0
    standing: bool = True


def as_rig(target) -> Rig:
    """A :class:`Rig` from a :class:`~kinema.io.character.Character` (its bind pose), a
    :class:`~kinema.motion.Motion` (its frames) or a :class:`~kinema.motion.Skeleton`
    (its zero-rotation pose, which must then be a real body pose)."""
    if isinstance(target, Rig):
        return target
    if isinstance(target, Character):
        rot = np.asarray(target.bind_rotations, np.float64)
        pos = np.asarray(target.bind_positions, np.float64)
        g_rot, g_pos = kinematics.forward(rot, pos, target.skeleton.parents)
        return Rig(target.skeleton, rot, pos, g_rot[None], g_pos[None], 30.0, True)
    if isinstance(target, Motion):
        step = max(1, target.num_frames // _MAX_REFERENCE_FRAMES)
        g_rot, g_pos = kinematics.forward(target.rotations[::step].astype(np.float64),
                                          target.positions[::step].astype(np.float64), target.parents)
        return Rig(target.skeleton, target.rotations[0].astype(np.float64), target.positions[0].astype(np.float64),
                   g_rot, g_pos, target.fps / step, True)
    if isinstance(target, Skeleton):
        rot = quat.identity((target.num_joints,))
        g_rot, g_pos = kinematics.forward(rot, target.offsets.astype(np.float64), target.parents)
        return Rig(target, rot, target.offsets.astype(np.float64), g_rot[None], g_pos[None], 30.0, False)
    raise KinemaError(f"cannot retarget onto a {type(target).__name__}: give a Character, Motion or Skeleton")


def same_axes(a: Skeleton, b: Skeleton, degrees: float = 2.0) -> bool:
    """True when ``a`` and ``b`` are one rig family: the same joint names and parents, and
    every rest offset pointing the same way in its parent's frame (lengths may differ),
    so the same body part has the same joint axes in both."""
    if not a.same_topology(b):
        return False
    la, lb = np.linalg.norm(a.offsets, axis=-1), np.linalg.norm(b.offsets, axis=-1)
    both = (la > 1e-6) & (lb > 1e-6)
    if not np.array_equal(la > 1e-6, lb > 1e-6):
        return False
    cos = np.sum(a.offsets[both] * b.offsets[both], -1) / (la[both] * lb[both])
    return bool(np.all(cos > np.cos(np.radians(degrees))))


def leg_length(skeleton: Skeleton, roles: dict[str, int]) -> float:
    """Mean length (m) of the two legs from the upper leg to the foot joint (rest offsets
    summed along the chain, so it does not depend on a pose)."""
    lengths = []
    for side in ("left", "right"):
        top, foot = roles[f"{side}_upper_leg"], roles[f"{side}_foot"]
        chain = ancestors(skeleton.parents, foot)
        if top not in chain:
            raise KinemaError(f"{skeleton.names[foot]} does not hang from {skeleton.names[top]}")
        chain = chain[:chain.index(top)]
        lengths.append(float(sum(np.linalg.norm(skeleton.offsets[j]) for j in chain)))
    return float(np.mean(lengths))


def foot_contacts(pos: np.ndarray, fps: float, joints: list[int], leg: float) -> tuple[np.ndarray, np.ndarray]:
    """Contact labels (F, K) of the foot ``joints`` and each one's height when planted (K,).

    A joint is planted when it is within 5 cm (scaled by ``leg`` / 0.8 m) of its lowest
    height in the clip (2nd percentile) and slower than 0.4 m/s (scaled alike); its planted
    height is the 10th percentile of its height over those frames (flat on the floor: the
    frames also hold heels starting to rise)."""
    s = leg / _LEG
    y = pos[:, joints, 1]
    floor = np.percentile(y, 2, axis=0)
    if pos.shape[0] < 3:
        return np.ones(y.shape, bool), y.min(axis=0)
    c = contacts(pos, fps, joints, height_threshold=floor + 0.05 * s, speed_threshold=0.4 * s)
    height = np.array([np.percentile(y[c[:, k], k], 10) if c[:, k].any() else floor[k] for k in range(len(joints))])
    return c, height


def sole_slope(pos: np.ndarray, planted: np.ndarray, ankle: int, toe: int) -> float:
    """Angle (radians) the ankle-to-toe bone dips below the horizontal when the foot is
    flat on the floor: its median over the frames where heel and toe are both planted
    (``planted`` (F, 2) bool), else over all frames. Rigs differ (a high ankle joint
    makes a steep foot bone), so feet are matched by their soles, not their bones."""
    both = planted.all(axis=1)
    frames = both if both.sum() >= 1 else np.ones(pos.shape[0], bool)
    v = pos[frames, toe] - pos[frames, ankle]
    return float(np.median(np.arcsin(np.clip(-v[:, 1] / np.maximum(np.linalg.norm(v, axis=-1), 1e-9), -1, 1))))


def _pitch(angle: float) -> np.ndarray:
    """(3, 3) rotation about the anatomical frame's third axis (the foot's left-right
    axis) taking its first axis (the foot bone) up by ``angle`` toward its second (the shin):
    the foot bone's frame becomes the sole's."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _ramp(mask: np.ndarray, frames: int) -> np.ndarray:
    """(F,) weight: 1 on ``mask`` frames, falling smoothly to 0 over ``frames`` frames
    either side."""
    if frames <= 0 or not mask.any():
        return mask.astype(np.float64)
    from scipy.ndimage import distance_transform_edt
    dist = distance_transform_edt(~mask)
    x = np.clip(1.0 - dist / (frames + 1.0), 0.0, 1.0)
    return x * x * (3 - 2 * x)


def _nearest_fill(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``values`` on ``mask`` frames, linearly interpolated (held at the ends) elsewhere."""
    if not mask.any():
        return np.zeros_like(values)
    f = np.arange(values.size)
    return np.interp(f, f[mask], values[mask])


class Retargeter:
    """The mapping of one skeleton's poses onto a target, set up once, applied to any poses
    (a whole clip, or a live character's pose every frame).

    Args:
        source: the source :class:`~kinema.motion.Skeleton`.
        target: a Character, a Motion of the target skeleton or a Skeleton (:func:`as_rig`).
        reference: (world rotations (F, J, 4), world positions (F, J, 3), fps) of source
            poses its anatomical frames and planted foot heights are measured in (a clip, a
            motion-matching database's poses); a few seconds of varied motion is plenty.

    Attributes:
        rig, source_roles, target_roles, scale (leg-length ratio), matched (roles mapped),
        family (the two skeletons are one rig family), foot_roles, source_feet (labels,
        planted heights of the reference), target_height (planted heights on the target).
    """

    def __init__(self, source: Skeleton, target, reference: tuple[np.ndarray, np.ndarray, float]) -> None:
        rig = self.rig = as_rig(target)
        self.source = source
        s_rot, s_pos, fps = (np.asarray(reference[0], np.float64), np.asarray(reference[1], np.float64),
                             float(reference[2]))
        src_roles, dst_roles = self.source_roles, self.target_roles = find_roles(source), find_roles(rig.skeleton)
        self.source_leg, self.target_leg = leg_length(source, src_roles), leg_length(rig.skeleton, dst_roles)
        self.scale = self.target_leg / self.source_leg
        foot_roles = self.foot_roles = [r for r in _FOOT_ROLES if r in src_roles and r in dst_roles]
        src_feet = self.source_feet = foot_contacts(s_pos, fps, [src_roles[r] for r in foot_roles], self.source_leg)
        dst_feet = foot_contacts(rig.reference_positions, rig.fps, [dst_roles[r] for r in foot_roles],
                                 self.target_leg)
        self.target_height = dst_feet[1] if rig.standing else src_feet[1] * self.scale
        step = max(1, s_rot.shape[0] // _MAX_REFERENCE_FRAMES)
        k_src = frame_offsets(s_rot[::step], s_pos[::step], src_roles, source.parents)
        few = max(1, s_rot.shape[0] // 500)
        self._reference = (s_rot[::few], s_pos[::few], src_feet[0][::few])
        family = self.family = same_axes(source, rig.skeleton)
        if family:
            # one rig family (its joints' axes alike): one set of offsets from both skeletons' poses
            k_src = k_dst = frame_offsets(np.concatenate([s_rot[::step], rig.reference_rotations]),
                                          np.concatenate([s_pos[::step], rig.reference_positions]),
                                          src_roles, source.parents)
        else:
            k_dst = frame_offsets(rig.reference_rotations, rig.reference_positions, dst_roles, rig.skeleton.parents)
        for side in ("left", "right") if not family else ():
            key, toe = f"{side}_foot", f"{side}_toe"
            if toe in foot_roles and key in k_src and key in k_dst:
                k = [foot_roles.index(key), foot_roles.index(toe)]
                src_slope = sole_slope(s_pos, src_feet[0][:, k], src_roles[key], src_roles[toe])
                k_src[key] = k_src[key] @ _pitch(src_slope)
                dst_slope = (sole_slope(rig.reference_positions, dst_feet[0][:, k], dst_roles[key], dst_roles[toe])
                             if rig.standing else src_slope)
                k_dst[key] = k_dst[key] @ _pitch(dst_slope)
        self.matched = [r for r in dst_roles if r in src_roles and r in k_src and r in k_dst]
        if "hips" not in self.matched:
            raise KinemaError("the hips of neither skeleton have an anatomical frame (no spine or head joint)")
        # per matched role: R_target = R_source C with C = K_source K_target^T
        self._offset = {r: quat.from_matrix(k_src[r] @ k_dst[r].T) for r in self.matched}

    def world(self, rotations: np.ndarray, positions: np.ndarray,
              local_rotations: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Target world pose from source world poses.

        Args:
            rotations, positions: (..., J_source, 4) / (..., J_source, 3) source world pose(s).
            local_rotations: the source's local rotations (..., J_source, 4), used for joints
                without a role when both skeletons are one rig family.
        Returns:
            (world rotations (..., J_target, 4), world positions (..., J_target, 3)), with the
            target's bone lengths and the hips at the source's hips times :attr:`scale`.
        """
        s_rot, s_pos = np.asarray(rotations, np.float64), np.asarray(positions, np.float64)
        rig, src, dst = self.rig, self.source_roles, self.target_roles
        lead = s_rot.shape[:-2]
        parents = rig.skeleton.parents
        nj = rig.skeleton.num_joints
        world = {dst[r]: quat.mul(s_rot[..., src[r], :], self._offset[r]) for r in self.matched}
        hips = dst["hips"]
        g_rot = np.zeros(lead + (nj, 4))
        g_pos = np.zeros(lead + (nj, 3))
        for j in range(nj):
            p = parents[j]
            if j in world:
                g_rot[..., j, :] = world[j]
            elif self.family and p >= 0 and local_rotations is not None:
                # a joint without a role (LaFAN1's Spine1) moves as in the source
                g_rot[..., j, :] = quat.mul(g_rot[..., p, :], np.asarray(local_rotations[..., j, :], np.float64))
            elif p < 0:
                g_rot[..., j, :] = rig.rest_rotations[j]
            else:
                g_rot[..., j, :] = quat.mul(g_rot[..., p, :], rig.rest_rotations[j])
            if j == hips:
                g_pos[..., j, :] = s_pos[..., src["hips"], :] * self.scale
            elif p < 0:
                g_pos[..., j, :] = rig.rest_positions[j]
            else:
                g_pos[..., j, :] = g_pos[..., p, :] + quat.rotate(g_rot[..., p, :], rig.rest_positions[j])
        return quat.normalize(g_rot), g_pos

    def floor_offset(self) -> float:
        """Height (m) to add to the target's hips so that, over the reference poses, its
        planted feet stand at the target's foot height (median): for poses retargeted one
        at a time, where :func:`retarget`'s per-frame planting is not available."""
        if not self.foot_roles:
            return 0.0
        s_rot, s_pos, labels = self._reference
        y = self.world(s_rot, s_pos)[1][:, [self.target_roles[r] for r in self.foot_roles], 1]
        gap = (self.target_height[None] - y)[labels]
        return float(np.median(gap)) if gap.size else 0.0


def retarget(motion: Motion, target, *, feet: bool = True) -> Motion:
    """``motion`` played by ``target`` (a Character, a Motion of the target skeleton, or a
    Skeleton whose zero pose is a body pose).

    Args:
        motion: the source clip (any known humanoid skeleton, metres).
        target: what to put it on; its skeleton is the result's.
        feet: keep planted feet on the floor (vertical hips correction and leg IK).
    Returns:
        A Motion of the target's skeleton at the source's frame rate, with the target's
        bone lengths. ``metadata["retarget"]`` records the scale and the matched roles.
    Raises:
        SkeletonError: when either skeleton lacks the hips or a leg.
    """
    s_rot, s_pos = kinematics.forward(motion.rotations.astype(np.float64), motion.positions.astype(np.float64),
                                      motion.parents)
    r = Retargeter(motion.skeleton, target, (s_rot, s_pos, motion.fps))
    rig, parents = r.rig, r.rig.skeleton.parents
    g_rot, g_pos = r.world(s_rot, s_pos, motion.rotations)
    meta = {"scale": r.scale, "source_leg": r.source_leg, "target_leg": r.target_leg, "matched": r.matched}
    if feet:
        g_rot, g_pos, meta["feet"] = _plant_feet(motion, rig, s_pos, r.foot_roles, r.source_roles, r.target_roles,
                                                 g_rot, g_pos, r.source_feet, r.target_height, r.scale)
    rot, pos = kinematics.inverse(g_rot, g_pos, parents)
    keep = np.ones(rig.skeleton.num_joints, bool)
    keep[r.target_roles["hips"]] = False
    pos[:, keep] = rig.rest_positions[keep]
    metadata = dict(motion.metadata)
    metadata["retarget"] = meta
    return Motion(rig.skeleton, motion.fps, quat.normalize(rot), pos, motion.name, metadata)


def _plant_feet(motion, rig, s_pos, roles, src_roles, dst_roles, g_rot, g_pos, src_feet, dst_height, scale):
    """Move the hips vertically and bend the legs so planted feet stand on the floor at
    the target's foot heights ``dst_height`` (K,); ``src_feet`` is the source's (labels
    (F, K), planted heights (K,)). Returns (rotations, positions, summary dict)."""
    src_j = [src_roles[r] for r in roles]
    dst_j = [dst_roles[r] for r in roles]
    labels, src_height = src_feet
    n = motion.num_frames
    # a planted joint stands at the target's height plus the source's own lift above its
    # planted height, scaled (a heel rising before toe-off keeps rising)
    want = dst_height[None] + scale * (s_pos[:, src_j, 1] - src_height[None])
    err = np.where(labels, want - g_pos[:, dst_j, 1], 0.0)
    any_contact = labels.any(axis=1)
    shift = np.zeros(n)
    shift[any_contact] = err[any_contact].sum(1) / labels[any_contact].sum(1)
    sigma = max(1.0, 0.05 * motion.fps)
    shift = gaussian_filter1d(_nearest_fill(shift, any_contact), sigma=sigma, mode="nearest")
    parents = rig.skeleton.parents
    below = np.zeros(rig.skeleton.num_joints, bool)
    for j in range(rig.skeleton.num_joints):
        below[j] = j == dst_roles["hips"] or (parents[j] >= 0 and below[parents[j]])
    ramp_frames = max(1, int(round(0.1 * motion.fps)))
    for _ in range(4):    # lower the hips where a straightened leg could not reach a planted foot
        rot, pos = g_rot.copy(), g_pos.copy()
        pos[:, below, 1] += shift[:, None]
        too_high = _solve_legs(rot, pos, parents, roles, dst_roles, dst_j, want, labels, ramp_frames)
        if too_high.max(initial=0.0) < 1e-3:
            break
        spread = maximum_filter1d(too_high, size=2 * int(sigma) + 1)
        shift = shift - 1.2 * gaussian_filter1d(spread, sigma=sigma, mode="nearest")
    summary = {"joints": [rig.skeleton.names[j] for j in dst_j], "height": [float(h) for h in dst_height],
               "contact_share": [float(v) for v in labels.mean(axis=0)]}
    return rot, pos, summary


def _solve_legs(g_rot, g_pos, parents, roles, dst_roles, dst_j, height, labels, ramp_frames) -> np.ndarray:
    """Leg IK (in place) bringing planted feet to ``height`` (F, K); returns (F,) how far
    (m) a planted ankle is still above its height (a leg too short to reach)."""
    n = g_pos.shape[0]
    too_high = np.zeros(n)
    for side in ("left", "right"):
        ks = {r.split("_", 1)[1]: i for i, r in enumerate(roles) if r.startswith(side)}
        foot = dst_roles[f"{side}_foot"]
        ankle_on = labels[:, ks["foot"]]
        toe_on = labels[:, ks["toe"]] if "toe" in ks else np.zeros(n, bool)
        planted = ankle_on | toe_on
        if not planted.any():
            continue
        # the ankle goes to its height where it is planted, else (heel up) far enough
        # for the planted toe to reach its height
        e = height[:, ks["foot"]] - g_pos[:, foot, 1]
        if "toe" in ks:
            e = np.where(ankle_on, e, height[:, ks["toe"]] - g_pos[:, dst_j[ks["toe"]], 1])
        e = _nearest_fill(np.where(planted, e, 0.0), planted) * _ramp(planted, ramp_frames)
        frames = np.nonzero(np.abs(e) > 1e-5)[0]
        if frames.size:
            hip, knee = dst_roles[f"{side}_upper_leg"], dst_roles[f"{side}_lower_leg"]
            target = g_pos[frames, foot].copy()
            target[:, 1] += e[frames]
            mid = 0.5 * (g_pos[frames, hip] + g_pos[frames, foot])
            pole = g_pos[frames, knee] + (g_pos[frames, knee] - mid)
            res = solve_pose(g_rot[frames], g_pos[frames], parents, hip, {foot: target}, poles={knee: pole})
            g_rot[frames], g_pos[frames] = res.rotations, res.positions
            miss = np.zeros(n)
            miss[frames] = g_pos[frames, foot, 1] - target[:, 1]
            too_high = np.maximum(too_high, np.where(planted, miss, 0.0))
        if "toe" in ks:
            _flatten_foot(g_rot, g_pos, parents, foot, dst_j[ks["toe"]], height[:, ks["toe"]],
                          _ramp(ankle_on & toe_on, ramp_frames))
    return too_high


def _flatten_foot(g_rot, g_pos, parents, foot: int, toe: int, height: np.ndarray, weight: np.ndarray) -> None:
    """Pitch the foot (in place) so the toe reaches ``height`` (F,) where ``weight`` (F,) is 1
    (both heel and toe planted), blending to the animation where it falls to 0. The toe
    and everything below the foot are carried rigidly."""
    frames = np.nonzero(weight > 1e-5)[0]
    if frames.size == 0:
        return
    v = g_pos[frames, toe] - g_pos[frames, foot]
    length = np.linalg.norm(v, axis=-1)
    lift = v[:, 1] + weight[frames] * (height[frames] - g_pos[frames, toe, 1])
    y = np.clip(lift, -0.95 * length, 0.95 * length)
    flat = v.copy()
    flat[:, 1] = 0
    horizontal = np.linalg.norm(flat, axis=-1, keepdims=True)
    flat = flat / np.maximum(horizontal, 1e-9) * np.sqrt(length ** 2 - y ** 2)[:, None]
    flat[:, 1] = y
    swing = quat.between(v, flat)
    below = [foot]
    for j in range(foot + 1, len(parents)):
        if parents[j] in below:
            below.append(j)
    origin = g_pos[frames, foot][:, None]
    g_rot[frames[:, None], below] = quat.normalize(quat.mul(swing[:, None], g_rot[frames[:, None], below]))
    g_pos[frames[:, None], below] = origin + quat.rotate(swing[:, None], g_pos[frames[:, None], below] - origin)


def fit(motion: Motion, character) -> Motion:
    """``motion`` ready to drive ``character`` by joint name: unchanged when the character's
    body joints (:func:`find_roles`) all appear in the motion under the same names (the same
    skeleton family), else :func:`retarget`-ed onto the character. Characters that are no
    humanoid kinema knows (a fox, a dog) get the motion unchanged."""
    try:
        roles = find_roles(character.skeleton)
    except SkeletonError:
        return motion
    names = set(motion.skeleton.names)
    if all(character.skeleton.names[j] in names for j in roles.values()):
        return motion
    return retarget(motion, character)
