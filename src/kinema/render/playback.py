"""Showing a motion clip: load it (with an optional skinned character), pose it per frame,
frame the camera, draw it. Shared by ``kinema view`` and ``kinema render``."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import kinema.io
from kinema.errors import KinemaError
from kinema.maths import angles
from kinema.motion.extent import body_box, body_centre, figure_size


@dataclass
class Clip:
    """A motion ready to show, optionally skinning a character.

    Attributes:
        motion: the clip.
        character: skinned character driven by the motion's joints (matched by name; a
            motion of another skeleton is retargeted onto it by :meth:`load`), or None for
            a procedural body.
        focus: (F, 3) point the cameras follow (centre of the body's joints per frame).
        heading: (F,) facing angle about +Y for the follow camera (from the travel direction).
    """

    motion: object
    character: object | None = None
    focus: np.ndarray = field(default=None)
    heading: np.ndarray = field(default=None)
    _poses: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, path: str | Path, character: str | Path | None = None) -> Clip:
        """Load a motion file; ``character`` names a character file (GLB, FBX, character.bin).

        A GLB/FBX given as ``path`` that holds a mesh is its own character."""
        path = Path(path)
        motion = kinema.io.load(path)
        ch = kinema.io.load_character(character) if character is not None else kinema.io.mesh_character(path)
        if ch is not None:
            from kinema.retargeting import fit
            motion = fit(motion, ch)
            shared = set(ch.skeleton.names) & set(motion.skeleton.names)
            if not shared:
                raise KinemaError(f"{character or path}: character joints share no names with motion {path.name}, "
                                  "and it is no humanoid skeleton kinema can retarget")
        return cls(motion, ch)

    def __post_init__(self) -> None:
        g = self.motion.global_positions().astype(np.float64)
        self.focus = body_centre(g)
        self.heading = _travel_heading(self.focus, self.motion.fps)

    @property
    def box(self) -> np.ndarray:
        """(3,) sides (m) of the box around the figure: the character's bind mesh when there
        is one, else the joints that stay with the body in the first frame (a static root
        left at the origin while the hips travel, as in the Bandai-Namco takes, does not
        count); each at least 1 cm."""
        if self.character is not None and self.character.has_mesh:
            lo, hi = self.character.bounds()
            return np.maximum(hi - lo, 0.01)
        return np.maximum(body_box(self.motion[0].global_positions()[0]), 0.01)

    @property
    def size(self) -> float:
        """The figure's size for the camera (m): its height, or 0.6 of its longest side for
        a long, low figure (a dog, the fox), whichever is larger."""
        return figure_size(self.box)

    def fit_view(self, renderer) -> None:
        """:meth:`fit_camera` on the renderer's rig, and the size-dependent effects (floor
        tiles, fog, shadow area, SSAO radius) scaled alike from their defaults for a figure
        larger than a person (human-sized clips keep the defaults)."""
        from kinema.render.pipeline import Effects
        self.fit_camera(renderer.camera)
        k = max(1.0, self.size / 2.0)
        base, e = Effects(), renderer.effects
        e.fog_distance, e.shadow_extent = base.fog_distance * k, base.shadow_extent * k
        e.checker_size, e.ssao_radius = base.checker_size * k, base.ssao_radius * k

    def fit_camera(self, rig) -> None:
        """Scale the camera rig to the figure (:func:`kinema.render.camera.fit_rig` with
        :attr:`size`), so the default camera frames it."""
        from kinema.render.camera import fit_rig
        fit_rig(rig, self.size)

    @property
    def num_frames(self) -> int:
        return int(self.motion.num_frames)

    def pose(self, frame: int, mirror: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """World (rotations, positions) at ``frame``: character joints when there is a
        character, else the motion's joints."""
        key = bool(mirror)
        if key not in self._poses:
            m = self.motion.mirror() if mirror else self.motion
            if self.character is not None:
                from kinema.render.characters import pose_from_motion
                rot, pos = pose_from_motion(self.character, m, np.arange(m.num_frames))
            else:
                rot, pos = m.global_rotations(), m.global_positions()
            self._poses[key] = (np.asarray(rot, np.float32), np.asarray(pos, np.float32))
        rot, pos = self._poses[key]
        f = int(np.clip(frame, 0, self.num_frames - 1))
        return rot[f], pos[f]

    def draw(self, renderer, frame: int, mirror: bool = False, tint=(1.0, 1.0, 1.0, 1.0),
             skeleton: bool = False) -> None:
        """Draw the clip at ``frame`` (skinned character or procedural body)."""
        if self.character is not None and mirror:
            # the mirror image of the skinned character (skinning the mirrored motion's
            # rotations would tear the mesh: bind frames are rarely mirror images)
            from kinema.render.characters import mirrored_skinning, skinning_matrices
            rot, pos = self.pose(frame, False)
            bones = mirrored_skinning(self.character, skinning_matrices(self.character, rot, pos))
            renderer.draw_character(self.character, bones=bones, tint=tint)
        elif self.character is not None:
            rot, pos = self.pose(frame, mirror)
            renderer.draw_character(self.character, rot, pos, tint=tint)
        else:
            rot, pos = self.pose(frame, mirror)
            renderer.draw_body(pos, self.motion.parents)
        if skeleton:   # the motion's own joints (a character may add rig-only joints)
            key = ("joints", bool(mirror))
            if key not in self._poses:
                m = self.motion.mirror() if mirror else self.motion
                self._poses[key] = m.global_positions()
            f = int(np.clip(frame, 0, self.num_frames - 1))
            renderer.draw_skeleton(self._poses[key][f], self.motion.parents, (1.0, 1.0, 1.0, 1.0), width=2.0)

    def frame_camera(self, rig, mode: str, frame: int, time: float | None = None) -> None:
        """Point the camera rig at the clip: ``orbit`` turns slowly around the focus (when
        ``time`` in seconds is given; else the user's orbit angles stay),
        ``follow`` trails behind it, ``fixed`` watches from a spot that sees the whole clip."""
        f = int(np.clip(frame, 0, self.num_frames - 1))
        focus = self.focus[f]
        rig.set_focus(focus, heading=float(self.heading[f]))
        if mode == "fixed":
            lo, hi = self.focus.min(0), self.focus.max(0)
            centre = (lo + hi) / 2
            extent = float(np.linalg.norm(hi - lo)) + 1.8 * self.size
            rig.fixed_position = centre + np.array([0.6, 0.5, 1.0]) / np.linalg.norm([0.6, 0.5, 1.0]) * extent
            rig.fixed_target = None
            rig.set_mode("fixed")
        elif mode == "orbit":
            rig.set_mode("orbit")
            if time is not None:
                rig.yaw = 0.6 + 0.35 * time
        else:
            rig.set_mode(mode)


def _travel_heading(focus: np.ndarray, fps: float, window: float = 0.5) -> np.ndarray:
    """(F,) heading about +Y (0 = +Z) of the travel direction over +-``window`` seconds,
    held while the clip stands still."""
    n = focus.shape[0]
    k = max(1, int(round(window * fps)))
    idx = np.arange(n)
    d = focus[np.minimum(idx + k, n - 1)] - focus[np.maximum(idx - k, 0)]
    speed = np.hypot(d[:, 0], d[:, 2])
    heading = angles.yaw(d)
    moving = speed > 0.1
    out = np.zeros(n)
    last = float(heading[np.argmax(moving)]) if moving.any() else 0.0
    for i in range(n):
        if moving[i]:
            last = float(heading[i])
        out[i] = last
    return np.unwrap(out)
