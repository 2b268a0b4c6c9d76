"""The Actor component: a skeleton as one entity per joint, posed by a Motion or a controller.

Attach it to an entity (the actor's root in the world); it creates one child entity per
joint, named after the joints and parented like the skeleton, so the scene's batched world
update is the actor's forward kinematics and other components can attach to joints
(``actor.joint("LeftHand")``). The pose comes from:

* a :class:`kinema.motion.Motion` played back with ``time`` (seconds), ``speed`` and
  ``loop`` (sampled between frames with slerp / lerp), or
* a live pose set each step by a controller: ``actor.set_pose(local_rotations,
  local_positions)``.

The renderer reads ``actor.global_positions()`` / ``global_rotations()`` (world space,
including the actor entity's transform), ``actor.parents`` and ``actor.character``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kinema.engine.component import Component
from kinema.engine.entity import Entity
from kinema.errors import KinemaError
from kinema.maths import quat

if TYPE_CHECKING:
    from kinema.io.character import Character
    from kinema.motion import Motion, Skeleton


class Actor(Component):
    """One entity per joint, posed from a motion or a live pose.

    Args:
        skeleton: the joint hierarchy (default: the motion's, else the character's).
        motion: clip to play (its skeleton must have the same joint count).
        character: skinned character for the renderer to draw with this pose (optional).
        speed: playback rate (1 = real time, negative plays backwards).
        loop: wrap around at the end (else stop on the last frame).
        playing: start playing at once.
        time: start time, seconds.
        color: RGBA for the debug skeleton.
    """

    def __init__(self, skeleton: Skeleton | None = None, motion: Motion | None = None,
                 character: Character | None = None, speed: float = 1.0, loop: bool = True,
                 playing: bool = True, time: float = 0.0,
                 color: tuple[float, float, float, float] = (0.95, 0.95, 0.95, 1.0)) -> None:
        if skeleton is None:
            skeleton = motion.skeleton if motion is not None else (character.skeleton if character else None)
        if skeleton is None:
            raise KinemaError("Actor needs a skeleton, a motion or a character")
        self.skeleton = skeleton
        self.character = character
        self.speed = float(speed)
        self.loop = bool(loop)
        self.playing = bool(playing)
        self.time = float(time)
        self.color = color
        self.joints: list[Entity] = []
        self.slots = np.zeros(0, np.int64)
        self._motion: Motion | None = None
        self.motion = motion

    # ---------------------------------------------------------------- set-up
    @property
    def num_joints(self) -> int:
        return self.skeleton.num_joints

    @property
    def parents(self) -> np.ndarray:
        """(J,) parent joint indices, -1 for the root."""
        return self.skeleton.parents

    @property
    def motion(self) -> Motion | None:
        return self._motion

    @motion.setter
    def motion(self, motion: Motion | None) -> None:
        if motion is not None and motion.num_joints != self.skeleton.num_joints:
            raise KinemaError(f"Actor: motion {motion.name!r} has {motion.num_joints} joints, "
                              f"the skeleton {self.skeleton.num_joints}")
        self._motion = motion
        if self.joints:
            self._apply_current()

    def on_add(self) -> None:
        scene = self.entity.scene
        names, parents, offsets = self.skeleton.names, self.skeleton.parents, self.skeleton.offsets
        for j in range(self.skeleton.num_joints):
            parent = self.entity if parents[j] < 0 else self.joints[parents[j]]
            self.joints.append(scene.create_entity(names[j], parent=parent, position=offsets[j], tags=("joint",)))
        self.slots = scene.slots(self.joints)
        self._apply_current()

    def _apply_current(self) -> None:
        if self._motion is not None:
            self.set_pose(*self.sample(self.time), pause=False)
        elif self.character is not None:
            self.set_pose(self.character.bind_rotations, self.character.bind_positions, pause=False)
        else:
            self.set_pose(quat.identity((self.num_joints,)), self.skeleton.offsets, pause=False)

    def joint(self, name: str) -> Entity:
        """The entity of joint ``name``."""
        return self.joints[self.skeleton.index(name)]

    # --------------------------------------------------------------- playback
    @property
    def frame(self) -> float:
        """Current motion frame (fractional), ``time * fps``."""
        return self.time * self._motion.fps if self._motion is not None else 0.0

    def play(self) -> None:
        self.playing = True

    def pause(self) -> None:
        self.playing = False

    def seek(self, time: float) -> None:
        """Jump to ``time`` seconds (wrapped or clamped like playback) and pose there."""
        self.time = self._wrap(float(time))
        if self._motion is not None and self.joints:
            self.set_pose(*self.sample(self.time), pause=False)

    def _wrap(self, t: float) -> float:
        m = self._motion
        if m is None:
            return t
        if self.loop:
            return t % m.duration
        return min(max(t, 0.0), (m.num_frames - 1) / m.fps)

    def sample(self, time: float) -> tuple[np.ndarray, np.ndarray]:
        """Local pose of the motion at ``time`` seconds: rotations (J, 4) slerped and
        positions (J, 3) lerped between the two nearest frames (the last frame blends into
        the first when looping)."""
        m = self._motion
        if m is None:
            raise KinemaError("Actor.sample: no motion")
        f = self._wrap(time) * m.fps
        i = min(int(np.floor(f)), m.num_frames - 1)
        k = (i + 1) % m.num_frames if self.loop else min(i + 1, m.num_frames - 1)
        w = np.float32(f - i)
        if w <= 1e-6 or k == i:
            return m.rotations[i], m.positions[i]
        rot = quat.slerp(m.rotations[i], m.rotations[k], w)
        pos = m.positions[i] * (1 - w) + m.positions[k] * w
        return rot.astype(np.float32), pos.astype(np.float32)

    def update(self, dt: float) -> None:
        if self._motion is None or not self.playing:
            return
        self.time += dt * self.speed
        if not self.loop:
            end = (self._motion.num_frames - 1) / self._motion.fps
            if self.time >= end or self.time <= 0.0:
                self.playing = False
        self.time = self._wrap(self.time)
        self.set_pose(*self.sample(self.time), pause=False)

    # ------------------------------------------------------------------ pose
    def set_pose(self, rotations: np.ndarray, positions: np.ndarray | None = None, pause: bool = True) -> None:
        """Set the local pose: rotations (J, 4) w, x, y, z and positions (J, 3) metres
        (None keeps the current ones). By default this pauses motion playback, so a
        controller's pose is not overwritten by the next update."""
        rotations = np.asarray(rotations, np.float32)
        if rotations.shape != (self.num_joints, 4) or (positions is not None and np.shape(positions) != (self.num_joints, 3)):
            raise KinemaError(f"Actor.set_pose: expected ({self.num_joints}, 4) rotations and "
                              f"({self.num_joints}, 3) positions, got {rotations.shape} and {np.shape(positions)}")
        if pause:
            self.playing = False
        self.entity.scene.transforms.set_local(self.slots, position=positions, rotation=rotations)

    def local_rotations(self) -> np.ndarray:
        """(J, 4) current local rotations."""
        return self.entity.scene.transforms.local_rot[self.slots].copy()

    def local_positions(self) -> np.ndarray:
        """(J, 3) current local translations, metres."""
        return self.entity.scene.transforms.local_pos[self.slots].copy()

    def global_positions(self) -> np.ndarray:
        """(J, 3) joint positions in world space, metres."""
        t = self.entity.scene.transforms
        t.update_world()
        return t.world_pos[self.slots].copy()

    def global_rotations(self) -> np.ndarray:
        """(J, 4) joint rotations in world space (w, x, y, z)."""
        t = self.entity.scene.transforms
        t.update_world()
        return t.world_rot[self.slots].copy()

    # ------------------------------------------------------------------ draw
    def draw(self, renderer: Any) -> None:
        """Draw through whichever the renderer offers, first match wins:
        ``draw_actor(actor)``, ``draw_character(character, global_rotations,
        global_positions)`` (with a character), ``draw_skeleton(positions, parents, color)``,
        ``renderer.debug.skeleton(positions, parents, color)``."""
        fn = getattr(renderer, "draw_actor", None)
        if fn is not None:
            fn(self)
            return
        if self.character is not None:
            fn = getattr(renderer, "draw_character", None)
            if fn is not None:
                fn(self.character, self.global_rotations(), self.global_positions())
                return
        fn = getattr(renderer, "draw_skeleton", None)
        if fn is None:
            fn = getattr(getattr(renderer, "debug", None), "skeleton", None)
        if fn is not None:
            fn(self.global_positions(), self.parents, self.color)
