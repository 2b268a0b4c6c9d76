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
        shadow_size: shadow map edge in texels.
        shadow_soft: 4 filtered shadow compares per pixel (smooth edges) instead of 1.
        shadow_extent: half edge (m) of the square the shadow map covers around the focus.
        ssao_scale, bloom_scale: resolution of SSAO / bloom relative to the frame.
        ssao_radius (m), ssao_strength, bloom_threshold, bloom_strength: effect settings.
        sky_color, ground_color: background and ambient colours (RGB in [0, 1]).
        checker_a, checker_b, checker_size (m): floor tiles.
        sun_direction: unit vector towards the sun; sun_color its intensity (RGB).
        fog_distance: distance (m) where the floor has faded into the sky (0: no fog).
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
        self.scene_shader = gl.Shader("scene.vs", "scene.fs")
        self.skinned_shader = gl.Shader("scene.vs", "scene.fs", {"SKINNED": 1, "MAX_BONES": MAX_BONES})
        self.depth_shader = gl.Shader("scene.vs", "depth.fs")
        self.depth_skinned_shader = gl.Shader("scene.vs", "depth.fs", {"SKINNED": 1, "MAX_BONES": MAX_BONES})
        self.line_shader = gl.Shader("lines.vs", "lines.fs")
        self.ssao_shader = gl.Shader("fullscreen.vs", "ssao.fs")
        self.blur_shader = gl.Shader("fullscreen.vs", "blur.fs")
        self.blur4_shader = gl.Shader("fullscreen.vs", "blur4.fs")
        self.bright_shader = gl.Shader("fullscreen.vs", "bright.fs")
        self.final_shader = gl.Shader("fullscreen.vs", "final.fs")
        self.empty_vao = int(rl.rl_load_vertex_array())
        quad = np.array([[-1, 0, -1], [1, 0, -1], [1, 0, 1], [-1, 0, -1], [1, 0, 1], [-1, 0, 1]], np.float32)
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
        for s in (self.scene_shader, self.skinned_shader, self.depth_shader, self.depth_skinned_shader,
                  self.line_shader, self.ssao_shader, self.blur_shader, self.blur4_shader,
                  self.bright_shader, self.final_shader):
            s.unload()
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
            s = self.depth_skinned_shader
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
            s = self.depth_shader
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
        s.set_float("fogDistance", e.fog_distance)
        s.set_float("shadowsOn", 1.0 if e.shadows else 0.0)
        s.set_matrix("lightViewProj", light)
        s.set_float("shadowTexel", 1.0 / max(int(e.shadow_size), 1))
        s.set_float("shadowBias", 0.0015)
        s.set_float("shadowSoft", 1.0 if e.shadow_soft else 0.0)
        s.set_float("checker", 0.0)
        s.set_float("unlit", 0.0)
        s.set_float("useTexture", 0.0)
        s.set_float("useVertexColor", 0.0)
        s.set_vec("baseColor", (1.0, 1.0, 1.0, 1.0))
        if e.shadows and self.shadow_fb is not None:
            s.set_texture("shadowMap", 1, self.shadow_fb.depth)
        else:
            s.set_texture("shadowMap", 1, 0)

    def _scene_pass(self, queue: FrameQueue, target: gl.Framebuffer, view_proj, camera_position, light) -> None:
        e = self.effects
        target.bind()
        sky = np.clip(np.asarray(e.sky_color) * 255, 0, 255).astype(int)
        rl.rl_clear_color(int(sky[0]), int(sky[1]), int(sky[2]), 255)
        rl.rl_clear_screen_buffers()
        rl.rl_enable_depth_test()
        rl.rl_disable_backface_culling()
        eye = np.eye(4)
        # floor
        s = self.scene_shader
        s.use()
        self._set_lighting(s, view_proj, camera_position, light)
        if e.floor:
            # a large quad centred under the camera; tiles are in world space
            m = np.diag([150.0, 1.0, 150.0, 1.0])
            m[0, 3], m[2, 3] = np.round(camera_position[0]), np.round(camera_position[2])
            s.set_matrix("model", m)
            s.set_float("checker", e.checker_size)
            s.set_vec("checkerA", e.checker_a)
            s.set_vec("checkerB", e.checker_b)
            self.floor.draw()
            s.set_float("checker", 0.0)
        # debug solids and procedural bodies
        if self.solids is not None and self.solids.count:
            s.set_matrix("model", eye)
            s.set_float("useVertexColor", 1.0)
            self.solids.draw()
            s.set_float("useVertexColor", 0.0)
        # skinned characters
        if queue.characters:
            s = self.skinned_shader
            s.use()
            self._set_lighting(s, view_proj, camera_position, light)
            s.set_matrix("model", eye)
            for c in queue.characters:
                s.set_matrices("boneMatrices", c.bones)
                for m in c.model.meshes:
                    _cull(m.cull)
                    s.set_vec("baseColor", m.base_color * c.tint)
                    if m.texture:
                        s.set_texture("albedoMap", 0, m.texture)
                        s.set_float("useTexture", 1.0)
                    else:
                        s.set_float("useTexture", 0.0)
                    m.vao.draw()
            _cull(False)
        # wide lines and points, on top of solids but depth tested
        if self.lines is not None and self.lines.count:
            s = self.line_shader
            s.use()
            s.set_matrix("viewProj", view_proj)
            s.set_float("viewport", float(target.width), float(target.height))
            self.lines.draw()
        rl.rl_disable_shader()
        gl.unbind_textures(2)
        rl.rl_disable_depth_test()

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
            s = self.ssao_shader
            s.use()
            s.set_matrix("projection", projection)
            s.set_matrix("invProjection", np.linalg.inv(projection))
            s.set_float("radius", e.ssao_radius)
            s.set_float("strength", e.ssao_strength)
            s.set_int("samples", int(np.clip(e.ssao_samples, 1, 16)))
            s.set_float("texel", 1.0 / w, 1.0 / h)
            self._fullscreen(s, self.ao, {"depthMap": self.scene.depth})
            s = self.blur4_shader
            s.use()
            s.set_float("texel", 1.0 / self.ao.width, 1.0 / self.ao.height)
            self._fullscreen(s, self.ao_tmp, {"source": self.ao.color})
        sync()
        t1 = time.perf_counter()
        if e.bloom:
            s = self.bright_shader
            s.use()
            s.set_float("texel", 1.0 / w, 1.0 / h)
            s.set_float("threshold", e.bloom_threshold)
            self._fullscreen(s, self.bloom, {"source": self.scene.color})
            self._blur(self.bloom, self.bloom_tmp)
        sync()
        t2 = time.perf_counter()
        s = self.final_shader
        s.use()
        s.set_float("texel", 1.0 / w, 1.0 / h)
        s.set_float("fxaaOn", 1.0 if e.fxaa else 0.0)
        s.set_float("aoOn", 1.0 if e.ssao else 0.0)
        s.set_float("bloomOn", 1.0 if e.bloom else 0.0)
        s.set_float("bloomStrength", e.bloom_strength)
        self._fullscreen(s, self.output, {"colorMap": self.scene.color, "aoMap": self.ao_tmp.color,
                                          "bloomMap": self.bloom.color})
        rl.rl_disable_shader()
        gl.unbind_textures(3)
        rl.rl_enable_color_blend()
        sync()
        self.post_timings = {"ssao": t1 - t0, "bloom": t2 - t1, "final (fxaa+composite)": time.perf_counter() - t2}

    def _blur(self, fb: gl.Framebuffer, tmp: gl.Framebuffer) -> None:
        s = self.blur_shader
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
