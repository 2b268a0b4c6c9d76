"""Cameras: view/projection matrices, projection of world points, and a camera rig with
orbit, third-person follow, fixed and free-fly modes that blends smoothly between them.

All matrices are NumPy ``(4, 4)`` float64, row-major, OpenGL clip conventions (right-handed
view space looking down -Z, clip z in [-w, w]); ``clip = projection @ view @ [x, y, z, 1]``.
Pixels count from the top-left corner of the image.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kinema.engine.protocols import InputFrame
from kinema.maths import angles
from kinema.motion.extent import figure_size, with_body

MODES = ("orbit", "follow", "fixed", "free")


def look_at(eye, target, up=(0.0, 1.0, 0.0)) -> np.ndarray:
    """(4, 4) view matrix placing ``eye`` at the origin looking at ``target``."""
    eye, target, up = (np.asarray(v, np.float64) for v in (eye, target, up))
    f = target - eye
    f = f / max(np.linalg.norm(f), 1e-12)
    s = np.cross(f, up)
    if np.linalg.norm(s) < 1e-9:  # looking straight along up: pick another up
        s = np.cross(f, np.array([0.0, 0.0, 1.0]))
    s = s / np.linalg.norm(s)
    u = np.cross(s, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def perspective(fovy_deg: float, aspect: float, near: float, far: float) -> np.ndarray:
    """(4, 4) perspective projection, vertical field of view in degrees."""
    t = 1.0 / np.tan(np.radians(fovy_deg) * 0.5)
    m = np.zeros((4, 4))
    m[0, 0] = t / aspect
    m[1, 1] = t
    m[2, 2] = (far + near) / (near - far)
    m[2, 3] = 2.0 * far * near / (near - far)
    m[3, 2] = -1.0
    return m


def orthographic(half_width: float, half_height: float, near: float, far: float) -> np.ndarray:
    """(4, 4) symmetric orthographic projection."""
    m = np.eye(4)
    m[0, 0] = 1.0 / half_width
    m[1, 1] = 1.0 / half_height
    m[2, 2] = -2.0 / (far - near)
    m[2, 3] = -(far + near) / (far - near)
    return m


def project(points, view_projection: np.ndarray, width: int, height: int):
    """Project world points to pixels.

    Args:
        points: (..., 3) world positions, metres.
        view_projection: (4, 4) ``projection @ view``.
        width, height: image size in pixels.

    Returns:
        (pixels (..., 2) float64 x right / y down from the top-left, depth (...,) NDC z in
        [-1, 1], visible (...,) bool: in front of the camera and inside the image).
    """
    p = np.asarray(points, np.float64)
    h = np.concatenate([p, np.ones(p.shape[:-1] + (1,))], axis=-1)
    c = h @ view_projection.T
    w = c[..., 3]
    safe = np.where(np.abs(w) < 1e-12, 1e-12, w)
    ndc = c[..., :3] / safe[..., None]
    px = np.stack([(ndc[..., 0] * 0.5 + 0.5) * width, (0.5 - ndc[..., 1] * 0.5) * height], axis=-1)
    visible = (w > 0) & (px[..., 0] >= 0) & (px[..., 0] < width) & (px[..., 1] >= 0) & (px[..., 1] < height)
    return px, ndc[..., 2], visible


def pixel_ray(pixel, view_projection: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """The world ray through a pixel: the inverse of :func:`project`.

    Args:
        pixel: (2,) x right / y down from the top-left, pixels.
        view_projection: (4, 4) ``projection @ view``; width, height: image size.
    Returns:
        (origin (3,) on the near plane, unit direction (3,) away from the camera).
    """
    x, y = float(pixel[0]), float(pixel[1])
    ndc = np.array([2.0 * x / width - 1.0, 1.0 - 2.0 * y / height])
    inv = np.linalg.inv(np.asarray(view_projection, np.float64))
    near = inv @ np.array([ndc[0], ndc[1], -1.0, 1.0])
    far = inv @ np.array([ndc[0], ndc[1], 1.0, 1.0])
    near, far = near[:3] / near[3], far[:3] / far[3]
    d = far - near
    return near, d / np.linalg.norm(d)


def ray_sphere(origin, direction, centre, radius: float) -> float | None:
    """Distance along the unit ray to its first hit with the sphere, or None on a miss
    (0 when the origin is inside it)."""
    o, d, c = (np.asarray(v, np.float64) for v in (origin, direction, centre))
    oc = o - c
    b = float(oc @ d)
    disc = b * b - float(oc @ oc) + radius * radius
    if disc < 0:
        return None
    t = -b - np.sqrt(disc)
    if t < 0:
        t = -b + np.sqrt(disc)
        return 0.0 if t >= 0 else None
    return float(t)


def ray_plane(origin, direction, point, normal) -> np.ndarray | None:
    """Where the ray meets the plane through ``point`` with ``normal`` (3,), or None when
    it runs parallel to it or the plane is behind."""
    o, d, p, n = (np.asarray(v, np.float64) for v in (origin, direction, point, normal))
    den = float(d @ n)
    if abs(den) < 1e-12:
        return None
    t = float((p - o) @ n) / den
    return None if t < 0 else o + t * d


@dataclass
class Camera:
    """A perspective camera.

    Attributes:
        position: (3,) eye position, metres.
        target: (3,) point looked at.
        up: (3,) up direction.
        fovy: vertical field of view, degrees.
        near, far: clip distances, metres.
    """

    position: np.ndarray = field(default_factory=lambda: np.array([3.0, 2.0, 5.0]))
    target: np.ndarray = field(default_factory=lambda: np.array([0.0, 1.0, 0.0]))
    up: np.ndarray = field(default_factory=lambda: np.array([0.0, 1.0, 0.0]))
    fovy: float = 45.0
    near: float = 0.05
    far: float = 200.0

    def view(self) -> np.ndarray:
        return look_at(self.position, self.target, self.up)

    def projection(self, aspect: float) -> np.ndarray:
        return perspective(self.fovy, aspect, self.near, self.far)

    def view_projection(self, aspect: float) -> np.ndarray:
        return self.projection(aspect) @ self.view()

    def copy(self) -> Camera:
        return Camera(self.position.copy(), self.target.copy(), self.up.copy(), self.fovy, self.near, self.far)


def _damp(current: np.ndarray, goal: np.ndarray, halflife: float, dt: float) -> np.ndarray:
    if halflife <= 0.0:
        return goal.copy()
    if dt <= 0.0:
        return current
    a = 1.0 - 0.5 ** (dt / halflife)
    return current + (goal - current) * a


class CameraRig:
    """Four camera modes and smooth blending between them.

    Each update computes the goal pose of the active mode and moves the current camera
    towards it with exponential damping (``halflife`` seconds); switching mode therefore
    glides from the old view to the new one. ``snap()`` jumps to the goal at once.

    Modes:
        orbit: around ``focus`` at ``distance``, angles ``yaw``/``pitch`` (radians); mouse
            drag rotates, wheel zooms.
        follow: third person behind ``focus`` along ``heading`` (radians about +Y, 0 = +Z),
            ``follow_distance`` back and ``follow_height`` up.
        fixed: ``fixed_position`` looking at ``fixed_target`` (or at the focus when None).
        free: free fly from ``free_position`` with ``free_yaw``/``free_pitch``; WASD/QE
            move, right mouse drag looks around, shift is faster.

    ``fovy`` (degrees), ``near`` and ``far`` (metres) apply to every mode.
    """

    def __init__(self, mode: str = "orbit", halflife: float = 0.15):
        self.mode = "orbit"
        self.set_mode(mode)
        self.halflife = float(halflife)
        self.focus = np.array([0.0, 0.9, 0.0])
        self.heading = 0.0
        self.yaw, self.pitch, self.distance = 0.6, 0.25, 4.5
        self.follow_distance, self.follow_height = 4.0, 1.0
        self.fixed_position = np.array([0.0, 1.5, 6.0])
        self.fixed_target: np.ndarray | None = None
        self.free_position = np.array([0.0, 1.6, 6.0])
        self.free_yaw, self.free_pitch = np.pi, -0.1
        self.free_speed = 3.0
        self.fovy = 45.0
        self.near, self.far = 0.05, 200.0
        self.camera = Camera()
        self.snap()

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown camera mode {mode!r}; one of {MODES}")
        if mode == "free" and self.mode != "free" and hasattr(self, "camera"):
            # start flying from where the camera is now
            self.free_position = self.camera.position.copy()
            d = self.camera.target - self.camera.position
            self.free_yaw = float(angles.yaw(d))
            self.free_pitch = float(np.arcsin(np.clip(d[1] / max(np.linalg.norm(d), 1e-9), -1, 1)))
        self.mode = mode

    def set_fixed(self, position, target) -> None:
        """Fixed mode from ``position`` towards ``target``."""
        self.fixed_position = np.asarray(position, np.float64).copy()
        self.fixed_target = None if target is None else np.asarray(target, np.float64).copy()
        self.set_mode("fixed")

    def set_focus(self, position, heading: float | None = None) -> None:
        """The point the orbit/follow cameras look at (e.g. the character's hips), metres."""
        self.focus = np.asarray(position, np.float64).copy()
        if heading is not None:
            self.heading = float(heading)

    def goal(self) -> Camera:
        """The camera pose the active mode asks for (before blending)."""
        if self.mode == "orbit":
            cp = np.cos(self.pitch)
            d = np.array([np.sin(self.yaw) * cp, np.sin(self.pitch), np.cos(self.yaw) * cp])
            pos, tgt = self.focus + d * self.distance, self.focus
        elif self.mode == "follow":
            back = -np.array([np.sin(self.heading), 0.0, np.cos(self.heading)])
            pos = self.focus + back * self.follow_distance + np.array([0.0, self.follow_height, 0.0])
            tgt = self.focus
        elif self.mode == "fixed":
            pos = self.fixed_position
            tgt = self.focus if self.fixed_target is None else self.fixed_target
        else:
            pos = self.free_position
            tgt = pos + self._free_forward()
        return Camera(np.array(pos, np.float64), np.array(tgt, np.float64), fovy=self.fovy,
                      near=self.near, far=self.far)

    def _free_forward(self) -> np.ndarray:
        cp = np.cos(self.free_pitch)
        return np.array([np.sin(self.free_yaw) * cp, np.sin(self.free_pitch), np.cos(self.free_yaw) * cp])

    def snap(self) -> Camera:
        """Jump to the goal pose (no blending)."""
        self.camera = self.goal()
        return self.camera

    def update(self, dt: float) -> Camera:
        """Blend the current camera towards the goal over ``dt`` seconds."""
        g = self.goal()
        self.camera.position = _damp(self.camera.position, g.position, self.halflife, dt)
        self.camera.target = _damp(self.camera.target, g.target, self.halflife, dt)
        self.camera.fovy, self.camera.near, self.camera.far = g.fovy, g.near, g.far
        return self.camera

    def handle_input(self, inp: InputFrame, dt: float) -> None:
        """Mouse/keyboard controls for the active mode (call once per frame)."""
        delta = np.asarray(inp.mouse_delta, np.float64)
        if self.mode == "orbit":
            if "left" in inp.mouse_buttons or "right" in inp.mouse_buttons:
                self.yaw -= delta[0] * 0.006
                self.pitch = float(np.clip(self.pitch + delta[1] * 0.006, -1.45, 1.45))
            if inp.mouse_wheel:
                self.distance = float(np.clip(self.distance * (0.9 ** inp.mouse_wheel), 0.5, 100.0))
        elif self.mode == "follow":
            if inp.mouse_wheel:
                self.follow_distance = float(np.clip(self.follow_distance * (0.9 ** inp.mouse_wheel), 0.5, 50.0))
        elif self.mode == "free":
            if "right" in inp.mouse_buttons:
                self.free_yaw -= delta[0] * 0.004
                self.free_pitch = float(np.clip(self.free_pitch - delta[1] * 0.004, -1.5, 1.5))
            fwd = self._free_forward()
            right = np.cross(fwd, [0.0, 1.0, 0.0])
            right /= max(np.linalg.norm(right), 1e-9)
            move = np.zeros(3)
            keys = inp.keys_down
            move += fwd * (("w" in keys) - ("s" in keys))
            move += right * (("d" in keys) - ("a" in keys))
            move[1] += ("e" in keys) - ("q" in keys)
            speed = self.free_speed * (3.0 if "left_shift" in keys else 1.0)
            self.free_position = self.free_position + move * speed * dt


def fit_rig(rig: CameraRig, size: float) -> None:
    """Scale ``rig`` to a figure ``size`` metres tall (:func:`kinema.motion.extent.figure_size`):
    orbit and follow distances, follow height and clip planes grow with it (a person, a
    dog, the Khronos fox some 100 units long), so the default camera frames it."""
    size = float(size)
    rig.distance = float(np.clip(2.6 * size, 0.5, 5000.0))
    rig.follow_distance, rig.follow_height = float(np.clip(2.2 * size, 0.5, 4000.0)), 0.5 * size
    rig.near = 0.05 * max(1.0, size / 2.0)
    rig.far = float(max(200.0, 60.0 * size))


class SubjectCamera:
    """The default camera of a demo: placed from the subject's bounds on the first frame,
    then following it.

    Call :meth:`frame` once per drawn frame with the world joint positions of every figure
    the camera should keep in view. The first call sizes the rig from their bounds
    (:func:`fit_rig`), sets the orbit angles and jumps there; every call moves the rig's
    focus to the middle of the figures' bodies (joints that stay with the body: a root
    left at the origin does not count) along the floor, which the rig follows with its
    damping. The user's
    orbit, zoom and mode changes in a window are kept after the first frame.

    Args:
        yaw, pitch: orbit angles (radians; yaw about +Y from +Z, pitch up).
        mode: the rig mode to start in: "orbit" (the user may turn and zoom it), "follow"
            (behind the rig's heading) or "fixed" (the same offset from the subject, moved
            along with it; no mouse controls).
        scale: multiplies the fitted distances (> 1 backs off, e.g. for several figures).
        refit: size the rig from the bounds on every call, not only the first (a crowd
            that spreads out; the user's zoom is then not kept).
        halflife: the rig's damping (seconds) from the first frame: short, so a running
            figure is not left behind (its lag is speed x halflife / ln 2: 4 cm at 0.5 m/s,
            20 cm at 3 m/s); the focus height stays that of the first frame (no bobbing).
    """

    def __init__(self, yaw: float = 0.6, pitch: float = 0.25, mode: str = "orbit", scale: float = 1.0,
                 refit: bool = False, halflife: float = 0.05) -> None:
        self.yaw, self.pitch, self.mode = float(yaw), float(pitch), mode
        self.scale, self.refit, self.halflife = float(scale), bool(refit), float(halflife)
        self.placed = False
        self.height = 0.0   # the focus height, held from the first frame (the view does not bob with the gait)

    @staticmethod
    def bounds(*figures) -> tuple[np.ndarray, np.ndarray]:
        """(lo (3,), hi (3,)) of the body joints of ``figures`` (each (..., J, 3) world
        positions, metres)."""

        pts = []
        for f in figures:
            g = np.asarray(f, np.float64)
            g = g.reshape(-1, g.shape[-2], 3) if g.ndim >= 2 else g.reshape(1, 1, 3)
            keep = with_body(g) if g.shape[1] > 2 else np.ones(g.shape[:2], bool)
            pts.append(g[keep])
        p = np.concatenate(pts)
        return p.min(0), p.max(0)

    def frame(self, rig, *figures, box=None) -> np.ndarray:
        """Keep ``figures`` (each (..., J, 3) world joint positions) in view of ``rig`` (a
        :class:`CameraRig`; anything without ``set_focus`` is left alone); ``box`` (3,): the
        sides (m) to size the camera from instead of the joints' bounds (a character's
        mesh, which reaches past its joints). Returns the focus (3,)."""

        lo, hi = self.bounds(*figures)
        focus = (lo + hi) / 2.0
        if not hasattr(rig, "set_focus"):
            return focus
        if not self.placed or self.refit:
            self.height = float(focus[1])
        focus[1] = self.height
        if not self.placed or self.refit:
            # the box, or the top's height above the floor (y = 0) for a figure crouched or in the air
            sides = hi - lo if box is None else np.asarray(box, np.float64)
            fit_rig(rig, max(figure_size(sides), float(hi[1])) * self.scale)
        rig.set_focus(focus)
        if self.mode == "fixed":   # no orbit controls (the mouse is the demo's): the same offset, moved along
            cp = np.cos(self.pitch)
            d = np.array([np.sin(self.yaw) * cp, np.sin(self.pitch), np.cos(self.yaw) * cp])
            rig.fixed_position, rig.fixed_target = focus + d * rig.distance, focus
        if not self.placed:
            rig.yaw, rig.pitch, rig.halflife = self.yaw, self.pitch, self.halflife
            rig.set_mode(self.mode)
            rig.snap()
            self.placed = True
        return focus


def frame_subject(renderer, view: SubjectCamera | None, *figures, box=None, **options) -> SubjectCamera:
    """Keep ``figures`` (each (..., J, 3) world joint positions, metres) in view of the
    renderer's camera rig: ``view`` (a :class:`SubjectCamera`, made with ``options`` when
    None) frames them (``box``: see :meth:`SubjectCamera.frame`); returns it, to pass back
    next frame. A renderer without a camera rig is left alone."""
    view = view if view is not None else SubjectCamera(**options)
    rig = getattr(renderer, "camera", None)
    if rig is not None:
        view.frame(rig, *figures, box=box)
    return view
