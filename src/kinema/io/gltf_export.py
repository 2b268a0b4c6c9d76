"""GLB export with ``pygltflib``: a skeleton, optional skinned meshes and one or more
animations.

Layout of the written file: one node per joint (names, rest TRS, children), one skin
holding every joint with its inverse bind matrix, one node per mesh (skinned to that
skin), and one animation per motion with LINEAR rotation and translation channels for
every joint, keyed at ``k / fps``. The motion's fps is stored in the animation's
``extras`` (``{"kinema": {"fps": ...}}``) so :mod:`kinema.io.gltf` re-imports it at the
same rate exactly.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kinema.errors import KinemaError
from kinema.io import atomic
from kinema.io import scene_graph as sg
from kinema.io.character import Character
from kinema.motion import Motion, Skeleton, kinematics

_FLOAT, _UINT16, _UINT32, _UINT8 = 5126, 5123, 5125, 5121
_TYPES = {1: "SCALAR", 2: "VEC2", 3: "VEC3", 4: "VEC4", 16: "MAT4"}


class _Blob:
    """Accumulates the BIN chunk and the bufferViews/accessors that point into it."""

    def __init__(self, gltf):
        self.gltf = gltf
        self.data = bytearray()

    def view(self, raw: bytes, target: int | None = None) -> int:
        import pygltflib

        while len(self.data) % 4:
            self.data.append(0)
        self.gltf.bufferViews.append(pygltflib.BufferView(buffer=0, byteOffset=len(self.data),
                                                          byteLength=len(raw), target=target))
        self.data.extend(raw)
        return len(self.gltf.bufferViews) - 1

    def accessor(self, array: np.ndarray, component: int, minmax: bool = False,
                 target: int | None = None, normalized: bool | None = None) -> int:
        import pygltflib

        a = np.ascontiguousarray(array)
        ncomp = 1 if a.ndim == 1 else a.shape[1]
        view = self.view(a.tobytes(), target)
        acc = pygltflib.Accessor(bufferView=view, componentType=component, count=int(a.shape[0]),
                                 type=_TYPES[ncomp], normalized=normalized)
        if minmax and a.size:
            flat = a.reshape(a.shape[0], -1)
            acc.min = [float(x) for x in flat.min(0)]
            acc.max = [float(x) for x in flat.max(0)]
        self.gltf.accessors.append(acc)
        return len(self.gltf.accessors) - 1


def _check_motions(skeleton: Skeleton, motions: list[Motion]) -> None:
    for m in motions:
        if m.skeleton.names != skeleton.names or not np.array_equal(m.skeleton.parents, skeleton.parents):
            raise KinemaError(f"motion {m.name!r} does not use the exported skeleton "
                              "(names and parents must match)")


def _png(pixels: np.ndarray) -> bytes:
    import imageio.v3 as iio

    return bytes(iio.imwrite("<bytes>", np.ascontiguousarray(pixels, np.uint8), extension=".png"))


def build_glb(skeleton: Skeleton, motions: list[Motion] = (), character: Character | None = None):
    """The pygltflib ``GLTF2`` object (with its binary blob set) for a skeleton, motions
    and an optional character (whose skeleton must be ``skeleton``)."""
    import pygltflib

    motions = list(motions)
    _check_motions(skeleton, motions)
    j = skeleton.num_joints
    if character is not None:
        if character.skeleton.names != skeleton.names:
            raise KinemaError("character skeleton differs from the exported skeleton")
        rest_rot = np.asarray(character.bind_rotations, np.float64)
        rest_pos = np.asarray(character.bind_positions, np.float64)
        inverse_bind = np.asarray(character.inverse_bind, np.float64)
    else:
        rest_rot = np.tile([1.0, 0, 0, 0], (j, 1))
        rest_pos = np.asarray(skeleton.offsets, np.float64)
        grot, gpos = kinematics.forward(rest_rot, rest_pos, skeleton.parents)
        inverse_bind = np.linalg.inv(sg.rigid_matrices(grot, gpos))

    gltf = pygltflib.GLTF2(asset=pygltflib.Asset(generator="kinema", version="2.0"))
    gltf.scene = 0
    blob = _Blob(gltf)
    children = [[] for _ in range(j)]
    for c, p in enumerate(skeleton.parents):
        if p >= 0:
            children[p].append(int(c))
    for k in range(j):
        q = rest_rot[k] / np.linalg.norm(rest_rot[k])
        gltf.nodes.append(pygltflib.Node(
            name=skeleton.names[k], translation=[float(x) for x in rest_pos[k]],
            rotation=[float(q[1]), float(q[2]), float(q[3]), float(q[0])],
            children=children[k] or None))
    roots = [k for k in range(j) if skeleton.parents[k] < 0]
    ibm = np.ascontiguousarray(inverse_bind.transpose(0, 2, 1).reshape(j, 16), np.float32)
    gltf.skins.append(pygltflib.Skin(joints=list(range(j)), skeleton=roots[0] if len(roots) == 1 else None,
                                     inverseBindMatrices=blob.accessor(ibm, _FLOAT)))
    scene_nodes = list(roots)

    if character is not None:
        for mesh in character.meshes:
            attrs = pygltflib.Attributes(
                POSITION=blob.accessor(mesh.positions.astype(np.float32), _FLOAT, minmax=True, target=34962),
                NORMAL=blob.accessor(mesh.normals.astype(np.float32), _FLOAT, target=34962))
            if mesh.uvs is not None:
                attrs.TEXCOORD_0 = blob.accessor(mesh.uvs.astype(np.float32), _FLOAT, target=34962)
            joints = np.asarray(mesh.joints)
            weights = np.asarray(mesh.weights, np.float32)
            k = joints.shape[1]
            pad = (-k) % 4
            joints = np.pad(joints, ((0, 0), (0, pad)))
            weights = np.pad(weights, ((0, 0), (0, pad)))
            for s in range(joints.shape[1] // 4):
                setattr(attrs, f"JOINTS_{s}", blob.accessor(joints[:, 4 * s:4 * s + 4].astype(np.uint16), _UINT16,
                                                            target=34962))
                setattr(attrs, f"WEIGHTS_{s}", blob.accessor(weights[:, 4 * s:4 * s + 4], _FLOAT, target=34962))
            material = pygltflib.Material(name=f"{mesh.name}_material", pbrMetallicRoughness=pygltflib.PbrMetallicRoughness(
                baseColorFactor=[float(x) for x in mesh.base_color], metallicFactor=0.0, roughnessFactor=1.0))
            if mesh.texture is not None:
                gltf.images.append(pygltflib.Image(bufferView=blob.view(_png(mesh.texture)), mimeType="image/png"))
                gltf.textures.append(pygltflib.Texture(source=len(gltf.images) - 1))
                material.pbrMetallicRoughness.baseColorTexture = pygltflib.TextureInfo(index=len(gltf.textures) - 1)
            gltf.materials.append(material)
            prim = pygltflib.Primitive(
                attributes=attrs, mode=4, material=len(gltf.materials) - 1,
                indices=blob.accessor(np.asarray(mesh.indices, np.uint32).reshape(-1), _UINT32, target=34963))
            gltf.meshes.append(pygltflib.Mesh(name=mesh.name, primitives=[prim]))
            gltf.nodes.append(pygltflib.Node(name=mesh.name, mesh=len(gltf.meshes) - 1, skin=0))
            scene_nodes.append(len(gltf.nodes) - 1)

    names = sg.unique_names([m.name for m in motions], prefix="animation")
    for m, name in zip(motions, names):
        times = (np.arange(m.num_frames) / m.fps).astype(np.float32)
        t_acc = blob.accessor(times, _FLOAT, minmax=True)
        anim = pygltflib.Animation(name=name, extras={"kinema": {"fps": float(m.fps)}})
        rot = sg.continuous(np.asarray(m.rotations, np.float64), axis=0)
        for k in range(j):
            q = rot[:, k]
            xyzw = np.ascontiguousarray(q[:, [1, 2, 3, 0]], np.float32)
            for path, values in (("rotation", xyzw), ("translation", m.positions[:, k].astype(np.float32))):
                anim.samplers.append(pygltflib.AnimationSampler(input=t_acc, output=blob.accessor(values, _FLOAT),
                                                                interpolation="LINEAR"))
                anim.channels.append(pygltflib.AnimationChannel(
                    sampler=len(anim.samplers) - 1, target=pygltflib.AnimationChannelTarget(node=k, path=path)))
        gltf.animations.append(anim)

    gltf.scenes.append(pygltflib.Scene(nodes=scene_nodes))
    gltf.buffers.append(pygltflib.Buffer(byteLength=len(blob.data)))
    gltf.set_binary_blob(bytes(blob.data))
    return gltf


def save_glb(path: str | Path, skeleton: Skeleton, motions: list[Motion] = (),
             character: Character | None = None) -> Path:
    """Write a GLB with ``skeleton``, the ``motions`` (one animation each) and optionally
    ``character``'s skinned meshes. Returns the path.

    The write is atomic (:mod:`kinema.io.atomic`): a killed process leaves the previous
    file or none, never a truncated GLB under ``path``."""

    path = Path(path)
    gltf = build_glb(skeleton, motions, character)
    atomic.write_bytes(path, b"".join(gltf.save_to_bytes()))
    return path
