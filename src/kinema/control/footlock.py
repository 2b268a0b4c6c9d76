"""Online foot locking (Motion Matching's contact lock), one character, one frame at a time.

Each toe's shown position is an inertialized stream: the animated toe, or while locked the
world point where its contact began. A lock starts when the toe's contact label turns on
(at the point where the toe is shown at that instant), and is released when the label
turns off or the animated toe moves ``unlock_radius`` metres from the lock point. Switching
between the two streams inertializes the offset (position and velocity, halflife
``halflife``, :func:`kinema.control.springs.decay_spring`), so the toe neither jumps on
lock nor on release. The leg (upper leg -> knee -> foot) is then solved with FABRIK
(:func:`kinema.ik.pose.solve_pose`) so the ankle moves by the same offset as the toe; the
foot keeps its world rotation, so the toe lands on its target and every bone keeps its
length.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kinema.control import springs
from kinema.errors import KinemaError
from kinema.ik.pose import solve_pose

UNLOCK_RADIUS = 0.2   # m, a locked toe lets go when the animated one is this far (Motion Matching's)
HALFLIFE = 0.1        # s, the lock/release offsets decay with this halflife (Motion Matching's)


@dataclass
class ToeLock:
    """Lock state of one toe (world space): whether it is locked, the previous contact
    label, the lock point (3,), the previous animated toe position (3,), and the
    inertialized offset (3,) of the shown toe from its stream and its velocity (3,) m/s."""

    locked: bool = False
    contact: bool = False
    point: np.ndarray | None = None
    anim: np.ndarray | None = None
    offset: np.ndarray = field(default_factory=lambda: np.zeros(3))
    offset_vel: np.ndarray = field(default_factory=lambda: np.zeros(3))


class FootLock:
    """Contact-driven foot locking with two-bone leg IK (see the module docstring).

    Args:
        parents: (J,) parent indices of the skeleton.
        feet: (left, right) foot (ankle) joint indices; the foot's parent is the knee and
            the knee's parent the upper leg (the IK root).
        toes: (left, right) toe joint indices (children of the feet, carried rigidly).
        unlock_radius: metres the animated toe may move from the lock point before the
            lock is released (MM: 0.2).
        halflife: seconds, halflife of the lock/release offsets (MM: 0.1).
    """

    @classmethod
    def for_roles(cls, parents: Sequence[int], roles: dict[str, int], unlock_radius: float = UNLOCK_RADIUS,
                  halflife: float = HALFLIFE) -> FootLock:
        """The lock of a biped's two feet from its body roles (``left_foot``, ``right_foot``,
        ``left_toe``, ``right_toe``: :func:`kinema.motion.roles.find_roles`, a database's
        ``roles``)."""
        return cls(parents, [roles["left_foot"], roles["right_foot"]], [roles["left_toe"], roles["right_toe"]],
                   unlock_radius, halflife)

    def __init__(self, parents: Sequence[int], feet: Sequence[int], toes: Sequence[int],
                 unlock_radius: float = UNLOCK_RADIUS, halflife: float = HALFLIFE):
        self.parents = np.asarray(parents, np.int64)
        self.feet = [int(j) for j in feet]
        self.toes = [int(j) for j in toes]
        if len(self.feet) != len(self.toes):
            raise KinemaError(f"foot lock: {len(self.feet)} feet but {len(self.toes)} toes")
        for foot in self.feet:
            if foot < 0 or foot >= len(self.parents) or self.parents[foot] < 0 or self.parents[self.parents[foot]] < 0:
                raise KinemaError(f"foot lock: joint {foot} has no knee and upper leg above it")
        self.unlock_radius = float(unlock_radius)
        self.halflife = float(halflife)
        self.toe_locks = [ToeLock() for _ in self.toes]
        self._release = False

    def reset(self) -> None:
        """Forget every lock and offset (the character was teleported)."""
        self.toe_locks = [ToeLock() for _ in self.toes]
        self._release = False

    def release(self) -> None:
        """Let every lock go at the next :meth:`apply` as if its contact had ended, without
        a pop: the offset from the lock point is inertialized away, and a toe whose contact
        label is on then locks afresh where it is shown. Call it when the source of the
        animation or of the contacts changes (a controller switch)."""
        self._release = True

    def apply(self, rotations: np.ndarray, positions: np.ndarray, contacts: np.ndarray, dt: float
              ) -> tuple[np.ndarray, np.ndarray]:
        """Lock the feet of one world pose and advance the lock state by ``dt`` seconds.

        Args:
            rotations: (J, 4) world joint rotations (w, x, y, z).
            positions: (J, 3) world joint positions, metres.
            contacts: (len(toes),) contact labels (bool or 0/1).
            dt: seconds since the previous call.
        Returns:
            (rotations (J, 4), positions (J, 3)) of the corrected pose (the inputs when no
            toe is displaced).
        """

        rot, pos = rotations, positions
        if rot.shape != (len(self.parents), 4) or pos.shape != (len(self.parents), 3):
            raise KinemaError(f"foot lock: pose shapes {rot.shape}, {pos.shape}; expected "
                              f"({len(self.parents)}, 4), ({len(self.parents)}, 3)")
        if len(contacts) != len(self.toes):
            raise KinemaError(f"foot lock: {len(contacts)} contact labels for {len(self.toes)} toes")
        release, self._release = self._release, False
        parents = self.parents
        for k, (foot, toe) in enumerate(zip(self.feet, self.toes)):
            st = self.toe_locks[k]
            contact = bool(contacts[k])
            anim = pos[toe].copy()
            anim_vel = np.zeros(3) if st.anim is None else (anim - st.anim) / max(dt, 1e-9)
            st.anim = anim
            st.offset, st.offset_vel = springs.decay_spring(st.offset, st.offset_vel, self.halflife, dt)
            target = (st.point if st.locked else anim) + st.offset
            unlock = st.locked and float(np.linalg.norm(st.point - anim)) > self.unlock_radius
            if contact and (not st.contact or release):  # contact begins: lock where the toe is shown now
                st.locked = True
                st.offset_vel = np.zeros(3)  # a planted toe stops (the label says it is still)
                st.point = target.copy()
                st.offset = np.zeros(3)
            elif st.locked and ((st.contact and not contact) or unlock or release):  # release to the animation
                st.locked = False
                st.offset = target - anim
                st.offset_vel = st.offset_vel - anim_vel
            st.contact = contact
            delta = target - anim
            if float(np.linalg.norm(delta)) < 1e-5:
                continue
            knee = int(parents[foot])
            hip = int(parents[knee])
            mid = 0.5 * (pos[hip] + pos[foot])
            res = solve_pose(rot[None], pos[None], parents, hip, {foot: (pos[foot] + delta)[None]},
                             poles={knee: (pos[knee] + (pos[knee] - mid))[None]}, max_iterations=10)
            rot, pos = res.rotations[0], res.positions[0]
        return rot, pos
