"""The browser viewer: a ``viser`` server showing clips (skinned characters, skeletons, root
trajectories, overlays) with GUI controls: play/pause, frame slider, speed, mirror, clip choice.

The browser skins the character on its GPU (three.js ``SkinnedMesh``): the server sends the
mesh and bind pose once per clip, then only joint world transforms per frame. Everything the
page needs ships inside the ``viser`` wheel, so it works without internet access.

Example::

    from kinema.serve import MotionViewer, ServedClip
    viewer = MotionViewer([ServedClip.load("walk.bvh", character="geno.glb")], port=8080)
    viewer.serve_forever()          # open http://localhost:8080
"""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from kinema.errors import KinemaError
from kinema.motion.extent import body_box, body_centre, figure_size
from kinema.serve.clip import ServedClip, bind_world, dense_weights


def _viser():
    try:
        import viser
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise KinemaError(f"kinema serve needs viser (pip install 'kinema[serve]'): {exc}") from exc
    return viser


class MotionViewer:
    """Serve ``clips`` to browsers on ``http://host:port``.

    Args:
        clips: one or more clips (:class:`~kinema.serve.clip.ServedClip` or live
            :class:`~kinema.serve.clip.LiveClip`); the GUI's "clip" dropdown chooses among them.
        host, port: where to listen (``127.0.0.1`` keeps it local; ``0.0.0.0`` serves a LAN).
        playing: start playing (else paused on frame 0).

    The state (``clip_index``, ``frame``, ``playing``, ``mirror``, ``speed``) can be changed from
    Python or from the browser's GUI; :meth:`tick` advances time and updates the scene.
    """

    def __init__(self, clips: Sequence[ServedClip], host: str = "127.0.0.1", port: int = 8080,
                 playing: bool = True) -> None:
        if not clips:
            raise KinemaError("kinema serve: nothing to show (no clips)")
        viser = _viser()
        self.clips = list(clips)
        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        self.port = self.server.get_port()
        self.clip_index, self.frame, self.time = 0, 0, 0.0
        self.playing, self.mirror, self.speed = bool(playing), False, 1.0
        self._lock = threading.RLock()
        self._meshes: list = []
        self._shown: tuple | None = None
        self._stop = threading.Event()
        self._accum = 0.0
        self._gui_added: set[int] = set()
        self._focus: np.ndarray | None = None
        scene = self.server.scene
        scene.set_up_direction("+y")
        scene.add_light_directional("/sun", intensity=2.0, wxyz=(0.88, -0.42, 0.2, 0.1), cast_shadow=False)
        scene.add_light_ambient("/ambient", intensity=0.6)
        self._build_gui()
        self._load_clip(0)
        focus, size = self.focus(), self.size()
        cam = self.server.initial_camera
        cam.look_at = tuple(float(v) for v in focus)
        cam.position = tuple(float(v) for v in focus + np.array([0.35, 0.3, 1.0]) / np.linalg.norm([0.35, 0.3, 1.0])
                             * 2.6 * size)
        cam.near, cam.far = 0.05 * max(1.0, size / 2.0), max(200.0, 60.0 * size)

    # ---------------------------------------------------------------- GUI
    def _build_gui(self) -> None:
        gui = self.server.gui
        gui.configure_theme(dark_mode=False, show_logo=False)
        with gui.add_folder("playback"):
            self.gui_clip = gui.add_dropdown("clip", tuple(c.name for c in self.clips), initial_value=self.clips[0].name)
            self.gui_play = gui.add_checkbox("playing", self.playing)
            self.gui_frame = gui.add_slider("frame", 0, max(1, self.clips[0].num_frames - 1), 1, 0)
            self.gui_speed = gui.add_slider("speed", 0.1, 3.0, 0.1, 1.0)
            self.gui_mirror = gui.add_checkbox("mirror", False)
        with gui.add_folder("show"):
            self.gui_mesh = gui.add_checkbox("character", True)
            self.gui_skeleton = gui.add_checkbox("skeleton", self.clips[0].character is None)
            self.gui_trajectory = gui.add_checkbox("trajectory", True)
            self.gui_follow = gui.add_checkbox("follow", True, hint="the camera moves with the character")
        self.gui_info = gui.add_markdown("")

        @self.gui_clip.on_update
        def _(_event) -> None:
            with self._lock:
                self._load_clip([c.name for c in self.clips].index(self.gui_clip.value))

        @self.gui_play.on_update
        def _(_event) -> None:
            self.playing = bool(self.gui_play.value)

        @self.gui_frame.on_update
        def _(_event) -> None:
            with self._lock:
                if int(self.gui_frame.value) != self.frame:
                    self.frame = int(self.gui_frame.value)
                    self.time = self.frame / self.clip.fps
                    self.show()

        @self.gui_speed.on_update
        def _(_event) -> None:
            self.speed = float(self.gui_speed.value)

        @self.gui_mirror.on_update
        def _(_event) -> None:
            with self._lock:
                self.mirror = bool(self.gui_mirror.value)
                self.show()

        for box in (self.gui_mesh, self.gui_skeleton, self.gui_trajectory):
            box.on_update(lambda _event: self.show(force=True))

    # ---------------------------------------------------------------- scene
    @property
    def clip(self) -> ServedClip:
        return self.clips[self.clip_index]

    def focus(self) -> np.ndarray:
        """(3,) centre of the shown body at the current frame (world, metres)."""
        _, pos, _ = self.clip.poses(self.mirror)
        f = int(np.clip(self.frame, 0, pos.shape[0] - 1))
        return body_centre(pos[f:f + 1])[0]

    def size(self) -> float:
        """Size (m) of the current clip's figure for the camera (:func:`figure_size`): its
        character's mesh, else its joints."""
        ch = self.clip.character
        if ch is not None and ch.has_mesh:
            lo, hi = ch.bounds()
            return figure_size(hi - lo)
        return figure_size(body_box(self.clip.poses()[1][0]))

    def _follow(self) -> None:
        """Move every browser's camera by how far the body moved (their own orbit kept)."""
        focus = self.focus()
        if self._focus is not None and self.gui_follow.value:
            delta = focus - self._focus
            if np.abs(delta).max() > 1e-6:
                for client in self.server.get_clients().values():
                    cam = client.camera
                    with client.atomic():
                        cam.position = tuple(float(v) for v in np.asarray(cam.position) + delta)
                        cam.look_at = tuple(float(v) for v in focus)
        self._focus = focus

    def _load_clip(self, index: int) -> None:
        """Replace the character meshes with clip ``index``'s and show its first frame."""
        for handle in self._meshes:
            handle.remove()
        self._meshes = []
        self.clip_index, self.frame, self.time = int(index), 0, 0.0
        clip = self.clip
        if getattr(clip, "live", False) and id(clip) not in self._gui_added:
            clip.add_gui(self.server.gui)
            self._gui_added.add(id(clip))
        if clip.character is not None and clip.character.has_mesh:
            rot, pos = bind_world(clip.character)
            j = clip.character.skeleton.num_joints
            for k, mesh in enumerate(clip.character.meshes):
                color = tuple(int(c) for c in clip.color)
                self._meshes.append(self.server.scene.add_mesh_skinned(
                    f"/character/mesh{k}", mesh.positions.astype(np.float32), mesh.indices.astype(np.uint32),
                    bone_wxyzs=rot, bone_positions=pos, skin_weights=dense_weights(mesh.joints, mesh.weights, j),
                    color=color, side="double", cast_shadow=False, receive_shadow=False))
        if self.gui_clip.value != clip.name:
            self.gui_clip.value = clip.name
        self.gui_frame.max = max(1, clip.num_frames - 1)
        self.gui_frame.value = 0
        self._shown = None
        k = max(1.0, self.size() / 2.0)       # floor tiles scale with the figure (a fox 100 units long)
        self.server.scene.add_grid("/floor", width=20.0 * k, height=20.0 * k, plane="xz", cell_size=0.5 * k,
                                   section_size=1.0 * k)
        self._focus = None
        self.show()

    def show(self, force: bool = False) -> None:
        """Send the current frame (bone transforms, skeleton, trajectory, overlays) to the browsers."""
        with self._lock:
            key = (self.clip_index, self.frame, self.mirror, self.gui_mesh.value, self.gui_skeleton.value,
                   self.gui_trajectory.value)
            if key == self._shown and not force:
                return
            self._shown = key
            clip, f, mirror = self.clip, self.frame, self.mirror
            scene = self.server.scene
            rot, pos, _ = clip.poses(mirror)
            with self.server.atomic():
                for handle in self._meshes:
                    handle.visible = bool(self.gui_mesh.value)
                    for b, bone in enumerate(handle.bones):
                        bone.wxyz = rot[f, b]
                        bone.position = pos[f, b]
                stick = clip.character is None or not clip.character.has_mesh
                if self.gui_skeleton.value or stick:
                    color = (40, 40, 40) if not stick else tuple(int(c) for c in clip.color)
                    scene.add_line_segments("/skeleton", clip.bones(f, mirror), color,
                                            thickness=0.05 if stick else 0.015)
                else:
                    scene.add_line_segments("/skeleton", np.zeros((0, 2, 3), np.float32), (0, 0, 0), visible=False)
                traj = clip.trajectory(f, mirror) if self.gui_trajectory.value else np.zeros((0, 2, 3), np.float32)
                scene.add_line_segments("/trajectory", traj, (40, 110, 230), thickness=0.03, visible=len(traj) > 0)
                for name, (segments, rgb) in clip.extras.items():
                    seg = np.asarray(segments[min(f, len(segments) - 1)], np.float32)
                    if mirror:
                        seg = seg * np.float32([-1, 1, 1])
                    scene.add_line_segments(f"/extras/{name}", seg, tuple(int(c) for c in rgb), thickness=0.03)
                self._follow()
                if self.gui_frame.value != f:
                    self.gui_frame.value = f
                self.gui_info.content = (f"**{clip.name}**  frame {f + 1}/{clip.num_frames} "
                                         f"({clip.fps:g} fps){'  mirrored' if mirror else ''}")

    def tick(self, dt: float) -> None:
        """Advance ``dt`` seconds of playback (looping) when playing and update the scene;
        a live clip computes its new frames."""
        with self._lock:
            if getattr(self.clip, "live", False):
                if self.playing:
                    self._accum += dt * self.speed
                    stepped = False
                    while self._accum >= 1.0 / self.clip.fps:
                        self._accum -= 1.0 / self.clip.fps
                        self.clip.step()
                        stepped = True
                    if stepped:
                        self.show(force=True)
                return
            if self.playing:
                self.time = (self.time + dt * self.speed) % max(self.clip.num_frames / self.clip.fps, 1e-6)
                self.frame = int(self.time * self.clip.fps) % self.clip.num_frames
            self.show()

    def serve_forever(self, seconds: float | None = None, rate: float = 30.0) -> None:
        """Play in real time at ``rate`` updates/s until :meth:`stop`, Ctrl-C or ``seconds`` pass."""
        start = last = time.perf_counter()
        try:
            while not self._stop.is_set():
                now = time.perf_counter()
                if seconds is not None and now - start >= seconds:
                    break
                self.tick(now - last)
                last = now
                self._stop.wait(max(0.0, 1.0 / rate - (time.perf_counter() - now)))
        except KeyboardInterrupt:
            pass

    def stop(self) -> None:
        """End :meth:`serve_forever` (from another thread) and close the server."""
        self._stop.set()
        self.server.stop()
