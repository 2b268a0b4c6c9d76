"""Thin OpenGL helpers on top of raylib's rlgl: shaders, framebuffers, vertex arrays.

raylib owns the context; these helpers only use ``pyray.rl_*`` calls, plus ``glGetError``,
``glReadPixels`` and ``glPixelStorei`` from the process' libGL (through ctypes) because
pyray does not expose them. Matrices are NumPy row-major ``(4, 4)`` float32 in the maths
convention (``clip = P @ V @ world``); uploading handles the transposition.
"""
from __future__ import annotations

import ctypes
import functools
from importlib import resources

import numpy as np
import pyray as rl

from kinema.errors import RenderError  # noqa: F401 - re-exported: kinema.render.gl.RenderError

GL_NO_ERROR = 0
GL_RGB = 0x1907
GL_RGBA = 0x1908
GL_UNSIGNED_BYTE = 0x1401
GL_PACK_ALIGNMENT = 0x0D05
GL_FRAMEBUFFER = 0x8D40
GL_RENDERER = 0x1F01
GL_VERSION = 0x1F02
GL_TEXTURE_2D = 0x0DE1
GL_TEXTURE_MIN_FILTER = 0x2801
GL_TEXTURE_MAG_FILTER = 0x2800
GL_LINEAR = 0x2601
GL_LEQUAL = 0x0203
GL_TEXTURE_COMPARE_MODE = 0x884C
GL_TEXTURE_COMPARE_FUNC = 0x884D
GL_COMPARE_REF_TO_TEXTURE = 0x884E

# Fixed attribute locations shared by every vertex shader (``layout(location = N)``).
ATTR_POSITION = 0
ATTR_TEXCOORD = 1
ATTR_NORMAL = 2
ATTR_COLOR = 3
ATTR_OTHER = 4       # line shader: the segment end point
ATTR_BONE_INDICES = 7
ATTR_BONE_WEIGHTS = 8


class _GL:
    """The few GL entry points pyray lacks, resolved for the current context through
    ``glfwGetProcAddress`` (GLX on X11, OSMesa on GLFW's null platform)."""

    _SIGNATURES = {
        "glGetError": (ctypes.c_uint, []),
        "glGetString": (ctypes.c_char_p, [ctypes.c_uint]),
        "glReadPixels": (None, [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]),
        "glPixelStorei": (None, [ctypes.c_uint, ctypes.c_int]),
        "glBindTexture": (None, [ctypes.c_uint, ctypes.c_uint]),
        "glTexParameteri": (None, [ctypes.c_uint, ctypes.c_uint, ctypes.c_int]),
        "glFinish": (None, []),
    }

    def __init__(self) -> None:
        for name, (restype, argtypes) in self._SIGNATURES.items():
            addr = int(rl.ffi.cast("uintptr_t", rl.glfw_get_proc_address(name)))
            if addr == 0:
                raise RenderError(f"OpenGL function {name} not available in this context")
            setattr(self, name, ctypes.CFUNCTYPE(restype, *argtypes)(addr))


@functools.lru_cache(maxsize=4)
def _gl_for_platform(platform: int) -> _GL:
    return _GL()


def libgl() -> _GL:
    """GL functions of the current context (needs an open renderer)."""
    return _gl_for_platform(int(rl.glfw_get_platform()))


def forget_context() -> None:
    """Drop the cached GL function pointers; call when a context is destroyed.

    A driver may be unloaded with its last context and come back at other addresses, so
    pointers from a closed context must never be used with the next one (a second
    ``Renderer.open`` in one process crashed in ``glGetError`` otherwise).
    """
    _gl_for_platform.cache_clear()


def enable_depth_compare(texture_id: int) -> None:
    """Make a depth texture a shadow sampler target (``sampler2DShadow``, bilinear PCF)."""
    gl = libgl()
    gl.glBindTexture(GL_TEXTURE_2D, texture_id)
    gl.glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_COMPARE_MODE, GL_COMPARE_REF_TO_TEXTURE)
    gl.glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_COMPARE_FUNC, GL_LEQUAL)
    gl.glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR)
    gl.glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR)
    gl.glBindTexture(GL_TEXTURE_2D, 0)


def gl_errors() -> list[int]:
    """Drain and return the pending OpenGL error codes (empty when all is well)."""
    out = []
    for _ in range(32):
        code = libgl().glGetError()
        if code == GL_NO_ERROR:
            break
        out.append(int(code))
    return out


def gl_info() -> dict[str, str]:
    """Renderer and version strings of the current context."""
    gl = libgl()
    return {"renderer": (gl.glGetString(GL_RENDERER) or b"").decode(),
            "version": (gl.glGetString(GL_VERSION) or b"").decode()}


# ----------------------------------------------------------------------------- uploads

def _float_ptr(a: np.ndarray):
    return rl.ffi.cast("float *", rl.ffi.from_buffer(a))


def _ptr(a: np.ndarray):
    """A ``void *`` to the data of a contiguous array (the array must outlive the call)."""
    return rl.ffi.cast("void *", rl.ffi.from_buffer(a))


def matrices_struct(m: np.ndarray):
    """(N, 4, 4) row-major float32 -> cffi ``Matrix[N]`` (raylib's struct is row-major in memory)."""
    m = np.ascontiguousarray(m, np.float32).reshape(-1, 16)
    buf = rl.ffi.new("Matrix[]", m.shape[0])
    rl.ffi.memmove(buf, rl.ffi.from_buffer(m), m.nbytes)
    return buf


class Shader:
    """A compiled program with cached uniform locations.

    Args:
        vs, fs: shader file names in ``kinema/render/shaders``.
        defines: ``{"NAME": value}`` inserted as ``#define`` after the ``#version`` line.
    """

    def __init__(self, vs: str, fs: str, defines: dict[str, object] | None = None):
        vs_code = _with_defines(load_source(vs), defines)
        fs_code = _with_defines(load_source(fs), defines)
        self.name = f"{vs}+{fs}"
        self.id = int(rl.rl_load_shader_program(vs_code, fs_code))
        if self.id == 0 or self.id == rl.rl_get_shader_id_default():
            raise RenderError(f"shader {self.name} ({defines or {}}) failed to compile or link")
        self._locs: dict[str, int] = {}
        self._samplers: dict[str, int] = {}

    def loc(self, name: str) -> int:
        if name not in self._locs:
            self._locs[name] = int(rl.rl_get_location_uniform(self.id, name))
        return self._locs[name]

    def use(self) -> None:
        rl.rl_enable_shader(self.id)

    def set_float(self, name: str, *values: float) -> None:
        loc = self.loc(name)
        if loc < 0:
            return
        kinds = (rl.RL_SHADER_UNIFORM_FLOAT, rl.RL_SHADER_UNIFORM_VEC2,
                 rl.RL_SHADER_UNIFORM_VEC3, rl.RL_SHADER_UNIFORM_VEC4)
        arr = rl.ffi.new("float[]", [float(v) for v in values])
        rl.rl_set_uniform(loc, arr, kinds[len(values) - 1], 1)

    def set_vec(self, name: str, v) -> None:
        self.set_float(name, *np.asarray(v, np.float64).ravel().tolist())

    def set_vec4_array(self, name: str, v: np.ndarray) -> None:
        loc = self.loc(name)
        if loc < 0:
            return
        v = np.ascontiguousarray(v, np.float32).reshape(-1, 4)
        rl.rl_set_uniform(loc, _float_ptr(v), rl.RL_SHADER_UNIFORM_VEC4, v.shape[0])

    def set_int(self, name: str, value: int) -> None:
        loc = self.loc(name)
        if loc >= 0:
            rl.rl_set_uniform(loc, rl.ffi.new("int *", int(value)), rl.RL_SHADER_UNIFORM_INT, 1)

    def set_matrix(self, name: str, m: np.ndarray) -> None:
        self.set_matrices(name, np.asarray(m)[None])

    def set_matrices(self, name: str, m: np.ndarray) -> None:
        loc = self.loc(name)
        if loc >= 0:
            m = np.asarray(m).reshape(-1, 4, 4)
            buf = matrices_struct(m)
            rl.rl_set_uniform_matrices(loc, rl.ffi.cast("Matrix *", buf), m.shape[0])

    def set_texture(self, name: str, slot: int, texture_id: int) -> None:
        """Bind ``texture_id`` to texture unit ``slot`` and point sampler ``name`` at it."""
        loc = self.loc(name)
        rl.rl_active_texture_slot(slot)
        rl.rl_enable_texture(texture_id)
        if loc >= 0:
            rl.rl_set_uniform(loc, rl.ffi.new("int *", slot), rl.RL_SHADER_UNIFORM_SAMPLER2D, 1)

    def unload(self) -> None:
        if self.id:
            rl.rl_unload_shader_program(self.id)
            self.id = 0


def load_source(name: str) -> str:
    """The text of a shader shipped in ``kinema/render/shaders``."""
    return resources.files("kinema.render").joinpath("shaders", name).read_text()


def _with_defines(code: str, defines: dict[str, object] | None) -> str:
    if not defines:
        return code
    lines = code.split("\n", 1)
    extra = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    return lines[0] + "\n" + extra + (lines[1] if len(lines) > 1 else "")


def unbind_textures(slots: int = 6) -> None:
    for s in range(slots - 1, -1, -1):
        rl.rl_active_texture_slot(s)
        rl.rl_disable_texture()


# ----------------------------------------------------------------------------- framebuffers

class Framebuffer:
    """An offscreen target: an RGBA8 colour texture and/or a depth texture.

    Args:
        width, height: pixels.
        color: attach an RGBA8 colour texture (bilinear, clamped).
        depth: attach a depth texture (sampled by later passes) when True.
    """

    def __init__(self, width: int, height: int, color: bool = True, depth: bool = True):
        self.width, self.height = int(width), int(height)
        self.id = int(rl.rl_load_framebuffer())
        if self.id == 0:
            raise RenderError("could not create a framebuffer (no GL context?)")
        rl.rl_enable_framebuffer(self.id)
        self.color = 0
        self.depth = 0
        if color:
            self.color = int(rl.rl_load_texture(rl.ffi.NULL, self.width, self.height,
                                                rl.RL_PIXELFORMAT_UNCOMPRESSED_R8G8B8A8, 1))
            for p, v in ((rl.RL_TEXTURE_MIN_FILTER, rl.RL_TEXTURE_FILTER_LINEAR),
                         (rl.RL_TEXTURE_MAG_FILTER, rl.RL_TEXTURE_FILTER_LINEAR),
                         (rl.RL_TEXTURE_WRAP_S, rl.RL_TEXTURE_WRAP_CLAMP),
                         (rl.RL_TEXTURE_WRAP_T, rl.RL_TEXTURE_WRAP_CLAMP)):
                rl.rl_texture_parameters(self.color, p, v)
            rl.rl_framebuffer_attach(self.id, self.color, rl.RL_ATTACHMENT_COLOR_CHANNEL0,
                                     rl.RL_ATTACHMENT_TEXTURE2D, 0)
        if depth:
            self.depth = int(rl.rl_load_texture_depth(self.width, self.height, False))
            for p, v in ((rl.RL_TEXTURE_WRAP_S, rl.RL_TEXTURE_WRAP_CLAMP),
                         (rl.RL_TEXTURE_WRAP_T, rl.RL_TEXTURE_WRAP_CLAMP)):
                rl.rl_texture_parameters(self.depth, p, v)
            rl.rl_framebuffer_attach(self.id, self.depth, rl.RL_ATTACHMENT_DEPTH,
                                     rl.RL_ATTACHMENT_TEXTURE2D, 0)
        ok = rl.rl_framebuffer_complete(self.id)
        rl.rl_disable_framebuffer()
        if not ok:
            raise RenderError(f"framebuffer {self.width}x{self.height} is incomplete")

    def bind(self) -> None:
        """Make this the draw target with a full viewport (flush raylib's batch before)."""
        rl.rl_enable_framebuffer(self.id)
        rl.rl_viewport(0, 0, self.width, self.height)

    def read_rgb(self) -> np.ndarray:
        """(H, W, 3) uint8 RGB of the colour attachment, top row first."""
        return read_pixels(self.id, self.width, self.height)

    def unload(self) -> None:
        if self.color:
            rl.rl_unload_texture(self.color)
        if self.depth:
            rl.rl_unload_texture(self.depth)
        if self.id:
            rl.rl_unload_framebuffer(self.id)
        self.id = self.color = self.depth = 0


def read_pixels(fbo_id: int, width: int, height: int) -> np.ndarray:
    """glReadPixels of framebuffer ``fbo_id`` as (H, W, 3) uint8, flipped to top row first."""
    rl.rl_draw_render_batch_active()
    rl.rl_enable_framebuffer(fbo_id)
    out = np.empty((height, width, 3), np.uint8)
    gl = libgl()
    gl.glPixelStorei(GL_PACK_ALIGNMENT, 1)
    gl.glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, out.ctypes.data)
    rl.rl_disable_framebuffer()
    return out[::-1].copy()


# ----------------------------------------------------------------------------- geometry on the GPU

class VertexArray:
    """A VAO with one float VBO per attribute and an optional uint16/uint32 index buffer.

    Args:
        attributes: ``{location: (N, C) float32 array}``.
        indices: (T, 3) triangle indices (uint16 when every index fits) or None.
        dynamic: buffers are re-uploaded often (:meth:`update`).
    """

    def __init__(self, attributes: dict[int, np.ndarray], indices: np.ndarray | None = None,
                 dynamic: bool = False):
        self.dynamic = dynamic
        self.vao = int(rl.rl_load_vertex_array())
        rl.rl_enable_vertex_array(self.vao)
        self.vbos: dict[int, int] = {}
        self.capacity = 0
        self.count = 0
        self.comps: dict[int, int] = {}
        for loc, data in attributes.items():
            data = np.ascontiguousarray(data, np.float32)
            self.comps[loc] = data.shape[1]
            vbo = int(rl.rl_load_vertex_buffer(_ptr(data), data.nbytes, dynamic))
            rl.rl_set_vertex_attribute(loc, data.shape[1], rl.RL_FLOAT, False, 0, 0)
            rl.rl_enable_vertex_attribute(loc)
            self.vbos[loc] = vbo
            self.capacity = self.count = data.shape[0]
        self.ebo = 0
        self.index_count = 0
        if indices is not None:
            idx = np.ascontiguousarray(indices, np.uint16).ravel()
            self.ebo = int(rl.rl_load_vertex_buffer_element(_ptr(idx), idx.nbytes, False))
            self.index_count = idx.size
        rl.rl_disable_vertex_array()

    def with_indices(self, indices: np.ndarray) -> VertexArray:
        """Another VAO over the same vertex buffers with its own (T, 3) uint16 triangle list
        (e.g. a simplified level of detail); it does not own the shared vertex buffers."""
        other = VertexArray.__new__(VertexArray)
        other.dynamic, other.capacity, other.count = False, self.capacity, self.count
        other.comps, other.vbos, other.shared = dict(self.comps), {}, True
        other.vao = int(rl.rl_load_vertex_array())
        rl.rl_enable_vertex_array(other.vao)
        for loc, vbo in self.vbos.items():
            rl.rl_enable_vertex_buffer(vbo)
            rl.rl_set_vertex_attribute(loc, self.comps[loc], rl.RL_FLOAT, False, 0, 0)
            rl.rl_enable_vertex_attribute(loc)
        idx = np.ascontiguousarray(indices, np.uint16).ravel()
        other.ebo = int(rl.rl_load_vertex_buffer_element(_ptr(idx), idx.nbytes, False))
        other.index_count = idx.size
        rl.rl_disable_vertex_array()
        return other

    def update(self, attributes: dict[int, np.ndarray]) -> None:
        """Replace the vertex data (grows the buffers when needed)."""
        n = next(iter(attributes.values())).shape[0]
        if n > self.capacity:
            rl.rl_enable_vertex_array(self.vao)
            cap = max(n, int(self.capacity * 1.5), 256)
            for loc, data in attributes.items():
                rl.rl_unload_vertex_buffer(self.vbos[loc])
                grown = np.zeros((cap, data.shape[1]), np.float32)
                grown[:n] = data
                self.vbos[loc] = int(rl.rl_load_vertex_buffer(_ptr(grown), grown.nbytes, True))
                rl.rl_set_vertex_attribute(loc, data.shape[1], rl.RL_FLOAT, False, 0, 0)
                rl.rl_enable_vertex_attribute(loc)
            rl.rl_disable_vertex_array()
            self.capacity = cap
        elif n > 0:
            for loc, data in attributes.items():
                data = np.ascontiguousarray(data, np.float32)
                rl.rl_update_vertex_buffer(self.vbos[loc], _ptr(data), data.nbytes, 0)
        self.count = n

    def draw(self) -> None:
        """Draw the triangles (indexed when an index buffer is present)."""
        if (self.ebo and self.index_count == 0) or (not self.ebo and self.count == 0):
            return
        rl.rl_enable_vertex_array(self.vao)
        if self.ebo:
            rl.rl_draw_vertex_array_elements(0, self.index_count, rl.ffi.NULL)
        else:
            rl.rl_draw_vertex_array(0, self.count)
        rl.rl_disable_vertex_array()

    def unload(self) -> None:
        if not getattr(self, "shared", False):
            for vbo in self.vbos.values():
                rl.rl_unload_vertex_buffer(vbo)
        if self.ebo:
            rl.rl_unload_vertex_buffer(self.ebo)
        if self.vao:
            rl.rl_unload_vertex_array(self.vao)
        self.vbos, self.ebo, self.vao = {}, 0, 0


def load_texture_rgba(image: np.ndarray) -> int:
    """Upload an (H, W, 4) uint8 RGBA image (top row first) as a mipmapped, repeating texture."""
    img = np.ascontiguousarray(image, np.uint8)
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise RenderError(f"texture must be (H, W, 3|4) uint8, got {img.shape}")
    if img.shape[2] == 3:
        img = np.concatenate([img, np.full(img.shape[:2] + (1,), 255, np.uint8)], axis=2)
    h, w = img.shape[:2]
    tex = int(rl.rl_load_texture(_ptr(img), w, h, rl.RL_PIXELFORMAT_UNCOMPRESSED_R8G8B8A8, 1))
    for p, v in ((rl.RL_TEXTURE_MIN_FILTER, rl.RL_TEXTURE_FILTER_LINEAR),
                 (rl.RL_TEXTURE_MAG_FILTER, rl.RL_TEXTURE_FILTER_LINEAR),
                 (rl.RL_TEXTURE_WRAP_S, rl.RL_TEXTURE_WRAP_REPEAT),
                 (rl.RL_TEXTURE_WRAP_T, rl.RL_TEXTURE_WRAP_REPEAT)):
        rl.rl_texture_parameters(tex, p, v)
    return tex
