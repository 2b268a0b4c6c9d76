"""Walking styles: a Bandai-Namco biped that switches style live (normal, angry, old,
proud, tired, ...), with inertialized transitions.

::

    from kinema.control.styles import StyleLibrary, StylePlayer, style_gait_features
    library = StyleLibrary.load(["normal", "angry", "old", "proud", "tired"])   # Bandai walks
    player = StylePlayer(library, "normal")
    player.set_style("old")          # at any time: blends into the best-matching frame of "old"
    rot, pos = player.step(heading)  # one 30 fps frame: world rotations (J,4), positions (J,3)

A switch searches the new style's clips for the frame whose feet and hips (root space,
positions and velocities) best match the pose shown now, jumps there, and decays the pose
difference over ``halflife`` seconds (offset inertialization), so the gait phase carries
over. :func:`style_gait_features` measures what a style changes (speed, cadence, step
length, head height and lean, arm swing).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import kinema.io
from kinema.data import require_path
from kinema.errors import KinemaError
from kinema.features.root import RootConfig, compute_root, to_root_space, vectors_to_root_space
from kinema.maths import angles, quat
from kinema.motion import kinematics

DEFAULT_STYLES = ("normal", "angry", "old", "proud", "tired")
FPS = 30.0
FEET = ("Foot_L", "Foot_R", "Toes_L", "Toes_R")
MIN_FRAMES = 90                                   # shorter takes are left out of a library


def style_files(style: str, actions=("walk",), root: Path | None = None) -> list[Path]:
    """Bandai dataset-1 BVH files of ``style`` for ``actions`` (e.g. walk, run, dash)."""
    root = Path(root) if root is not None else require_path("bandai_namco", "dataset-1", what="the Bandai-Namco walks")
    files = [p for a in actions for p in sorted(root.glob(f"dataset-1_{a}_{style}_*.bvh"))]
    if not files:
        raise KinemaError(f"{root}: no {'/'.join(actions)} clips in style {style!r}")
    return files


@dataclass
class StyleClip:
    """One clip prepared for playback: local rotations with the hips in root space, hips
    position in root space, per-frame root motion, and pose features."""

    style: str
    name: str
    rotations: np.ndarray      # (F, J, 4)
    offsets: np.ndarray        # (F, J, 3) local translations
    hips: np.ndarray           # (F, 3) root space
    step: np.ndarray           # (F, 3) root-space root displacement to the next frame
    turn: np.ndarray           # (F,) yaw change to the next frame, radians
    features: np.ndarray       # (F, D) pose features (feet + hips, root space)
    steady: tuple[int, int]    # frames [lo, hi) at cruising speed (no start or stop)


def _pose_features(g_pos: np.ndarray, root, feet: list[int], hips: int) -> np.ndarray:
    p = to_root_space(root, g_pos[:, feet + [hips]])
    v = vectors_to_root_space(root, np.gradient(g_pos[:, feet + [hips]], axis=0) * FPS)
    return np.concatenate([p.reshape(len(p), -1), 0.3 * v.reshape(len(v), -1)], -1).astype(np.float32)


def steady_range(positions: np.ndarray, fraction: float = 0.7, half: int = 15) -> tuple[int, int]:
    """Longest run of frames whose root speed, averaged over ``2 * half`` frames (about a
    stride), is at least ``fraction`` of the clip's 90th percentile (Bandai takes start and
    end standing). ``positions``: (F, 3) root positions."""
    p = np.asarray(positions, np.float64)
    n = len(p)
    idx = np.arange(n)
    a, b = np.maximum(idx - half, 0), np.minimum(idx + half, n - 1)
    speed = np.linalg.norm((p[b] - p[a])[:, [0, 2]], axis=1) / np.maximum(b - a, 1)
    fast = speed >= fraction * np.percentile(speed, 90)
    best, start = (0, len(speed)), None
    length = 0
    for i, f in enumerate(np.append(fast, False)):
        if f and start is None:
            start = i
        elif not f and start is not None:
            if i - start > length:
                best, length = (start, i), i - start
            start = None
    return best


class StyleLibrary:
    """Clips per style, sharing one skeleton (the Bandai one)."""

    def __init__(self, clips: dict[str, list[StyleClip]], skeleton) -> None:
        self.clips, self.skeleton = clips, skeleton

    @property
    def styles(self) -> list[str]:
        return list(self.clips)

    @classmethod
    def load(cls, styles=DEFAULT_STYLES, actions=("walk",), root: Path | None = None) -> StyleLibrary:
        clips: dict[str, list[StyleClip]] = {}
        skeleton = None
        for style in styles:
            for path in style_files(style, actions, root):
                m = kinema.io.load(path)
                m = m.at_fps(FPS)
                if m.num_frames < MIN_FRAMES:          # e.g. walk_normal_002: one second
                    continue
                skeleton = skeleton or m.skeleton
                if m.joint_names != skeleton.names:
                    raise KinemaError(f"{path}: joints differ from the other style clips")
                g_rot, g_pos = m.global_transforms()
                rt = compute_root(g_pos, g_rot, m.skeleton, RootConfig.bandai())
                hips = m.skeleton.index("Hips")
                local = m.rotations.astype(np.float64).copy()
                local[:, hips] = quat.mul(quat.inv(rt.rotations.astype(np.float64)), g_rot[:, hips])
                step = np.zeros((m.num_frames, 3), np.float32)
                step[:-1] = to_root_space(rt[:-1], rt.positions[1:])
                yaw = np.unwrap(angles.yaw(rt.directions).astype(np.float64))
                turn = np.append(np.diff(yaw), 0.0)
                feet = [m.skeleton.index(n) for n in FEET]
                clips.setdefault(style, []).append(StyleClip(
                    style, path.stem, local.astype(np.float32), m.positions.astype(np.float32),
                    to_root_space(rt, g_pos[:, hips]).astype(np.float32), step, turn.astype(np.float32),
                    _pose_features(g_pos, rt, feet, hips), steady_range(rt.positions)))
        missing = [s for s in styles if s not in clips]
        if missing:
            raise KinemaError(f"no clip of {MIN_FRAMES}+ frames for style(s) {missing}")
        return cls(clips, skeleton)


class StylePlayer:
    """Plays a :class:`StyleLibrary` one frame per :meth:`step`, switching style on request.

    Args:
        library: the clips. style: the first style. halflife: transition blend, seconds.
        margin: frames kept clear of the end of a clip's steady part (it loops by searching
            back into itself before reaching it).
    """

    def __init__(self, library: StyleLibrary, style: str, halflife: float = 0.15, margin: int = 20) -> None:
        self.lib, self.halflife, self.margin = library, halflife, margin
        if style not in library.clips:
            raise KinemaError(f"unknown style {style!r}; loaded: {', '.join(library.styles)}")
        self.style, self.clip = style, library.clips[style][0]
        self.frame = self.clip.steady[0] + margin
        self.position, self.yaw = np.zeros(3), 0.0
        j = library.skeleton.num_joints
        self.offset_rot, self.offset_hips = np.zeros((j, 3)), np.zeros(3)
        self.hips = library.skeleton.index("Hips")
        self.switches = 0

    def set_style(self, style: str) -> None:
        """Switch to ``style`` now (at its best-matching frame, inertialized)."""
        if style not in self.lib.clips:
            raise KinemaError(f"unknown style {style!r}; loaded: {', '.join(self.lib.styles)}")
        if style != self.style:
            self.style = style
            self._jump(self.lib.clips[style], exclude_current=False)
            self.switches += 1

    def _jump(self, clips: list[StyleClip], exclude_current: bool) -> None:
        q = self.clip.features[self.frame]
        best = (np.inf, None, 0)
        for c in clips:
            lo, hi = c.steady[0], c.steady[1] - self.margin
            if hi <= lo:
                continue
            cost = ((c.features[lo:hi] - q) ** 2).sum(1)
            if exclude_current and c is self.clip:
                cost[max(0, self.frame - lo - 30):max(0, self.frame - lo + 1)] = np.inf
            i = int(np.argmin(cost))
            if cost[i] < best[0]:
                best = (float(cost[i]), c, lo + i)
        if best[1] is None:
            raise KinemaError("style clips are too short to play")
        cur_rot, cur_hips = self._local()
        new = best[1]
        self.offset_rot = quat.log(quat.abs(quat.mul(cur_rot, quat.inv(new.rotations[best[2]].astype(np.float64)))))
        self.offset_hips = cur_hips - new.hips[best[2]]
        self.clip, self.frame = new, best[2]

    def _local(self) -> tuple[np.ndarray, np.ndarray]:
        rot = quat.mul(quat.exp(self.offset_rot), self.clip.rotations[self.frame].astype(np.float64))
        return rot, self.clip.hips[self.frame] + self.offset_hips

    def step(self, heading: float | None = None, turn_rate: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        """Advance one frame; ``heading`` (radians about +Y, 0 = +Z) steers the root toward it.

        Returns world (rotations (J, 4), positions (J, 3)) float32."""
        c = self.clip
        s = c.step[self.frame]
        cy, sy = math.cos(self.yaw), math.sin(self.yaw)
        self.position = self.position + np.array([cy * s[0] + sy * s[2], 0.0, cy * s[2] - sy * s[0]])
        self.yaw += float(c.turn[self.frame])
        if heading is not None:
            self.yaw += turn_rate * angles.wrap(heading - self.yaw)
        self.frame += 1
        if self.frame >= c.steady[1] - self.margin // 2:
            self._jump([c], exclude_current=True)
        decay = 0.5 ** (1.0 / FPS / self.halflife)
        self.offset_rot *= decay
        self.offset_hips *= decay
        return self.pose()

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World pose now: rotations (J, 4), positions (J, 3)."""
        rot, hips = self._local()
        pos = self.clip.offsets[self.frame].astype(np.float64).copy()
        ry = np.array([math.cos(self.yaw / 2), 0.0, math.sin(self.yaw / 2), 0.0])
        h = self.hips
        # the hips are stored in root space: the joints above them (Bandai's joint_Root)
        # carry the walker's root (position on the floor, yaw), so the whole body travels
        parents = self.lib.skeleton.parents
        pos[h] = hips
        for a in range(h):
            top = parents[a] < 0
            rot[a] = ry if top else (1.0, 0.0, 0.0, 0.0)
            pos[a] = self.position if top else 0.0
        g_rot, g_pos = kinematics.forward(rot[None], pos[None], parents)
        return g_rot[0].astype(np.float32), g_pos[0].astype(np.float32)


def style_gait_features(positions: np.ndarray, skeleton, fps: float = FPS) -> dict:
    """What a walking style changes, measured on world positions (F, J, 3):
    speed (m/s), cadence (steps/s), step length (m), head height (m), forward lean of the
    head over the hips (m), arm swing (hand-to-hand fore-aft spread, m), foot lift (m)."""
    p = np.asarray(positions, np.float64)
    j = skeleton.index
    hips, head = p[:, j("Hips")], p[:, j("Head")]
    vel = np.gradient(hips[:, [0, 2]], axis=0) * fps
    speed = np.linalg.norm(vel, axis=1)
    fwd = vel / np.maximum(speed[:, None], 1e-6)
    lf, rf = p[:, j("Foot_L")], p[:, j("Foot_R")]
    gap = ((lf - rf)[:, [0, 2]] * fwd).sum(1)                 # which foot leads, along the travel
    crossings = int(np.sum(np.diff(np.sign(gap)) != 0))
    duration = len(p) / fps
    lh, rh = p[:, j("Hand_L")], p[:, j("Hand_R")]
    swing = ((lh - rh)[:, [0, 2]] * fwd).sum(1)
    lean = ((head - hips)[:, [0, 2]] * fwd).sum(1)
    return {"speed_m_s": float(speed.mean()), "cadence_steps_s": crossings / duration,
            "step_length_m": float(speed.mean() / max(crossings / duration, 1e-6)),
            "head_height_m": float(head[:, 1].mean()), "lean_m": float(lean.mean()),
            "arm_swing_m": float(swing.max() - swing.min()),
            "foot_lift_m": float(np.percentile(np.maximum(lf[:, 1], rf[:, 1]), 95) - min(lf[:, 1].min(), rf[:, 1].min()))}
