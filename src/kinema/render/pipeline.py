"""The frame pipeline: shadow map, forward scene pass, SSAO, bloom, composite, FXAA.

Passes (each switchable through :class:`Effects`):

1. shadow: depth of characters and solids from the sun into a square depth texture; the
   light's orthographic box follows the focus point (snapped to shadow texels so the
   shadow does not shimmer while it moves);
2. scene: floor (procedural checker), skinned characters, debug solids and wide lines into
   a colour + depth target at full resolution, lit by sun (shadowed) and sky;
3. SSAO from the depth buffer at ``ssao_scale`` of the resolution, then a 4x4 blur there;
4. bloom: bright pass and separable blur at ``bloom_scale`` of the resolution;
5. one full-resolution final pass: FXAA on the scene colour, x AO (bilinear upsampled),
   + bloom, into the output target.

With SSAO, bloom and FXAA all off, the scene pass renders straight into the output.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pyray as rl

from kinema.render import gl
from kinema.render.camera import look_at, orthographic
from kinema.render.characters import MAX_BONES


@dataclass
class Effects:
    """Switches and settings of the pipeline.

    Attributes:
        shadows, ssao, bloom, fxaa, floor: turn each part on or off.
        ssao_samples: hemisphere samples per AO pixel (1..16).
        lod_pixels: characters whose bounding sphere is smaller than this on screen (pixels)
            are drawn from their simplified mesh (0: always the full mesh).
        shadow_size: shadow map edge in texels.
        shadow_soft: 4 filtered shadow compares per pixel (smooth edges) instead of 1.
        shadow_extent: half edge (m) of the square the shadow map covers around the focus.
        ssao_scale, bloom_scale: resolution of SSAO / bloom relative to the frame.
        ssao_radius (m), ssao_strength, bloom_threshold, bloom_strength: effect settings.
        sky_color, ground_color: background and ambient colours (RGB in [0, 1]).
        checker_a, checker_b, checker_size (m): floor tiles.
        sun_direction: unit vector towards the sun; sun_color its intensity (RGB).
        fog_distance: distance (m) where the floor has faded into the sky (0: no fade).
    """

    shadows: bool = True
    ssao: bool = True
    bloom: bool = True
    fxaa: bool = True
    floor: bool = True
    shadow_size: int = 1024
    shadow_soft: bool = True
    shadow_extent: float = 5.0
    ssao_scale: float = 0.5
    ssao_samples: int = 8
    lod_pixels: float = 120.0
    ssao_radius: float = 0.3
    ssao_strength: float = 1.1
    bloom_scale: float = 0.25
    bloom_threshold: float = 0.92
    bloom_strength: float = 0.3
    sky_color: tuple[float, float, float] = (0.70, 0.80, 0.90)
    ground_color: tuple[float, float, float] = (0.45, 0.42, 0.40)
    checker_a: tuple[float, float, float] = (0.78, 0.78, 0.76)
    checker_b: tuple[float, float, float] = (0.62, 0.62, 0.62)
    checker_size: float = 1.0
    sun_direction: tuple[float, float, float] = (0.35, 0.85, 0.40)
    sun_color: tuple[float, float, float] = (1.05, 1.0, 0.92)
    fog_distance: float = 60.0


@dataclass
class CharacterDraw:
    """One skinned character instance queued for this frame."""

    model: object            # CharacterModel
    bones: np.ndarray        # (J, 4, 4) float32 skinning matrices
    tint: np.ndarray         # (4,) RGBA multiplier


@dataclass
class FrameQueue:
    """Everything to draw in one frame (filled between begin_frame and begin_gui)."""

    characters: list[CharacterDraw] = field(default_factory=list)
    lines: dict | None = None
    solids: dict | None = None


class Pipeline:
    """GPU resources and passes; needs an open GL context (see :class:`kinema.render.Renderer`)."""

    def __init__(self, width: int, height: int, effects: Effects):
        self.effects = effects
        self._shaders: dict[tuple, gl.Shader] = {}
        # compile the common variants now so shader errors show at open()
        for variant in ((), ("SHADOWS", "SOFT_SHADOWS"), ("CHECKER", "SHADOWS", "SOFT_SHADOWS"),
                        ("SKINNED", "SHADOWS", "SOFT_SHADOWS"), ("VERTEX_COLOR", "SHADOWS", "SOFT_SHADOWS")):
            self.shader("scene.vs", "scene.fs", variant)
        self.shader("scene.vs", "depth.fs", ("SKINNED",))
        for name in ("lines", "ssao", "blur", "blur4", "bright", "final"):
            vs = "lines.vs" if name == "lines" else "fullscreen.vs"
            self.shader(vs, f"{name}.fs", ())
        self.empty_vao = int(rl.rl_load_vertex_array())
        quad = np.array([[-1, 0, -1], [1, 0, 1], [1, 0, -1], [-1, 0, -1], [-1, 0, 1], [1, 0, 1]], np.float32)
        self.floor = gl.VertexArray({gl.ATTR_POSITION: quad, gl.ATTR_NORMAL: np.tile([[0, 1, 0]], (6, 1)).astype(np.float32),
                                     gl.ATTR_TEXCOORD: np.zeros((6, 2), np.float32)})
        self.lines = None
        self.solids = None
        self.shadow_fb: gl.Framebuffer | None = None
        self.timings: dict[str, float] = {}
        self.sync_timings = False   # glFinish after each pass so timings include GPU work
        self.width = self.height = 0
        self._targets: list[gl.Framebuffer] = []
        self.resize(width, height)

    # ------------------------------------------------------------------ targets
    def resize(self, width: int, height: int) -> None:
        """(Re)create the frame-sized targets."""
        for t in self._targets:
            t.unload()
        self.width, self.height = int(width), int(height)
        w, h = self.width, self.height
        self.output = gl.Framebuffer(w, h, color=True, depth=True)
        self.scene = gl.Framebuffer(w, h, color=True, depth=True)
        sw, sh = _scaled(w, h, self.effects.ssao_scale)
        self.ao = gl.Framebuffer(sw, sh, color=True, depth=False)
        self.ao_tmp = gl.Framebuffer(sw, sh, color=True, depth=False)
        bw, bh = _scaled(w, h, self.effects.bloom_scale)
        self.bloom = gl.Framebuffer(bw, bh, color=True, depth=False)
        self.bloom_tmp = gl.Framebuffer(bw, bh, color=True, depth=False)
        self._targets = [self.output, self.scene, self.ao, self.ao_tmp, self.bloom, self.bloom_tmp]
        self._scales = (self.effects.ssao_scale, self.effects.bloom_scale)

    def shader(self, vs: str, fs: str, flags: tuple[str, ...] = ()) -> gl.Shader:
        """The program for ``vs``+``fs`` with ``flags`` defined, compiled on first use.

        Options are compile-time defines because software GL executes both sides of
        uniform branches; each variant only pays for what it uses."""
        key = (vs, fs, tuple(sorted(flags)))
        sh = self._shaders.get(key)
        if sh is None:
            defines = dict.fromkeys(key[2], 1)
            if "SKINNED" in defines:
                defines["MAX_BONES"] = MAX_BONES
            sh = self._shaders[key] = gl.Shader(vs, fs, defines)
        return sh

    def _shadow_flags(self) -> tuple[str, ...]:
        e = self.effects
        return (("SHADOWS", "SOFT_SHADOWS") if e.shadow_soft else ("SHADOWS",)) if e.shadows else ()

    def _ensure_shadow_map(self) -> None:
        size = int(self.effects.shadow_size)
        if self.shadow_fb is None or self.shadow_fb.width != size:
            if self.shadow_fb is not None:
                self.shadow_fb.unload()
            self.shadow_fb = gl.Framebuffer(size, size, color=False, depth=True)
            gl.enable_depth_compare(self.shadow_fb.depth)

    def unload(self) -> None:
        for t in self._targets:
            t.unload()
        self._targets = []
        if self.shadow_fb is not None:
            self.shadow_fb.unload()
        for va in (self.floor, self.lines, self.solids):
            if va is not None:
                va.unload()
        for s in self._shaders.values():
            s.unload()
        self._shaders = {}
        rl.rl_unload_vertex_array(self.empty_vao)

    # ------------------------------------------------------------------ frame
    def light_matrix(self, focus: np.ndarray) -> np.ndarray:
        """(4, 4) sun view-projection covering ``shadow_extent`` around ``focus``, texel-snapped."""
        e = self.effects
        sun = np.asarray(e.sun_direction, np.float64)
        sun = sun / np.linalg.norm(sun)
        dist = 30.0
        rot = look_at(sun, np.zeros(3))[:3, :3]
        # snap the focus to whole shadow texels in light space so shadow edges stay put
        texel = 2.0 * e.shadow_extent / max(int(e.shadow_size), 1)
        f = rot @ np.asarray(focus, np.float64)
        f[:2] = np.round(f[:2] / texel) * texel
        centre = rot.T @ f
        view = look_at(centre + sun * dist, centre)
        proj = orthographic(e.shadow_extent, e.shadow_extent, 0.1, 2.0 * dist)
        return proj @ view

    def render(self, queue: FrameQueue, view: np.ndarray, projection: np.ndarray,
               camera_position: np.ndarray, focus: np.ndarray) -> None:
        """Run every enabled pass; the result lands in ``self.output``."""
        e = self.effects
        if self._scales != (e.ssao_scale, e.bloom_scale):
            self.resize(self.width, self.height)
        sync = gl.libgl().glFinish if self.sync_timings else (lambda: None)
        rl.rl_draw_render_batch_active()
        sync()
        t0 = time.perf_counter()
        self._upload(queue)
        light = self.light_matrix(focus)
        if e.shadows:
            self._shadow_pass(queue, light)
        sync()
        t1 = time.perf_counter()
        post = e.ssao or e.bloom or e.fxaa
        target = self.scene if post else self.output
        self._pixels_per_metre_at_1m = projection[1, 1] * target.height / 2.0
        self._scene_pass(queue, target, projection @ view, camera_position, light)
        sync()
        t2 = time.perf_counter()
        if post:
            self._post(projection)
        rl.rl_disable_framebuffer()
        rl.rl_viewport(0, 0, rl.get_render_width(), rl.get_render_height())
        sync()
        t3 = time.perf_counter()
        self.timings = {"shadow": t1 - t0, "scene": t2 - t1, "post": t3 - t2}
        if post and self.sync_timings:
            self.timings.update(self.post_timings)

    def _upload(self, queue: FrameQueue) -> None:
        if queue.lines is not None:
            attrs = {gl.ATTR_POSITION: queue.lines["start"], gl.ATTR_OTHER: queue.lines["end"],
                     gl.ATTR_NORMAL: queue.lines["params"], gl.ATTR_COLOR: queue.lines["color"]}
            if self.lines is None:
                self.lines = gl.VertexArray(attrs, dynamic=True)
            else:
                self.lines.update(attrs)
        elif self.lines is not None:
            self.lines.count = 0
        if queue.solids is not None:
            n = queue.solids["position"].shape[0]
            attrs = {gl.ATTR_POSITION: queue.solids["position"], gl.ATTR_NORMAL: queue.solids["normal"],
                     gl.ATTR_COLOR: queue.solids["color"], gl.ATTR_TEXCOORD: np.zeros((n, 2), np.float32)}
            if self.solids is None:
                self.solids = gl.VertexArray(attrs, dynamic=True)
            else:
                self.solids.update(attrs)
        elif self.solids is not None:
            self.solids.count = 0

    def _shadow_pass(self, queue: FrameQueue, light: np.ndarray) -> None:
        self._ensure_shadow_map()
        fb = self.shadow_fb
        fb.bind()
        rl.rl_clear_screen_buffers()
        rl.rl_enable_depth_test()
        rl.rl_disable_backface_culling()
        eye = np.eye(4)
        if queue.characters:
            s = self.shader("scene.vs", "depth.fs", ("SKINNED",))
            s.use()
            s.set_matrix("viewProj", light)
            s.set_matrix("model", eye)
            for c in queue.characters:
                s.set_matrices("boneMatrices", c.bones)
                for m in c.model.meshes:
                    _cull(m.cull)
                    m.shadow_vao.draw()
            _cull(False)
        if self.solids is not None and self.solids.count:
            s = self.shader("scene.vs", "depth.fs")
            s.use()
            s.set_matrix("viewProj", light)
            s.set_matrix("model", eye)
            self.solids.draw()
        rl.rl_disable_shader()

    def _set_lighting(self, s: gl.Shader, view_proj, camera_position, light) -> None:
        e = self.effects
        sun = np.asarray(e.sun_direction, np.float64)
        s.set_matrix("viewProj", view_proj)
        s.set_vec("sunDir", sun / np.linalg.norm(sun))
        s.set_vec("sunColor", e.sun_color)
        s.set_vec("skyColor", e.sky_color)
        s.set_vec("groundColor", e.ground_color)
        s.set_vec("cameraPos", camera_position)
        s.set_float("fogDistance", e.fog_distance if e.fog_distance > 0 else 1e9)
        s.set_vec("baseColor", (1.0, 1.0, 1.0, 1.0))
        if e.shadows and self.shadow_fb is not None:
            s.set_matrix("lightViewProj", light)
            s.set_float("shadowTexel", 1.0 / max(int(e.shadow_size), 1))
            s.set_float("shadowBias", 0.0015)
            s.set_texture("shadowMap", 1, self.shadow_fb.depth)

    def _scene_pass(self, queue: FrameQueue, target: gl.Framebuffer, view_proj, camera_position, light) -> None:
        e = self.effects
        target.bind()
        sky = np.clip(np.asarray(e.sky_color) * 255, 0, 255).astype(int)
        rl.rl_clear_color(int(sky[0]), int(sky[1]), int(sky[2]), 255)
        rl.rl_clear_screen_buffers()
        rl.rl_enable_depth_test()
        rl.rl_disable_backface_culling()
        eye = np.eye(4)
        sh = self._shadow_flags()
        if e.floor:
            # a large quad centred under the camera; tiles are in world space
            s = self.shader("scene.vs", "scene.fs", ("CHECKER",) + sh)
            s.use()
            self._set_lighting(s, view_proj, camera_position, light)
            half = max(150.0, 2.5 * e.fog_distance)     # reaches past the fog, for large figures too
            m = np.diag([half, 1.0, half, 1.0])
            m[0, 3], m[2, 3] = np.round(camera_position[0]), np.round(camera_position[2])
            s.set_matrix("model", m)
            s.set_float("checker", e.checker_size)
            s.set_vec("checkerA", e.checker_a)
            s.set_vec("checkerB", e.checker_b)
            self.floor.draw()
        # debug solids and procedural bodies
        if self.solids is not None and self.solids.count:
            s = self.shader("scene.vs", "scene.fs", ("VERTEX_COLOR",) + sh)
            s.use()
            self._set_lighting(s, view_proj, camera_position, light)
            s.set_matrix("model", eye)
            self.solids.draw()
        # skinned characters, untextured meshes first, then textured ones
        for textured in (False, True):
            draws = [(c, m) for c in queue.characters for m in c.model.meshes if bool(m.texture) == textured]
            if not draws:
                continue
            s = self.shader("scene.vs", "scene.fs", ("SKINNED",) + (("TEXTURE",) if textured else ()) + sh)
            s.use()
            self._set_lighting(s, view_proj, camera_position, light)
            s.set_matrix("model", eye)
            last = None
            for c, m in draws:
                if c is not last:
                    s.set_matrices("boneMatrices", c.bones)
                    last = c
                    small = self._on_screen_pixels(c, camera_position) < e.lod_pixels
                _cull(m.cull)
                s.set_vec("baseColor", m.base_color * c.tint)
                if textured:
                    s.set_texture("albedoMap", 0, m.texture)
                (m.shadow_vao if small else m.vao).draw()
            _cull(False)
        # wide lines and points, on top of solids but depth tested
        if self.lines is not None and self.lines.count:
            s = self.shader("lines.vs", "lines.fs")
            s.use()
            s.set_matrix("viewProj", view_proj)
            s.set_float("viewport", float(target.width), float(target.height))
            rl.rl_disable_depth_mask()   # tested, not written: SSAO must not see lines as walls
            self.lines.draw()
            rl.rl_enable_depth_mask()
        rl.rl_disable_shader()
        gl.unbind_textures(2)
        rl.rl_disable_depth_test()

    def _on_screen_pixels(self, draw: CharacterDraw, camera_position) -> float:
        """Diameter in pixels of a character's bounding sphere (for level of detail)."""
        d = float(np.linalg.norm(draw.model.world_centre(draw.bones) - camera_position))
        return 2.0 * draw.model.radius / max(d - draw.model.radius, 1e-3) * self._pixels_per_metre_at_1m

    def _fullscreen(self, shader: gl.Shader, target: gl.Framebuffer, textures: dict[str, int]) -> None:
        target.bind()
        shader.use()
        for slot, (name, tex) in enumerate(textures.items()):
            shader.set_texture(name, slot, tex)
        rl.rl_enable_vertex_array(self.empty_vao)
        rl.rl_draw_vertex_array(0, 3)
        rl.rl_disable_vertex_array()

    def _post(self, projection: np.ndarray) -> None:
        e = self.effects
        rl.rl_disable_depth_test()
        rl.rl_disable_color_blend()
        w, h = self.width, self.height
        sync = gl.libgl().glFinish if self.sync_timings else (lambda: None)
        t0 = time.perf_counter()
        if e.ssao:
            s = self.shader("fullscreen.vs", "ssao.fs")
            s.use()
            s.set_float("proj", projection[0, 0], projection[1, 1], projection[2, 2], projection[2, 3])
            s.set_float("radius", e.ssao_radius)
            s.set_float("strength", e.ssao_strength)
            s.set_int("samples", int(np.clip(e.ssao_samples, 1, 16)))
            # neighbours one AO pixel away: at reduced resolution a full-resolution step
            # can land on the centre texel again and break the normal
            s.set_float("texel", 1.0 / self.ao.width, 1.0 / self.ao.height)
            self._fullscreen(s, self.ao, {"depthMap": self.scene.depth})
            s = self.shader("fullscreen.vs", "blur4.fs")
            s.use()
            s.set_float("texel", 1.0 / self.ao.width, 1.0 / self.ao.height)
            self._fullscreen(s, self.ao_tmp, {"source": self.ao.color})
        sync()
        t1 = time.perf_counter()
        if e.bloom:
            s = self.shader("fullscreen.vs", "bright.fs")
            s.use()
            s.set_float("texel", 1.0 / w, 1.0 / h)
            s.set_float("threshold", e.bloom_threshold)
            self._fullscreen(s, self.bloom, {"source": self.scene.color})
            self._blur(self.bloom, self.bloom_tmp)
        sync()
        t2 = time.perf_counter()
        flags = tuple(f for f, on in (("FXAA", e.fxaa), ("AO", e.ssao), ("BLOOM", e.bloom)) if on)
        s = self.shader("fullscreen.vs", "final.fs", flags)
        s.use()
        s.set_float("texel", 1.0 / w, 1.0 / h)
        s.set_float("bloomStrength", e.bloom_strength)
        self._fullscreen(s, self.output, {"colorMap": self.scene.color, "aoMap": self.ao_tmp.color,
                                          "bloomMap": self.bloom.color})
        rl.rl_disable_shader()
        gl.unbind_textures(3)
        rl.rl_enable_color_blend()
        sync()
        self.post_timings = {"ssao": t1 - t0, "bloom": t2 - t1, "final (fxaa+composite)": time.perf_counter() - t2}

    def _blur(self, fb: gl.Framebuffer, tmp: gl.Framebuffer) -> None:
        s = self.shader("fullscreen.vs", "blur.fs")
        s.use()
        s.set_float("direction", 1.0 / fb.width, 0.0)
        self._fullscreen(s, tmp, {"source": fb.color})
        s.use()
        s.set_float("direction", 0.0, 1.0 / fb.height)
        self._fullscreen(s, fb, {"source": tmp.color})


def _cull(on: bool) -> None:
    """Back-face culling for closed, consistently wound meshes (skips half the triangles)."""
    if on:
        rl.rl_enable_backface_culling()
    else:
        rl.rl_disable_backface_culling()


def _scaled(w: int, h: int, scale: float) -> tuple[int, int]:
    return max(1, int(round(w * scale))), max(1, int(round(h * scale)))
