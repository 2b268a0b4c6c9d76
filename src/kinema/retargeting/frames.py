"""Anatomical frames of body parts, and the constant offset between a joint's own frame
and its body part's.

A joint's local axes are whatever the rig's author chose (LaFAN1 and Bandai joints point
their bones along +x in a pose that is no body pose at all; Geno's stand in an A-pose).
Retargeting instead compares *anatomical* frames, built from where the joints are: a
bone's direction first, then a second axis that fixes its twist (the knee or elbow hinge,
the hips' left-right axis, the shin for the foot). Because a joint's children sit at fixed
offsets in its local frame, the anatomical frame is the joint's world rotation times a
constant ``K`` (3 x 3); :func:`frame_offsets` estimates ``K`` per role from any poses of
a skeleton (a clip, or a single bind pose), and retargeting maps one skeleton onto
another through ``R_target = R_source K_source K_target^T``: every matched bone points
where the source's points, whatever pose either skeleton calls rest (T-pose, A-pose).
"""
from __future__ import annotations

import numpy as np

from kinema.maths import quat
from kinema.maths.backend import unit

# sin of the smallest bend that defines a hinge axis (12 degrees)
MIN_BEND = np.sin(np.radians(12.0))
_UP = np.array([0.0, 1.0, 0.0])


def orthonormal(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation whose columns are ``primary``, ``secondary`` made orthogonal
    to it (Gram-Schmidt), and their cross product."""
    a = unit(primary)
    b = secondary - np.sum(secondary * a, -1, keepdims=True) * a
    b = unit(b)
    return np.stack([a, b, np.cross(a, b)], axis=-1)


def _first(roles: dict[str, int], *names: str) -> int | None:
    for n in names:
        if n in roles:
            return roles[n]
    return None


def _apart(pos: np.ndarray, a: int, b: int, eps: float = 0.01) -> bool:
    """True when joints ``a`` and ``b`` lie more than ``eps`` metres apart on average."""
    return bool(np.linalg.norm(pos[:, b] - pos[:, a], axis=-1).mean() > eps)


def _forward(pos: np.ndarray, roles: dict[str, int]) -> np.ndarray:
    """(F, 3) horizontal facing direction: the hips' left-right axis crossed with up."""
    lateral = pos[:, roles["left_upper_leg"]] - pos[:, roles["right_upper_leg"]]
    f = np.cross(lateral, _UP)
    f[:, 1] = 0
    return unit(f)


def _hinge(upper: np.ndarray, lower: np.ndarray, forward: np.ndarray, sign: float) -> tuple[np.ndarray, np.ndarray]:
    """Hinge axis (F, 3) of a limb and the sine of its bend (F,).

    Where the limb bends by more than 12 degrees the axis is ``upper x lower``; where it
    is straight, the axis a bend toward ``sign * forward`` would have (knees bend back:
    sign -1; elbows forward: +1)."""
    n = np.cross(unit(upper), unit(lower))
    sine = np.linalg.norm(n, axis=-1)
    guess = np.cross(unit(upper), sign * forward)
    return np.where((sine > MIN_BEND)[:, None], unit(n), unit(guess)), sine


def anatomical_frames(pos: np.ndarray, roles: dict[str, int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Anatomical frame of every role that has one, from world joint positions.

    Args:
        pos: (F, J, 3) world joint positions.
        roles: role -> joint index (:func:`kinema.motion.roles.find_roles`).
    Returns:
        role -> ((F, 3, 3) frames, (F,) float weights: 1 where the frame is measured, the
        squared sine of the bend for a limb's hinge, a small weight where a straight limb's
        hinge had to be guessed).
    """
    p = np.asarray(pos, np.float64)
    n = p.shape[0]
    fwd = _forward(p, roles)
    out = {}

    def at(j):
        return p[:, j]

    def put(role, primary, secondary, weights=None):
        out[role] = (orthonormal(primary, secondary), np.ones(n) if weights is None else weights)

    lat_legs = at(roles["left_upper_leg"]) - at(roles["right_upper_leg"])
    lat_arms = lat_legs   # the shoulders' left-right axis: clavicles, or arms where those coincide (CMU)
    for part in ("clavicle", "upper_arm"):
        lj, rj = roles.get(f"left_{part}"), roles.get(f"right_{part}")
        if lj is not None and rj is not None and _apart(p, lj, rj):
            lat_arms = at(lj) - at(rj)
            break
    chain = ["hips"] + [r for r in ("spine", "chest", "neck", "head") if r in roles]
    for i, lo in enumerate(chain[:-1]):
        # the next joint up that is not where this one is (CMU's neck sits on its chest)
        hi = next((h for h in chain[i + 1:] if _apart(p, roles[lo], roles[h])), None)
        if hi is None:
            continue
        up = at(roles[hi]) - at(roles[lo])
        if lo == "hips":
            put("hips", lat_legs, up)
        else:
            put(lo, up, lat_arms)
    top = None
    if "chest" in roles:
        top = next((roles[h] for h in ("neck", "head") if h in roles and _apart(p, roles["chest"], roles[h])), None)
    for side in ("left", "right"):
        r = {k: roles.get(f"{side}_{k}") for k in ("clavicle", "upper_arm", "forearm", "hand",
                                                    "upper_leg", "lower_leg", "foot", "toe")}
        if r["clavicle"] is not None and r["upper_arm"] is not None and top is not None and "chest" in roles:
            put(f"{side}_clavicle", at(r["upper_arm"]) - at(r["clavicle"]), at(top) - at(roles["chest"]))
        for a, b, c, sign in (("upper_arm", "forearm", "hand", 1.0), ("upper_leg", "lower_leg", "foot", -1.0)):
            if r[a] is None or r[b] is None or r[c] is None:
                continue
            upper, lower = at(r[b]) - at(r[a]), at(r[c]) - at(r[b])
            axis, sine = _hinge(upper, lower, fwd, sign)
            # a deep bend defines the hinge best; a guessed one counts only when nothing bends
            w = np.where(sine > MIN_BEND, sine ** 2, 1e-4)
            put(f"{side}_{a}", upper, axis, w)
            put(f"{side}_{b}", lower, axis, w)
        if r["toe"] is not None:
            put(f"{side}_foot", at(r["toe"]) - at(r["foot"]), at(r["lower_leg"]) - at(r["foot"]))
    return out


def mean_rotation(matrices: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted chordal mean of rotation matrices (F, 3, 3): the rotation nearest to
    their weighted sum (SVD projection)."""
    m = np.einsum("f,fij->ij", np.asarray(weights, np.float64), matrices)
    u, _, vt = np.linalg.svd(m)
    d = np.sign(np.linalg.det(u @ vt))
    return u @ np.diag([1.0, 1.0, d]) @ vt


def frame_offsets(rot: np.ndarray, pos: np.ndarray, roles: dict[str, int],
                  parents: np.ndarray) -> dict[str, np.ndarray]:
    """Constant ``K`` (3, 3) per role with ``anatomical frame = R_joint K``.

    Roles without a frame of their own (head, hands, toes) take the frame of the nearest
    role above them, averaged over the poses: the pose they hold relative to it on average
    counts as neutral.

    Args:
        rot: (F, J, 4) world rotations; pos: (F, J, 3) world positions (F >= 1 poses).
        roles: role -> joint index. parents: (J,) parent indices.
    """
    r = quat.to_matrix(np.asarray(rot, np.float64))                   # (F, J, 3, 3)
    frames = anatomical_frames(pos, roles)
    out = {}
    for role, (n, w) in frames.items():
        j = roles[role]
        out[role] = mean_rotation(np.swapaxes(r[:, j], -1, -2) @ n, w)
    joint_role = {j: role for role, j in roles.items()}
    for role in roles:
        if role in out:
            continue
        j = int(parents[roles[role]])
        while j >= 0 and joint_role.get(j) not in frames:
            j = int(parents[j])
        if j < 0:
            continue
        up = joint_role[j]
        n, w = frames[up]
        out[role] = mean_rotation(np.swapaxes(r[:, roles[role]], -1, -2) @ n, w)
    return out
