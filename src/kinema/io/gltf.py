"""glTF 2.0 / GLB import (and export through :mod:`kinema.io.gltf_export`).

* ``load(path, animation=None, fps=None) -> Motion``: one animation (by name or index;
  default the first), resampled to ``fps`` (default: the source's apparent rate), or the
  rest pose as a 1-frame motion when the file has no animation.
* ``load_character(path) -> Character``: skeleton with bind pose, skinned meshes
  (several primitives, up to 8 influences, joint indices remapped to the skeleton),
  base colour and texture, animation names.
* ``animation_names(path)``, ``info(path)`` (``animations``, ``has_mesh``, ...).
* ``save(motion, path)``: a GLB with the skeleton and the motion as one animation.

Joints are the skins' joints (union over skins) when the file has a skin, else every
node. They are ordered depth-first so parents come first; non-joint nodes between
joints or above the root (e.g. an ``Armature`` node with scale 0.01 and a rotation) are
folded into the joints' transforms, and scale is removed, so world joint positions are
right and local transforms are rigid. glTF is metres, Y up, like kinema.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kinema.errors import FormatError, KinemaError, LimitError
from kinema.io import gltf_document as gd
from kinema.io import scene_graph as sg
from kinema.io.character import Character, Mesh
from kinema.io.gltf_export import save_glb
from kinema.io.skinning import pack_influences, transform_normals, transform_points
from kinema.io.validate import check_character, check_motion, check_motion_size
from kinema.limits import DEFAULT, Limits
from kinema.maths import quat
from kinema.motion import Motion, Skeleton

_TRS_PATHS = ("translation", "rotation", "scale")
#: Longest animation accepted, in output frames (a corrupted key time must not allocate TBs).
MAX_FRAMES = 1_000_000
# fraction of a frame by which the last key may fall short of a whole frame count
FRAME_SLACK = 0.01


@dataclass
class _Graph:
    """The node tree of a document at rest, and the chosen joints."""

    parents: list[int]
    order: list[int]                 # all nodes, depth-first
    rest_t: np.ndarray               # (N, 3)
    rest_q: np.ndarray               # (N, 4) w,x,y,z
    rest_s: np.ndarray               # (N, 3)
    local: np.ndarray                # (N, 4, 4) rest local matrices
    world: np.ndarray                # (N, 4, 4) rest world matrices
    joint_nodes: list[int]           # joint -> node
    joint_parents: np.ndarray        # (J,)
    joint_names: list[str]


def _guard(path, fn, *args, **kwargs):
    """Run ``fn``; turn unexpected exceptions on malformed data into FormatError."""
    try:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return _finite(path, fn(*args, **kwargs))
    except KinemaError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, struct.error,
            OverflowError, ZeroDivisionError, RecursionError, np.linalg.LinAlgError) as e:
        raise FormatError(f"malformed glTF ({type(e).__name__}: {e})", path) from None


def _finite(path, result):
    """Refuse results holding NaN/inf (e.g. from out-of-range transforms in the file)."""
    arrays = []
    if isinstance(result, Motion):
        arrays = [result.rotations, result.positions]
    elif isinstance(result, Character):
        arrays = [result.bind_rotations, result.bind_positions, result.inverse_bind]
        arrays += [a for m in result.meshes for a in (m.positions, m.normals, m.weights)]
    for a in arrays:
        if not np.all(np.isfinite(a)):
            raise FormatError("transforms or vertices are not finite (NaN, infinite or beyond "
                              "float32 range)", path)
    return result


# --------------------------------------------------------------------------- graph
def _node_trs(doc: gd.Document, i: int, node) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if node.matrix is not None:
        m = np.asarray(node.matrix, np.float64)
        if m.shape != (16,) or not np.all(np.isfinite(m)):
            raise doc.error(f"node {i}: matrix must be 16 finite numbers")
        m = m.reshape(4, 4).T
        q, t, s = sg.rigid_from_matrices(m)
        return t, q, s, m
    t = np.asarray(node.translation if node.translation is not None else [0, 0, 0], np.float64)
    r = np.asarray(node.rotation if node.rotation is not None else [0, 0, 0, 1], np.float64)
    s = np.asarray(node.scale if node.scale is not None else [1, 1, 1], np.float64)
    if t.shape != (3,) or r.shape != (4,) or s.shape != (3,) or not (
            np.all(np.isfinite(t)) and np.all(np.isfinite(r)) and np.all(np.isfinite(s))):
        raise doc.error(f"node {i}: translation/rotation/scale have wrong sizes or non-finite values")
    q = np.array([r[3], r[0], r[1], r[2]])
    n = np.linalg.norm(q)
    q = q / n if n > 1e-12 else np.array([1.0, 0, 0, 0])
    return t, q, s, sg.trs_matrix(t, q, s)


def _graph(doc: gd.Document) -> _Graph:
    nodes = doc.gltf.nodes
    n = len(nodes)
    if n == 0:
        raise doc.error("file has no nodes")
    parents = [-1] * n
    for i, node in enumerate(nodes):
        for c in node.children or []:
            if not isinstance(c, int) or not 0 <= c < n:
                raise doc.error(f"node {i}: child {c!r} does not exist")
            if parents[c] != -1 or c == i:
                raise doc.error(f"node {c} has more than one parent")
            parents[c] = i
    try:
        order = sg.depth_first(parents)
    except ValueError as e:
        raise doc.error(str(e)) from None
    rest_t, rest_q, rest_s = np.zeros((n, 3)), np.zeros((n, 4)), np.ones((n, 3))
    local = np.zeros((n, 4, 4))
    for i, node in enumerate(nodes):
        rest_t[i], rest_q[i], rest_s[i], local[i] = _node_trs(doc, i, node)
    world = sg.world_matrices(local, parents, order)
    skin_joints: list[int] = []
    for k, skin in enumerate(doc.gltf.skins or []):
        for j in skin.joints or []:
            if not isinstance(j, int) or not 0 <= j < n:
                raise doc.error(f"skin {k}: joint node {j!r} does not exist")
            skin_joints.append(j)
    joint_nodes, joint_parents = sg.joint_tree(parents, skin_joints if skin_joints else range(n))
    joint_names = sg.unique_names([nodes[i].name or f"node{i}" for i in joint_nodes])
    return _Graph(parents, order, rest_t, rest_q, rest_s, local, world,
                  joint_nodes, joint_parents, joint_names)


def _skeleton(graph: _Graph) -> tuple[Skeleton, np.ndarray, np.ndarray]:
    """Skeleton and rest local rotations (J, 4) / positions (J, 3)."""
    world = graph.world[graph.joint_nodes][None]
    rot, pos = sg.local_from_world(world, graph.joint_parents)
    return Skeleton(graph.joint_names, graph.joint_parents, pos[0]), rot[0], pos[0]


# --------------------------------------------------------------------------- animation
def _animation_list(doc: gd.Document) -> list[str]:
    return sg.unique_names([a.name for a in (doc.gltf.animations or [])], prefix="animation")


def _pick_animation(doc: gd.Document, animation) -> int | None:
    names = _animation_list(doc)
    if animation is None:
        return 0 if names else None
    if isinstance(animation, (int, np.integer)) and not isinstance(animation, bool):
        if not -len(names) <= animation < len(names):
            raise doc.error(f"animation index {animation} out of range; the file has {len(names)}: {names}")
        return int(animation) % len(names)
    if animation in names:
        return names.index(animation)
    raw = [a.name for a in doc.gltf.animations or []]
    if animation in raw:
        return raw.index(animation)
    raise doc.error(f"no animation {animation!r}; the file has {names}")


def sample_channel(times: np.ndarray, values: np.ndarray, interpolation: str, t: np.ndarray,
                   rotation: bool) -> np.ndarray:
    """Evaluate one glTF sampler at times ``t``.

    Args:
        times: (K,) increasing key times, seconds.
        values: (K, C) key values, or (3K, C) for CUBICSPLINE (in-tangent, value, out-tangent).
        interpolation: "LINEAR", "STEP" or "CUBICSPLINE".
        t: (F,) sample times; clamped to the key range.
        rotation: values are unit quaternions (slerp for LINEAR, renormalised).
    Returns:
        (F, C) values.
    """
    k = times.shape[0]
    if interpolation == "CUBICSPLINE":
        v3 = values.reshape(k, 3, -1)
        tin, val, tout = v3[:, 0], v3[:, 1], v3[:, 2]
    else:
        val = values
    if k == 1:
        return np.repeat(val[:1], t.shape[0], axis=0)
    i = np.clip(np.searchsorted(times, t, side="right") - 1, 0, k - 2)
    t0, t1 = times[i], times[i + 1]
    dt = t1 - t0
    u = np.clip((t - t0) / np.where(dt > 0, dt, 1.0), 0.0, 1.0)
    if interpolation == "STEP":
        out = val[np.where(t >= t1, i + 1, i)]
    elif interpolation == "CUBICSPLINE":
        u2, u3 = u * u, u * u * u
        h00 = (2 * u3 - 3 * u2 + 1)[:, None]
        h10 = (u3 - 2 * u2 + u)[:, None]
        h01 = (-2 * u3 + 3 * u2)[:, None]
        h11 = (u3 - u2)[:, None]
        out = h00 * val[i] + h10 * dt[:, None] * tout[i] + h01 * val[i + 1] + h11 * dt[:, None] * tin[i + 1]
    elif rotation:
        out = quat.normalize(quat.slerp(val[i], val[i + 1], u))
    else:
        out = val[i] + u[:, None] * (val[i + 1] - val[i])
    if rotation:
        out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return out


def _channels(doc: gd.Document, graph: _Graph, index: int):
    """[(node, path, times, values (K,C) w,x,y,z for rotations, interpolation)], morph count."""
    anim = doc.gltf.animations[index]
    out, morph = [], 0
    samplers = anim.samplers or []
    for c, ch in enumerate(anim.channels or []):
        path = ch.target.path if ch.target is not None else None
        if path == "weights":
            morph += 1
            continue
        if path not in _TRS_PATHS:
            continue  # e.g. KHR_animation_pointer targets
        node = ch.target.node
        if node is None:
            continue
        if not isinstance(node, int) or not 0 <= node < len(graph.parents):
            raise doc.error(f"animation {index} channel {c}: node {node!r} does not exist")
        if not isinstance(ch.sampler, int) or not 0 <= ch.sampler < len(samplers):
            raise doc.error(f"animation {index} channel {c}: sampler {ch.sampler!r} does not exist")
        smp = samplers[ch.sampler]
        interp = smp.interpolation or "LINEAR"
        if interp not in ("LINEAR", "STEP", "CUBICSPLINE"):
            raise doc.error(f"animation {index} channel {c}: unknown interpolation {interp!r}")
        times = gd.read_float(doc, smp.input, 1, f"animation {index} sampler {ch.sampler} input")[:, 0]
        ncomp = 4 if path == "rotation" else 3
        values = gd.read_float(doc, smp.output, ncomp, f"animation {index} sampler {ch.sampler} output")
        k = times.shape[0]
        expect = 3 * k if interp == "CUBICSPLINE" else k
        if k == 0 or values.shape[0] != expect:
            raise doc.error(f"animation {index} channel {c}: {k} key times but {values.shape[0]} "
                            f"values (expected {expect} for {interp})")
        if np.any(np.diff(times) < 0):
            raise doc.error(f"animation {index} channel {c}: key times are not increasing")
        if path == "rotation":
            values = values[:, [3, 0, 1, 2]]
            if interp != "CUBICSPLINE":
                values = sg.continuous(values / np.maximum(np.linalg.norm(values, axis=-1, keepdims=True), 1e-12))
        out.append((node, path, times, values, interp))
    return out, morph


def _stored_fps(anim) -> float | None:
    """The frame rate kinema's exporter stores in ``extras.kinema.fps``, if any."""
    extras = anim.extras
    kin = extras.kinema if isinstance(extras, gd.JsonView) else None
    fps = kin.fps if isinstance(kin, gd.JsonView) else None
    return float(fps) if isinstance(fps, (int, float)) and fps > 0 else None


def _evaluate(doc: gd.Document, graph: _Graph, index: int, fps: float | None):
    """World matrices (F, J, 4, 4) of the joints over the animation, and the fps used."""
    channels, morph = _channels(doc, graph, index)
    name = _animation_list(doc)[index]
    if not channels:
        if morph:
            raise doc.error(f"animation {name!r} only animates morph-target weights; kinema reads "
                            "skeletal (node transform) animation")
        raise doc.error(f"animation {name!r} has no node transform channels")
    if fps is None:
        fps = _stored_fps(doc.gltf.animations[index]) or sg.apparent_fps([c[2] for c in channels])
    if not fps > 0:
        raise doc.error(f"fps must be positive, got {fps}")
    start = min(float(c[2][0]) for c in channels)
    end = max(float(c[2][-1]) for c in channels)
    frames = (end - start) * fps
    if not frames < MAX_FRAMES:
        raise doc.error(f"animation {name!r} spans {end - start:g} s: {frames:.3g} frames at "
                        f"{fps:g} fps is more than {MAX_FRAMES}")
    # key times are float32: 299 / 30 s reads back as 298.99998 frames, so a frame within a
    # hundredth of the last key counts (sampling clamps to the last key)
    n = int(np.floor(frames + FRAME_SLACK)) + 1
    check_motion_size(n, len(graph.joint_nodes), doc.path, doc.limits)
    if n * len(graph.parents) * 16 > doc.limits.max_motion_values:
        raise LimitError(f"animation {name!r}: {n} frames x {len(graph.parents)} nodes x 16 matrix "
                         f"values, over {doc.limits.max_motion_values}", doc.path, "max_motion_values")
    t = start + np.arange(n) / fps
    needed = set(graph.joint_nodes)
    for j in graph.joint_nodes:
        needed.update(sg.ancestors(j, graph.parents))
    order = [v for v in graph.order if v in needed]
    trs = {}
    for node, path, times, values, interp in channels:
        if node not in needed:
            continue
        trs[(node, path)] = sample_channel(times, values, interp, t, path == "rotation")
    local = np.broadcast_to(graph.local, (n,) + graph.local.shape).copy()
    for v in order:
        if any((v, p) in trs for p in _TRS_PATHS):
            tt = trs.get((v, "translation"), graph.rest_t[v][None])
            qq = trs.get((v, "rotation"), graph.rest_q[v][None])
            ss = trs.get((v, "scale"), graph.rest_s[v][None])
            local[:, v] = sg.trs_matrix(tt, qq, ss)
    world = sg.world_matrices(local, graph.parents, order)
    return world[:, graph.joint_nodes], float(fps)


def _motion(doc: gd.Document, animation=None, fps: float | None = None) -> Motion:
    graph = _graph(doc)
    skeleton, _, _ = _skeleton(graph)
    index = _pick_animation(doc, animation)
    meta = {"source": str(doc.path), "format": "gltf"}
    if index is None:
        world = graph.world[graph.joint_nodes][None]
        rot, pos = sg.local_from_world(world, graph.joint_parents)
        return Motion(skeleton, float(fps or 30.0), rot, pos, name=doc.path.stem,
                      metadata={**meta, "animation": None, "bind_pose": True})
    world, fps = _evaluate(doc, graph, index, fps)
    rot, pos = sg.local_from_world(world, graph.joint_parents)
    name = _animation_list(doc)[index]
    return Motion(skeleton, fps, rot, pos, name=name, metadata={**meta, "animation": name})


# --------------------------------------------------------------------------- meshes
def _triangles(mode: int | None, idx: np.ndarray, doc: gd.Document, what: str) -> np.ndarray | None:
    mode = 4 if mode is None else mode
    if mode == 4:
        if idx.size % 3:
            raise doc.error(f"{what}: {idx.size} triangle indices is not a multiple of 3")
        return idx.reshape(-1, 3)
    if mode == 5:  # strip
        if idx.size < 3:
            return np.zeros((0, 3), np.int64)
        k = np.arange(idx.size - 2)
        tri = np.stack([idx[k], idx[k + 1 + (k % 2)], idx[k + 2 - (k % 2)]], 1)
        return tri
    if mode == 6:  # fan
        if idx.size < 3:
            return np.zeros((0, 3), np.int64)
        k = np.arange(1, idx.size - 1)
        return np.stack([np.full(k.size, idx[0]), idx[k], idx[k + 1]], 1)
    return None  # points / lines: not a surface


def _face_normals(pos: np.ndarray, tri: np.ndarray) -> np.ndarray:
    n = np.zeros_like(pos)
    fn = np.cross(pos[tri[:, 1]] - pos[tri[:, 0]], pos[tri[:, 2]] - pos[tri[:, 0]])
    for c in range(3):
        np.add.at(n, tri[:, c], fn)
    return n / np.maximum(np.linalg.norm(n, axis=-1, keepdims=True), 1e-12)


def _material(doc: gd.Document, index, textures: bool, cache: dict):
    color = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    texture = None
    if index is None:
        return np.array([0.8, 0.8, 0.8, 1.0], np.float32), None
    mat = gd._get(doc, doc.gltf.materials, index, "material")
    pbr = mat.pbrMetallicRoughness
    if pbr is not None:
        if pbr.baseColorFactor is not None:
            color = np.asarray(pbr.baseColorFactor, np.float32).reshape(4)
        info = pbr.baseColorTexture
        if textures and info is not None and info.index is not None:
            tex = gd._get(doc, doc.gltf.textures, info.index, "texture")
            if tex.source is not None:
                if tex.source not in cache:
                    cache[tex.source] = gd.read_image(doc, tex.source)
                texture = cache[tex.source]
    return color, texture


def _primitive_arrays(doc: gd.Document, prim, nv_what: str):
    """Raw POSITION, triangles, normals, uvs and (joints, weights) sets of a primitive."""
    what = nv_what
    attrs = prim.attributes
    if attrs is None or attrs.POSITION is None:
        raise doc.error(f"{what}: has no POSITION attribute")
    pos = gd.read_float(doc, attrs.POSITION, 3, f"{what} POSITION")
    nv = pos.shape[0]
    idx = gd.read_indices(doc, prim.indices, nv, what) if prim.indices is not None else np.arange(nv)
    tri = _triangles(prim.mode, idx, doc, what)
    if tri is None:
        return None
    normals = gd.read_float(doc, attrs.NORMAL, 3, f"{what} NORMAL") if attrs.NORMAL is not None else None
    uvs = gd.read_float(doc, attrs.TEXCOORD_0, 2, f"{what} TEXCOORD_0") if attrs.TEXCOORD_0 is not None else None
    for name, arr in (("NORMAL", normals), ("TEXCOORD_0", uvs)):
        if arr is not None and arr.shape[0] != nv:
            raise doc.error(f"{what}: {name} has {arr.shape[0]} entries for {nv} vertices")
    if normals is None:
        normals = _face_normals(pos, tri)
    sets = []
    for k in range(4):
        ja, wa = getattr(attrs, f"JOINTS_{k}"), getattr(attrs, f"WEIGHTS_{k}")
        if ja is None or wa is None:
            break
        jj = gd.read_accessor(doc, ja)
        ww = gd.read_float(doc, wa, 4, f"{what} WEIGHTS_{k}")
        if jj.dtype.kind not in "iu" or jj.shape != (nv, 4) or ww.shape[0] != nv:
            raise doc.error(f"{what}: JOINTS_{k}/WEIGHTS_{k} must be {nv} x 4 "
                            f"(got {jj.shape} and {ww.shape})")
        sets.append((jj.astype(np.int64), ww))
    return pos, tri, normals, uvs, sets


def _inverse_binds(doc: gd.Document, skin_index: int, n: int) -> np.ndarray:
    skin = doc.gltf.skins[skin_index]
    if skin.inverseBindMatrices is None:
        return np.broadcast_to(np.eye(4), (n, 4, 4))
    ibm = gd.read_float(doc, skin.inverseBindMatrices, 16, f"skin {skin_index} inverseBindMatrices")
    if ibm.shape[0] < n:
        raise doc.error(f"skin {skin_index}: {ibm.shape[0]} inverse bind matrices for {n} joints")
    return ibm[:n].reshape(-1, 4, 4).transpose(0, 2, 1)


def _meshes(doc: gd.Document, graph: _Graph, rest: np.ndarray, textures: bool = True):
    """Meshes in character space and the (J, 4, 4) inverse bind matrices.

    ``rest`` (J, 4, 4) are the rigid rest world matrices of the joints. Skinned
    primitives keep their bind-shape vertices mapped by ``B = G @ IBM`` of their most
    weighted joint (the skin's bind-shape transform; the mesh node's own transform is
    ignored, as the glTF spec says); a joint's inverse bind matrix comes from the first
    skin that weights it, ``IB = rest^-1 @ G @ IBM @ B^-1`` (G its full rest world matrix,
    so the node scale above the skeleton is kept; joints no skin weights get
    ``rest^-1``). When the node rest pose is the pose the IBMs were made in (the usual
    case), ``IB == rest^-1`` and skinning the rest pose returns the vertices unchanged. Meshes on plain nodes are attached
    rigidly to their nearest joint ancestor.
    """
    joint_of_node = {v: j for j, v in enumerate(graph.joint_nodes)}
    inverse_bind = np.linalg.inv(rest)
    assigned = np.zeros(len(graph.joint_nodes), bool)
    bind_shape: dict[int, np.ndarray] = {}
    items = []
    for v in graph.order:
        node = doc.gltf.nodes[v]
        if node.mesh is None:
            continue
        mesh = gd._get(doc, doc.gltf.meshes, node.mesh, f"node {v}: mesh")
        skin_index = node.skin
        if skin_index is not None:
            gd._get(doc, doc.gltf.skins, skin_index, f"node {v}: skin")
        for p, prim in enumerate(mesh.primitives or []):
            arrays = _primitive_arrays(doc, prim, f"mesh {node.mesh} primitive {p}")
            if arrays is not None:
                items.append((v, node, mesh, p, prim, skin_index, arrays))
    # skinned primitives first: they set the inverse bind matrices rigid meshes rely on
    items.sort(key=lambda it: not (it[5] is not None and it[6][4]))
    out: list[Mesh] = []
    image_cache: dict = {}
    for v, node, mesh, p, prim, skin_index, (pos, tri, normals, uvs, sets) in items:
        what = f"mesh {node.mesh} primitive {p}"
        nv = pos.shape[0]
        if skin_index is not None and sets:
            skin_nodes = np.asarray(doc.gltf.skins[skin_index].joints, np.int64)
            local_j = np.concatenate([s[0] for s in sets], 1)
            weights = np.concatenate([s[1] for s in sets], 1)
            if local_j.max(initial=0) >= len(skin_nodes):
                raise doc.error(f"{what}: joint index {int(local_j.max())} but skin {skin_index} "
                                f"has {len(skin_nodes)} joints")
            lj, lw = pack_influences(local_j, weights, min_slots=4)
            joint_map = np.array([joint_of_node[int(n)] for n in skin_nodes], np.int64)
            if skin_index not in bind_shape:
                ibm = _inverse_binds(doc, skin_index, len(skin_nodes))
                full = graph.world[skin_nodes] @ ibm
                total = np.bincount(lj.ravel(), lw.ravel().astype(np.float64), minlength=len(skin_nodes))
                shape = full[int(np.argmax(total))]
                bind_shape[skin_index] = shape
                inv_shape = np.linalg.inv(shape)
                for k, j in enumerate(joint_map):
                    if total[k] > 0 and not assigned[j]:   # unweighted joints keep rest^-1
                        inverse_bind[j] = inverse_bind[j] @ full[k] @ inv_shape
                        assigned[j] = True
            shape = bind_shape[skin_index]
            positions = transform_points(shape, pos)
            normals = transform_normals(shape, normals)
            joints, weights = pack_influences(joint_map[lj], lw, min_slots=4)
        else:
            anchor = v
            while anchor >= 0 and anchor not in joint_of_node:
                anchor = graph.parents[anchor]
            j = joint_of_node.get(anchor, 0)
            # vertices that joint j's skinning matrix at rest carries to the node's rest pose
            to_rest = np.linalg.inv(rest[j] @ inverse_bind[j]) @ graph.world[v]
            positions = transform_points(to_rest, pos)
            normals = transform_normals(to_rest, normals)
            joints = np.zeros((nv, 4), np.int32)
            joints[:, 0] = j
            weights = np.zeros((nv, 4), np.float32)
            weights[:, 0] = 1.0
        color, texture = _material(doc, prim.material, textures, image_cache)
        name = mesh.name or f"mesh{node.mesh}"
        if len(mesh.primitives) > 1:
            name = f"{name}.{p}"
        out.append(Mesh(name=name, positions=positions.astype(np.float32),
                        normals=normals.astype(np.float32), indices=tri.astype(np.uint32),
                        joints=joints.astype(np.int32), weights=weights.astype(np.float32),
                        uvs=None if uvs is None else uvs.astype(np.float32),
                        base_color=color, texture=texture))
    return out, inverse_bind


def _character(doc: gd.Document, textures: bool = True) -> Character:
    graph = _graph(doc)
    skeleton, rot, pos = _skeleton(graph)
    grot, gpos, _ = sg.rigid_from_matrices(graph.world[graph.joint_nodes])
    meshes, inverse_bind = _meshes(doc, graph, sg.rigid_matrices(grot, gpos), textures)
    return Character(name=doc.path.stem, skeleton=skeleton, bind_rotations=rot.astype(np.float32),
                     bind_positions=pos.astype(np.float32), inverse_bind=inverse_bind.astype(np.float32),
                     meshes=meshes, animations=_animation_list(doc), source=doc.path)


# --------------------------------------------------------------------------- public API
def load(path: str | Path, animation: str | int | None = None, fps: float | None = None,
         limits: Limits = DEFAULT, **options) -> Motion:
    """Load one animation of a glTF/GLB file as a :class:`Motion`.

    Args:
        path: ``.glb`` or ``.gltf`` file.
        animation: name or index (default: the first animation; the rest pose as a
            1-frame motion when the file has none).
        fps: output frame rate (default: the apparent source rate, e.g. 30 or 60).
        limits: size limits (:mod:`kinema.limits`), checked before allocating.
    Raises:
        FormatError: malformed file, unknown animation, morph-only animation.
    """
    if options:
        raise TypeError(f"unknown options for glTF load: {sorted(options)}")
    doc = _guard(path, gd.open_document, path, limits)
    return check_motion(_guard(path, _motion, doc, animation, fps), path, limits)


def load_all(path: str | Path, fps: float | None = None, limits: Limits = DEFAULT) -> list[Motion]:
    """Every animation of the file as a list of motions (the rest pose when it has none)."""
    doc = _guard(path, gd.open_document, path, limits)
    names = _animation_list(doc)
    if not names:
        return [check_motion(_guard(path, _motion, doc, None, fps), path, limits)]
    return [check_motion(_guard(path, _motion, doc, i, fps), path, limits) for i in range(len(names))]


def load_character(path: str | Path, textures: bool = True, limits: Limits = DEFAULT,
                   **options) -> Character:
    """Load the skinned character of a glTF/GLB file (``textures=False`` skips image decoding)."""
    if options:
        raise TypeError(f"unknown options for glTF load_character: {sorted(options)}")
    doc = _guard(path, gd.open_document, path, limits)
    return check_character(_guard(path, _character, doc, textures), path, limits)


def animation_names(path: str | Path) -> list[str]:
    """Names of the file's animations in file order (unnamed ones become ``animationN``)."""
    doc = _guard(path, gd.open_document, path)
    return _guard(path, _animation_list, doc)


def info(path: str | Path) -> dict:
    """Extra keys for ``kinema info``: animations, has_mesh, skins, primitives."""
    doc = _guard(path, gd.open_document, path)

    def run():
        graph = _graph(doc)
        prims = [p for v in graph.order if doc.gltf.nodes[v].mesh is not None
                 for p in gd._get(doc, doc.gltf.meshes, doc.gltf.nodes[v].mesh, "mesh").primitives or []]
        return {"animations": _animation_list(doc), "has_mesh": len(prims) > 0,
                "skins": len(doc.gltf.skins or []), "primitives": len(prims)}
    return _guard(path, run)


def save(motion: Motion, path: str | Path, character: Character | None = None,
         motions: list[Motion] | None = None) -> None:
    """Write ``motion`` (plus any further ``motions`` on the same skeleton) as a GLB, with
    ``character``'s skinned meshes when given (see :func:`kinema.io.gltf_export.save_glb`)."""
    save_glb(path, motion.skeleton, [motion, *(motions or [])], character=character)
