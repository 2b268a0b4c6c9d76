"""FBX import with the ``ufbx`` bindings (0.0.5): skeleton, bind pose, skinned meshes,
materials and every animation stack.

* ``load(path, animation=None, fps=None) -> Motion``: one animation stack (name or index,
  default the first) evaluated at ``fps`` (default: the file's frame rate), or the rest
  pose as a 1-frame motion when the file has no animation.
* ``load_character(path) -> Character``, ``animation_names(path)``, ``info(path)``.
  Texture coordinates follow glTF's convention (origin at the image's top-left corner),
  so one texture lookup serves both formats.

ufbx converts the file to metres, right-handed Y up (``target_unit_meters=1``,
``target_axes=right_handed_y_up``, ``space_conversion=MODIFY_GEOMETRY``, so local
translations and vertices are in metres, not a scaled root).

Joints are the skeleton nodes (bone / limb-node attributes) plus every skin cluster's
bone node, in depth-first order; non-joint ancestors (``Armature``, a scaled ``Dog``
group) are folded into the joints' transforms. The bind pose is taken from the skin
clusters' bind matrices (``bind_to_world``), then the file's bind pose, then the
parent's bind pose times the node's rest local transform.

Memory safety: the ufbx 0.0.5 bindings hand out cached wrapper objects without
owning a reference; if one is garbage-collected while the scene is still used, the
process can crash or return wrong parent links. Every wrapper obtained from a scene is
therefore appended to a ``keep`` list that lives as long as the scene, lists are walked
by index (never ``for x in scene.nodes``), and everything is copied to NumPy arrays
before the scene is released. Conversely no wrapper may outlive its scene: all of them
are created inside one :func:`_with_session` call and die before the scene is freed.
Even so the cyclic garbage collector could still crash on a wrapper later, so the scene
is read in a forked child process that sends back plain NumPy data and exits without
freeing anything (see :func:`_with_session`).
"""
from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath

import numpy as np

from kinema.errors import FormatError, KinemaError, LimitError, MissingFileError
from kinema.io import scene_graph as sg
from kinema.io.character import Character, Mesh
from kinema.io.external import read_inside
from kinema.io.skinning import pack_influences, transform_normals, transform_points
from kinema.io.validate import check_character, check_fps, check_motion
from kinema.limits import DEFAULT, Limits
from kinema.motion import Motion, Skeleton

#: Longest animation accepted, in output frames.
MAX_FRAMES = 1_000_000


# --------------------------------------------------------------------------- ufbx session
class _Session:
    """An open ufbx scene plus strong references to every wrapper taken from it."""

    def __init__(self, path: Path):
        import ufbx

        self.ufbx = ufbx
        self.path = path
        self.keep: list = []
        if not path.exists():
            raise MissingFileError("no such file", path)
        if not path.is_file():
            raise FormatError("not a regular file", path)
        try:
            self.scene = ufbx.load_file(
                str(path), target_axes=ufbx.axes_right_handed_y_up, target_unit_meters=1.0,
                space_conversion=ufbx.SpaceConversion.MODIFY_GEOMETRY,
                generate_missing_normals=True)
        except ufbx.UfbxError as e:
            raise FormatError(f"ufbx cannot read the file ({type(e).__name__}: {e})", path) from None
        except (OSError, ValueError, RuntimeError) as e:
            raise FormatError(f"cannot read the file ({type(e).__name__}: {e})", path) from None
        self.keep.append(self.scene)

    def k(self, obj):
        """Keep ``obj`` (a ufbx wrapper) alive as long as the session; returns it."""
        if obj is not None:
            self.keep.append(obj)
        return obj

    def items(self, lst) -> list:
        """The elements of a ufbx list, fetched by index and kept alive."""
        self.k(lst)
        return [self.k(lst[i]) for i in range(len(lst))]

    def close(self) -> None:
        """Release the wrappers, then the scene; the session must not be used afterwards.

        No wrapper may outlive this call: a live wrapper of a freed scene crashes the
        next garbage collection (its traversal reads the freed scene).
        """
        self.keep.clear()
        self.scene = None


def _matrix(m) -> np.ndarray:
    """4x4 float64 from a ufbx Matrix (columns c0..c3)."""
    out = np.eye(4)
    out[:3, 0], out[:3, 1], out[:3, 2], out[:3, 3] = m.c0, m.c1, m.c2, m.c3
    return out


# --------------------------------------------------------------------------- snapshot
@dataclass
class _Snapshot:
    """Everything kinema needs from an FBX scene, as plain Python / NumPy data."""

    names: list[str]
    parents: list[int]                  # node -> parent node, -1 for the scene root's children
    order: list[int]
    rest_local: np.ndarray              # (N, 4, 4) node_to_parent
    rest_world: np.ndarray              # (N, 4, 4) node_to_world
    joint_nodes: list[int]
    joint_parents: np.ndarray
    joint_names: list[str]
    bind_world: np.ndarray              # (J, 4, 4) full bind matrices (with scale)
    animations: list[str]
    anim_ranges: list[tuple[float, float]]
    fps: float
    meshes: list[dict] = field(default_factory=list)
    anim_local: dict = field(default_factory=dict)   # stack index -> (times, (F, N, 4, 4))


def _snapshot(s: _Session, meshes: bool, animation: int | None, fps: float | None,
              textures: bool) -> _Snapshot:
    scene = s.scene
    nodes = s.items(scene.nodes)
    root = s.k(scene.root_node)
    root_id = root.element_id
    index = {n.element_id: i for i, n in enumerate(nodes) if n.element_id != root_id}
    # compact node list without the scene root
    node_ids = [n.element_id for n in nodes if n.element_id != root_id]
    local_index = {eid: i for i, eid in enumerate(node_ids)}
    wrappers = [nodes[index[eid]] for eid in node_ids]
    names = [n.name for n in wrappers]
    parents = []
    for n in wrappers:
        p = s.k(n.parent)
        parents.append(-1 if p is None or p.element_id not in local_index else local_index[p.element_id])
    try:
        order = sg.depth_first(parents)
    except ValueError as e:
        raise FormatError(str(e), s.path) from None
    rest_local = np.stack([_matrix(n.node_to_parent) for n in wrappers]) if wrappers else np.zeros((0, 4, 4))
    rest_world = np.stack([_matrix(n.node_to_world) for n in wrappers]) if wrappers else np.zeros((0, 4, 4))

    # skeleton: bone attributes + cluster bone nodes
    is_joint = set()
    for i, n in enumerate(wrappers):
        if s.k(n.bone) is not None:
            is_joint.add(i)
    clusters = s.items(scene.skin_clusters)
    cluster_bind = {}
    for c in clusters:
        b = s.k(c.bone_node)
        if b is not None and b.element_id in local_index:
            j = local_index[b.element_id]
            is_joint.add(j)
            cluster_bind.setdefault(j, _matrix(c.bind_to_world))
    if not is_joint:
        raise FormatError("file has no skeleton (no bones, limb nodes or skin clusters)", s.path)
    joint_nodes, joint_parents = sg.joint_tree(parents, sorted(is_joint))
    joint_names = sg.unique_names([names[v] for v in joint_nodes])

    pose_bind = {}
    for pose in s.items(scene.poses):
        if not pose.is_bind_pose:
            continue
        for bp in s.items(pose.bone_poses):
            b = s.k(bp.bone_node)
            if b is not None and b.element_id in local_index:
                pose_bind.setdefault(local_index[b.element_id], _matrix(bp.bone_to_world))
    # bind world per node, parents first: cluster > bind pose > parent's bind @ rest local
    node_bind: dict[int, np.ndarray] = {}
    for v in order:
        if v in cluster_bind:
            node_bind[v] = cluster_bind[v]
        elif v in pose_bind:
            node_bind[v] = pose_bind[v]
        else:
            p = parents[v]
            node_bind[v] = rest_local[v] if p < 0 else node_bind[p] @ rest_local[v]
    bind_world = np.stack([node_bind[v] for v in joint_nodes])

    stacks = s.items(scene.anim_stacks)
    animations = sg.unique_names([st.name for st in stacks], prefix="animation")
    ranges = [(float(st.time_begin), float(st.time_end)) for st in stacks]
    settings = s.k(scene.settings)
    file_fps = float(settings.frames_per_second) if settings.frames_per_second > 0 else 30.0
    snap = _Snapshot(names, parents, order, rest_local, rest_world, joint_nodes, joint_parents,
                     joint_names, bind_world, animations, ranges, file_fps)
    if animation is not None:
        snap.anim_local[animation] = _sample_stack(s, wrappers, stacks[animation], fps or file_fps,
                                                   ranges[animation], parents, joint_nodes, rest_local)
    if meshes:
        snap.meshes = _mesh_data(s, local_index, textures)
    return snap


def _sample_stack(s: _Session, wrappers, stack, fps: float, time_range, parents, joint_nodes,
                  rest_local: np.ndarray):
    """Local matrices (F, N, 4, 4) of the joints and their ancestors over a stack
    (``evaluate_transform`` for nodes the stack animates, ``rest_local`` for the others)."""
    ufbx = s.ufbx
    anim = s.k(stack.anim)
    begin, end = time_range
    frames = max(0.0, end - begin) * fps
    if not frames < MAX_FRAMES:
        raise FormatError(f"animation stack {stack.name!r} spans {end - begin:g} s: {frames:.3g} "
                          f"frames at {fps:g} fps is more than {MAX_FRAMES}", s.path)
    n = int(np.floor(frames + 1e-6)) + 1
    if n * len(wrappers) * 16 > DEFAULT.max_motion_values:
        raise LimitError(f"animation stack {stack.name!r}: {n} frames x {len(wrappers)} nodes x 16 matrix "
                         f"values, over {DEFAULT.max_motion_values}", s.path, "max_motion_values")
    times = begin + np.arange(n) / fps
    needed = set(joint_nodes)
    for j in joint_nodes:
        needed.update(sg.ancestors(j, parents))
    layers = s.items(stack.layers)
    local = np.zeros((n, len(wrappers), 4, 4))
    local[:] = rest_local
    for v in sorted(needed):
        node = wrappers[v]
        if not any(len(s.k(ufbx.find_anim_props(layer, node))) for layer in layers):
            continue          # not animated by this stack: its rest local transform holds
        values = [ufbx.evaluate_transform(anim, node, float(time)) for time in times]
        t = np.array([x.translation for x in values], np.float64)
        xyzw = np.array([x.rotation for x in values], np.float64)
        sc = np.array([x.scale for x in values], np.float64)
        local[:, v] = sg.trs_matrix(t, xyzw[:, [3, 0, 1, 2]], sc)
    return times, local


def _vertex_attr(s: _Session, attr, dims: int):
    """(values (K, dims), indices (C,)) of a ufbx vertex attribute, or None when absent."""
    s.k(attr)
    if attr is None or not attr.exists:
        return None
    values = np.array(s.k(attr.values), np.float64).reshape(-1, dims)
    indices = np.array(s.k(attr.indices), np.int64)
    return values, indices


def _external_texture(s: _Session, tex) -> bytes:
    """Bytes of a texture file the FBX refers to, read only inside the FBX's folder.

    FBX files usually store the author's absolute path; only its file name is tried, next
    to the FBX, after the relative names (:mod:`kinema.io.external` refuses anything that
    resolves outside the folder, non-regular files and files over the size limit). An
    unreadable texture leaves the mesh untextured (b"")."""
    names = [tex.relative_filename, tex.filename]
    if tex.absolute_filename:
        names.append(PureWindowsPath(tex.absolute_filename).name)
    for name in names:
        if not name:
            continue
        try:
            return read_inside(str(name), s.path.parent, s.path, "texture", DEFAULT.max_external_bytes)
        except FormatError:
            continue
    return b""


def _texture_pixels(s: _Session, tex) -> np.ndarray | None:
    import imageio.v3 as iio

    if tex is None:
        return None
    data = bytes(tex.content)
    if not data:
        data = _external_texture(s, tex)
    if not data:
        return None
    try:
        px = np.asarray(iio.imread(data))
    except Exception:  # undecodable or unsupported image: the mesh still loads, untextured
        return None
    if px.ndim == 2:
        px = np.repeat(px[..., None], 3, -1)
    if px.dtype != np.uint8:
        px = np.clip(px.astype(np.float64) / (np.iinfo(px.dtype).max if px.dtype.kind in "iu" else 1.0) * 255,
                     0, 255).astype(np.uint8)
    if px.shape[-1] == 3:
        px = np.concatenate([px, np.full(px.shape[:2] + (1,), 255, np.uint8)], -1)
    return np.ascontiguousarray(px)


def _material(s: _Session, mat, textures: bool, cache: dict):
    color = np.array([0.8, 0.8, 0.8, 1.0], np.float32)
    if mat is None:
        return color, None
    pbr = s.k(s.k(mat.pbr).base_color)
    fbx = s.k(s.k(mat.fbx).diffuse_color)
    tex = None
    for m in (pbr, fbx):
        if m.has_value:
            v = m.value_vec4
            color = np.array([v.x, v.y, v.z, 1.0 if m.value_components < 4 else v.w], np.float32)
            break
    for m in (pbr, fbx):
        t = s.k(m.texture)
        if t is not None:
            tex = t
            break
    pixels = None
    if textures and tex is not None:
        key = tex.element_id
        if key not in cache:
            cache[key] = _texture_pixels(s, tex)
        pixels = cache[key]
    return color, pixels


def _mesh_data(s: _Session, local_index: dict, textures: bool) -> list[dict]:
    """Triangulated, de-indexed mesh parts with per-vertex skin influences (by node)."""
    out = []
    cache: dict = {}
    for mesh in s.items(s.scene.meshes):
        pos = _vertex_attr(s, mesh.vertex_position, 3)
        if pos is None:
            continue
        nrm = _vertex_attr(s, mesh.vertex_normal, 3)
        uv = _vertex_attr(s, mesh.vertex_uv, 2)
        faces = np.array(s.k(mesh.faces), np.int64).reshape(-1, 2)
        if faces.size == 0:
            continue
        # fan triangulation of every face with >= 3 corners
        counts = np.maximum(faces[:, 1] - 2, 0)
        face_of_tri = np.repeat(np.arange(len(faces)), counts)
        k = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        begin = faces[face_of_tri, 0]
        corners = np.stack([begin, begin + k + 1, begin + k + 2], 1)        # (T, 3) corner ids
        n_corners = len(pos[1])
        if corners.size and corners.max() >= n_corners:
            raise FormatError(f"mesh {mesh.name!r}: face corner out of range", s.path)
        # a vertex is a unique (control point, normal, uv) by value: FBX often stores
        # normals/uvs per corner, which would otherwise split every corner
        keys = [pos[1][:, None]]
        if nrm is not None:
            keys.append(np.round(nrm[0][nrm[1]] * 1e5).astype(np.int64))
        if uv is not None:
            keys.append(np.round(uv[0][uv[1]] * 1e6).astype(np.int64))
        _, first, inverse = np.unique(np.concatenate(keys, 1), axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        vert_cp = pos[1][first]                                # control point per vertex
        positions = pos[0][vert_cp]
        normals = nrm[0][nrm[1][first]] if nrm is not None else None
        uvs = uv[0][uv[1][first]] if uv is not None else None
        if uvs is not None:
            uvs = np.stack([uvs[:, 0], 1.0 - uvs[:, 1]], 1)    # FBX v points up; glTF/kinema v points down
        triangles = inverse[corners]
        face_mat = np.array(s.k(mesh.face_material), np.int64) if len(mesh.face_material) else \
            np.zeros(len(faces), np.int64)
        tri_mat = face_mat[face_of_tri] if face_mat.size == len(faces) else np.zeros(len(triangles), np.int64)
        mats = s.items(mesh.materials)
        instances = s.items(mesh.instances)
        if not instances:
            continue
        inst = instances[0]
        geometry_to_world = _matrix(inst.geometry_to_world)
        skin = None
        deformers = s.items(mesh.skin_deformers)
        if deformers:
            d = deformers[0]
            num_cp = len(pos[0])
            infl_j, infl_w, cl_bind = [], [], []
            for c in s.items(d.clusters):
                b = s.k(c.bone_node)
                if b is None or b.element_id not in local_index:
                    continue
                verts = np.array(s.k(c.vertices), np.int64)
                weights = np.array(s.k(c.weights), np.float64)
                if verts.size != weights.size or (verts.size and verts.max() >= num_cp):
                    raise FormatError(f"skin cluster {c.name!r}: bad vertex indices", s.path)
                infl_j.append(np.full(verts.size, local_index[b.element_id]))
                infl_w.append(np.stack([verts.astype(np.float64), weights], 1))
                cl_bind.append((local_index[b.element_id], _matrix(c.bind_to_world) @ _matrix(c.geometry_to_bone)))
            if infl_j:
                node_of = np.concatenate(infl_j)
                vw = np.concatenate(infl_w)
                cp, w = vw[:, 0].astype(np.int64), vw[:, 1]
                order = np.lexsort((-w, cp))
                cp, w, node_of = cp[order], w[order], node_of[order]
                slot = np.arange(cp.size) - np.searchsorted(cp, cp)
                kmax = int(slot.max()) + 1 if slot.size else 1
                jj = np.zeros((num_cp, max(kmax, 4)), np.int64) - 1
                ww = np.zeros((num_cp, max(kmax, 4)))
                jj[cp, slot] = node_of
                ww[cp, slot] = w
                skin = {"nodes": jj[vert_cp], "weights": ww[vert_cp], "clusters": cl_bind}
        for mi in np.unique(tri_mat):
            tris = triangles[tri_mat == mi]
            used = np.unique(tris)
            remap = np.zeros(len(positions), np.int64)
            remap[used] = np.arange(used.size)
            color, tex = _material(s, mats[mi] if 0 <= mi < len(mats) else None, textures, cache)
            part = {"name": mesh.name or inst.name, "positions": positions[used],
                    "normals": None if normals is None else normals[used],
                    "uvs": None if uvs is None else uvs[used], "indices": remap[tris],
                    "geometry_to_world": geometry_to_world, "node": local_index.get(inst.element_id, -1),
                    "color": color, "texture": tex, "skin": None}
            if skin is not None:
                part["skin"] = {"nodes": skin["nodes"][used], "weights": skin["weights"][used],
                                "clusters": skin["clusters"]}
            out.append(part)
    return out


def _session_result(path, fn, close: bool = True):
    """Run ``fn(session)`` on a fresh session in this process and close it (unless
    ``close=False``, for a process about to exit), whatever happens.

    On an exception, the locals of the failed frames (which may hold ufbx wrappers) are
    cleared before the scene is freed, so a traceback kept by the caller holds no wrapper
    of a dead scene; unexpected errors on malformed data become FormatError.
    """
    s = _Session(Path(path))
    try:
        return fn(s)
    except KinemaError as e:
        traceback.clear_frames(e.__traceback__)
        raise
    except (s.ufbx.UfbxError, ValueError, IndexError, KeyError, TypeError, AttributeError,
            OverflowError, np.linalg.LinAlgError) as e:
        traceback.clear_frames(e.__traceback__)
        message = f"malformed FBX ({type(e).__name__}: {e})"
    except BaseException as e:
        traceback.clear_frames(e.__traceback__)
        raise
    finally:
        if close:
            s.close()
    raise FormatError(message, s.path)


def _child(conn, path, fn) -> None:
    """Forked worker: read the file, send plain data back, and leave without tearing down.

    The cyclic garbage collector is off for the child's short life and the scene is never
    closed: no ufbx wrapper is ever traversed or freed, they vanish with the process."""
    gc.disable()
    try:
        result = ("ok", _session_result(path, fn, close=False))
    except FormatError as e:
        result = ("format", e.message)
    except BaseException as e:  # noqa: BLE001 - reported to the parent as a FormatError
        result = ("error", f"{type(e).__name__}: {e}")
    try:
        conn.send(result)
    finally:
        conn.close()
        os._exit(0)


def _with_session(path, fn):
    """``fn(session)`` on the scene of ``path``, read in a forked child process.

    ufbx 0.0.5's wrappers keep no reference to their scene, and the cyclic garbage
    collector can walk one after its scene was freed: a segfault at a random later moment
    (seen in the test suite, and reproduced by loading FBX files with a low GC threshold).
    Holding every wrapper and freeing the scene last (``_Session``) is not enough, so the
    scene lives in a short-lived child that sends back plain NumPy data and exits without
    freeing anything. A crash there becomes a FormatError here, never a crash of the caller.
    Without ``fork`` (Windows, macOS spawn defaults) the file is read in this process.
    """
    if "fork" not in multiprocessing.get_all_start_methods():
        return _session_result(path, fn)
    # A forked reader that dies by a signal is tried again, then once in a freshly spawned
    # interpreter: the suite saw SIGSEGVs inside ufbx on flair.fbx in forked children (three
    # in a row once, in a long test process) that never reproduce in a loop of reads; a file
    # that really crashes the reader crashes every try and is reported.
    methods = ["fork"] * READ_ATTEMPTS + ["spawn"]
    for method in methods:
        kind, payload, code = _read_in_child(path, fn, method)
        if kind != "crash":
            break
    if kind == "ok":
        return payload
    if kind == "crash":
        raise FormatError(f"ufbx failed while reading the file (reader exit code {code}, "
                          f"{len(methods)} attempts)", path)
    if kind == "format":
        raise FormatError(payload, path)
    raise FormatError(f"cannot read the file ({payload})", path)


READ_ATTEMPTS = 3
#: Seconds a child reader may take to answer (the largest shared FBX reads in about 2 s).
READ_TIMEOUT_S = 120.0


def _read_in_child(path, fn, method: str = "fork") -> tuple[str, object, int | None]:
    """(kind, payload, exit code) of one read in a child process started by ``method``
    ("fork" or "spawn"; ``fn`` must then be picklable): kind "ok", "format", "error" or "crash"."""
    ctx = multiprocessing.get_context(method)
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, path, fn), daemon=True)
    proc.start()
    send.close()
    try:
        if receive.poll(READ_TIMEOUT_S):
            kind, payload = receive.recv()
        else:
            kind, payload = "error", f"the reader did not answer within {READ_TIMEOUT_S:g} s (hung?)"
            proc.kill()
    except EOFError:
        kind, payload = "crash", None
    finally:
        receive.close()
        proc.join(READ_TIMEOUT_S)
        if proc.exitcode is None:       # still running after its answer: never wait forever
            proc.kill()
            proc.join(5.0)
    return kind, payload, proc.exitcode


# --------------------------------------------------------------------------- conversion
def _skeleton(snap: _Snapshot) -> tuple[Skeleton, np.ndarray, np.ndarray]:
    rot, pos = sg.local_from_world(snap.bind_world[None], snap.joint_parents)
    return Skeleton(snap.joint_names, snap.joint_parents, pos[0]), rot[0], pos[0]


def _animated(s: _Session, stack) -> bool:
    """True when a stack has at least one animated value (Mixamo files carry an empty 'Take 001')."""
    return any(len(s.items(layer.anim_values)) > 0 for layer in s.items(stack.layers))


def _pick(snap_animations: list[str], animation, path, animated: list[bool] | None = None) -> int | None:
    if animation is None:
        if not snap_animations:
            return None
        return animated.index(True) if animated and any(animated) else 0
    if isinstance(animation, (int, np.integer)) and not isinstance(animation, bool):
        if not -len(snap_animations) <= animation < len(snap_animations):
            raise FormatError(f"animation index {animation} out of range; the file has "
                              f"{len(snap_animations)}: {snap_animations}", path)
        return int(animation) % len(snap_animations)
    if animation in snap_animations:
        return snap_animations.index(animation)
    raise FormatError(f"no animation {animation!r}; the file has {snap_animations}", path)


def _load(s: _Session, animation, fps):
    stacks = s.items(s.scene.anim_stacks)
    index = _pick(sg.unique_names([st.name for st in stacks], prefix="animation"), animation, s.path,
                  [_animated(s, st) for st in stacks])
    if fps is not None and not fps > 0:
        raise FormatError(f"fps must be positive, got {fps}", s.path)
    snap = _snapshot(s, meshes=False, animation=index, fps=fps, textures=False)
    skeleton, _, _ = _skeleton(snap)
    meta = {"source": str(s.path), "format": "fbx"}
    if index is None:
        world = snap.rest_world[snap.joint_nodes][None]
        rot, pos = sg.local_from_world(world, snap.joint_parents)
        return Motion(skeleton, float(fps or snap.fps), rot, pos, name=s.path.stem,
                      metadata={**meta, "animation": None, "bind_pose": True})
    _, local = snap.anim_local[index]
    needed = set(snap.joint_nodes)
    for j in snap.joint_nodes:
        needed.update(sg.ancestors(j, snap.parents))
    world = sg.world_matrices(local, snap.parents, [v for v in snap.order if v in needed])[:, snap.joint_nodes]
    rot, pos = sg.local_from_world(world, snap.joint_parents)
    name = snap.animations[index]
    return Motion(skeleton, float(fps or snap.fps), rot, pos, name=name,
                  metadata={**meta, "animation": name})


def _character(s: _Session, textures: bool) -> Character:
    snap = _snapshot(s, meshes=True, animation=None, fps=None, textures=textures)
    skeleton, rot, pos = _skeleton(snap)
    grot, gpos, _ = sg.rigid_from_matrices(snap.bind_world)
    rigid = sg.rigid_matrices(grot, gpos)
    inverse_bind = np.linalg.inv(rigid)
    joint_of_node = {v: j for j, v in enumerate(snap.joint_nodes)}
    assigned = np.zeros(len(snap.joint_nodes), bool)
    meshes: list[Mesh] = []
    parts = sorted(snap.meshes, key=lambda p: p["skin"] is None)   # skinned first (set IB)
    for part in parts:
        nv = len(part["positions"])
        normals = part["normals"] if part["normals"] is not None else np.tile([0.0, 1.0, 0.0], (nv, 1))
        if part["skin"] is not None:
            nodes_, w = part["skin"]["nodes"], part["skin"]["weights"]
            lookup = np.zeros(len(snap.names) + 1, np.int64)
            for node, jn in joint_of_node.items():
                lookup[node] = jn
            j = lookup[nodes_]                   # -1 (empty slot) reads the trailing 0
            joints, weights = pack_influences(j, np.where(nodes_ >= 0, w, 0.0), min_slots=4)
            total = np.bincount(joints.ravel(), weights.ravel().astype(np.float64), minlength=len(snap.joint_nodes))
            full = {}
            for node, m in part["skin"]["clusters"]:
                full.setdefault(joint_of_node[node], m)
            main = int(np.argmax(total))
            shape = full.get(main, part["geometry_to_world"])
            inv_shape = np.linalg.inv(shape)
            for jj, m in full.items():
                if total[jj] > 0 and not assigned[jj]:
                    # cluster bind_to_world @ geometry_to_bone, relative to the bind shape
                    inverse_bind[jj] = np.linalg.inv(rigid[jj]) @ m @ inv_shape
                    assigned[jj] = True
            positions = transform_points(shape, part["positions"])
            normals = transform_normals(shape, normals)
        else:
            anchor = part["node"]
            while anchor >= 0 and anchor not in joint_of_node:
                anchor = snap.parents[anchor]
            j = joint_of_node.get(anchor, 0)
            to_rest = np.linalg.inv(rigid[j] @ inverse_bind[j]) @ part["geometry_to_world"]
            positions = transform_points(to_rest, part["positions"])
            normals = transform_normals(to_rest, normals)
            joints = np.zeros((nv, 4), np.int32)
            joints[:, 0] = j
            weights = np.zeros((nv, 4), np.float32)
            weights[:, 0] = 1.0
        meshes.append(Mesh(name=part["name"], positions=positions.astype(np.float32),
                           normals=normals.astype(np.float32), indices=part["indices"].astype(np.uint32),
                           joints=joints.astype(np.int32), weights=weights.astype(np.float32),
                           uvs=None if part["uvs"] is None else part["uvs"].astype(np.float32),
                           base_color=part["color"], texture=part["texture"]))
    return Character(name=s.path.stem, skeleton=skeleton, bind_rotations=rot.astype(np.float32),
                     bind_positions=pos.astype(np.float32), inverse_bind=inverse_bind.astype(np.float32),
                     meshes=meshes, animations=snap.animations, source=s.path)


# --------------------------------------------------------------------------- public API
def load(path: str | Path, animation: str | int | None = None, fps: float | None = None,
         limits: Limits = DEFAULT, **options) -> Motion:
    """Load one animation stack of an FBX file as a :class:`Motion` (metres, Y up).

    Args:
        path: ``.fbx`` file (binary or ASCII).
        animation: stack name or index (default: the first stack that animates anything,
            else the first; the rest pose as a 1-frame motion when the file has none).
        fps: sampling rate (default: the file's frame rate).
        limits: frame-rate and size limits (:mod:`kinema.limits`).
    Raises:
        FormatError: unreadable file, no skeleton, unknown animation.
    """
    if options:
        raise TypeError(f"unknown options for FBX load: {sorted(options)}")
    if fps is not None:
        check_fps(fps, path, limits)
    return check_motion(_with_session(path, functools.partial(_load, animation=animation, fps=fps)),
                        path, limits)


def load_character(path: str | Path, textures: bool = True, limits: Limits = DEFAULT,
                   **options) -> Character:
    """Load the skinned character of an FBX file (triangulated meshes split by material)."""
    if options:
        raise TypeError(f"unknown options for FBX load_character: {sorted(options)}")
    return check_character(_with_session(path, functools.partial(_character, textures=textures)),
                           path, limits)


def animation_names(path: str | Path) -> list[str]:
    """Names of the file's animation stacks, in file order."""
    return _with_session(path, _animation_names)


def _animation_names(s: _Session) -> list[str]:
    return sg.unique_names([st.name for st in s.items(s.scene.anim_stacks)], prefix="animation")


def info(path: str | Path) -> dict:
    """Extra keys for ``kinema info``: animations, has_mesh, the file's frame rate and unit."""
    return _with_session(path, _info)


def _info(s: _Session) -> dict:
    snap = _snapshot(s, meshes=False, animation=None, fps=None, textures=False)
    settings = s.k(s.scene.settings)
    return {"animations": snap.animations, "has_mesh": len(s.items(s.scene.meshes)) > 0,
            "file_fps": snap.fps, "file_unit_meters": float(settings.original_unit_meters)}
