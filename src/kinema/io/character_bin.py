"""Loader for the LaFAN1 skinned character ``character.bin`` (GenoView/"Simulation" rig).

The file is a flat little-endian sequence of arrays: a 1-D array is an int32 count then
``count`` items (vectors of 3, 2 or 4 values count as one item), a 2-D array is int32
rows, int32 cols, then row-major data. In order: vertex positions (V x 3 float32),
normals (V x 3 float32), texcoords (V x 2 float32), triangle indices (uint16, count is
the number of indices), bone weights (2-D float32 V x 4), bone indices (2-D uint16 V x 4),
bone rest positions (B x 3 float32, world space, metres), bone rest rotations
(B x 4 float32, world space, w,x,y,z). The 23 bones are ``Simulation`` followed by the
22 LaFAN1 joints in BVH order.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from kinema.errors import FormatError
from kinema.io.character import Character, Mesh
from kinema.io.scene_graph import rigid_matrices
from kinema.motion import Motion, Skeleton, kinematics

#: Bone names in file order and their parents (``Simulation`` is the root).
BONES: tuple[tuple[str, str | None], ...] = (
    ("Simulation", None), ("Hips", "Simulation"),
    ("LeftUpLeg", "Hips"), ("LeftLeg", "LeftUpLeg"), ("LeftFoot", "LeftLeg"), ("LeftToe", "LeftFoot"),
    ("RightUpLeg", "Hips"), ("RightLeg", "RightUpLeg"), ("RightFoot", "RightLeg"), ("RightToe", "RightFoot"),
    ("Spine", "Hips"), ("Spine1", "Spine"), ("Spine2", "Spine1"), ("Neck", "Spine2"), ("Head", "Neck"),
    ("LeftShoulder", "Spine2"), ("LeftArm", "LeftShoulder"), ("LeftForeArm", "LeftArm"),
    ("LeftHand", "LeftForeArm"),
    ("RightShoulder", "Spine2"), ("RightArm", "RightShoulder"), ("RightForeArm", "RightArm"),
    ("RightHand", "RightForeArm"),
)


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.data, self.path, self.offset = data, path, 0

    def _int(self, what: str) -> int:
        if self.offset + 4 > len(self.data):
            raise FormatError(f"file ends inside the header of {what} (byte {self.offset})", self.path)
        (v,) = struct.unpack_from("<i", self.data, self.offset)
        self.offset += 4
        if v < 0:
            raise FormatError(f"{what}: negative size {v}", self.path)
        return v

    def _take(self, dtype, n: int, what: str) -> np.ndarray:
        size = np.dtype(dtype).itemsize * n
        if self.offset + size > len(self.data):
            raise FormatError(f"{what}: needs {size} bytes at byte {self.offset}, file has "
                              f"{len(self.data) - self.offset} left", self.path)
        out = np.frombuffer(self.data, dtype, n, self.offset).copy()
        self.offset += size
        return out

    def array1(self, dtype, width: int, what: str) -> np.ndarray:
        n = self._int(what)
        return self._take(dtype, n * width, what).reshape(n, width) if width > 1 else self._take(dtype, n, what)

    def array2(self, dtype, what: str) -> np.ndarray:
        rows, cols = self._int(what), self._int(what)
        return self._take(dtype, rows * cols, what).reshape(rows, cols)


def _read(path: Path) -> dict[str, np.ndarray]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FormatError(f"cannot read file ({e.strerror})", path) from None
    r = _Reader(data, path)
    out = {
        "positions": r.array1("<f4", 3, "vertex positions"),
        "normals": r.array1("<f4", 3, "normals"),
        "uvs": r.array1("<f4", 2, "texcoords"),
        "indices": r.array1("<u2", 1, "triangle indices"),
        "weights": r.array2("<f4", "bone weights"),
        "joints": r.array2("<u2", "bone indices"),
        "bone_positions": r.array1("<f4", 3, "bone rest positions"),
        "bone_rotations": r.array1("<f4", 4, "bone rest rotations"),
    }
    if r.offset != len(data):
        raise FormatError(f"{len(data) - r.offset} unexpected bytes after the last array", path)
    v = out["positions"].shape[0]
    for key in ("normals", "uvs", "weights", "joints"):
        if out[key].shape[0] != v:
            raise FormatError(f"{key} has {out[key].shape[0]} rows for {v} vertices", path)
    if out["indices"].size % 3 or (out["indices"].size and int(out["indices"].max()) >= v):
        raise FormatError("triangle indices are not triples of valid vertex indices", path)
    b = out["bone_positions"].shape[0]
    if b != len(BONES) or out["bone_rotations"].shape[0] != b:
        raise FormatError(f"expected {len(BONES)} bones, file has {b} positions and "
                          f"{out['bone_rotations'].shape[0]} rotations", path)
    if out["joints"].size and int(out["joints"].max()) >= b:
        raise FormatError(f"bone index {int(out['joints'].max())} out of range for {b} bones", path)
    return out


def skeleton() -> tuple[list[str], np.ndarray]:
    """Bone names and parent indices of the character."""
    names = [n for n, _ in BONES]
    parents = np.array([-1 if p is None else names.index(p) for _, p in BONES], np.int64)
    return names, parents


def load_character(path: str | Path, **options) -> Character:
    """Read ``character.bin`` into a :class:`Character` (one mesh, 23-bone skeleton).

    The bind pose comes from the file's world-space bone transforms; the inverse bind
    matrices are their inverses; vertices are in the same (world, metres) space.
    """
    path = Path(path)
    d = _read(path)
    names, parents = skeleton()
    grot = d["bone_rotations"].astype(np.float64)
    grot /= np.linalg.norm(grot, axis=-1, keepdims=True)
    gpos = d["bone_positions"].astype(np.float64)
    rot, pos = kinematics.inverse(grot, gpos, parents)
    inverse_bind = np.linalg.inv(rigid_matrices(grot, gpos))
    weights = d["weights"].astype(np.float64)
    weights /= np.maximum(weights.sum(1, keepdims=True), 1e-12)
    mesh = Mesh(name="lafan1_character", positions=d["positions"], normals=d["normals"],
                indices=d["indices"].reshape(-1, 3).astype(np.uint32),
                joints=d["joints"].astype(np.int32), weights=weights.astype(np.float32), uvs=d["uvs"])
    return Character(name=path.stem, skeleton=Skeleton(names, parents, pos),
                     bind_rotations=np.asarray(rot, np.float32), bind_positions=np.asarray(pos, np.float32),
                     inverse_bind=inverse_bind.astype(np.float32), meshes=[mesh], animations=[], source=path)


def load(path: str | Path, fps: float | None = None, **options) -> Motion:
    """The bind pose of ``character.bin`` as a 1-frame :class:`Motion`."""
    c = load_character(path)
    return Motion(c.skeleton, fps or 30.0, c.bind_rotations[None], c.bind_positions[None],
                  name=c.name, metadata={"source": str(path), "format": "character.bin", "bind_pose": True})


def info(path: str | Path) -> dict:
    """Extra keys for ``kinema info``."""
    d = _read(Path(path))
    return {"animations": [], "has_mesh": True,
            "vertices": int(d["positions"].shape[0]), "triangles": int(d["indices"].size // 3)}
