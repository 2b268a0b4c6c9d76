"""Bad glTF input: corrupted GLB chunks, wrong accessor sizes, morph-only files and
hypothesis-mutated real files give kinema errors naming the file, never a crash or a
silent empty result."""
from __future__ import annotations

import json
import struct

import numpy as np
import pygltflib
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinema.errors import FormatError, KinemaError
from kinema.io import gltf
from kinema.io.gltf_document import parse_glb


def _split(data: bytes) -> tuple[dict, bytes]:
    text, blob = parse_glb(data, "x.glb")
    return json.loads(text), blob


def _join(doc: dict, blob: bytes) -> bytes:
    js = json.dumps(doc).encode()
    js += b" " * (-len(js) % 4)
    blob = blob + b"\0" * (-len(blob) % 4)
    body = struct.pack("<II", len(js), 0x4E4F534A) + js + struct.pack("<II", len(blob), 0x004E4942) + blob
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


@pytest.fixture(scope="module")
def fox_bytes(shared_data):
    return (shared_data / "characters" / "fox" / "fox.glb").read_bytes()


def _check_outcome(path):
    """Loading either raises a KinemaError naming the file or returns a non-empty result."""
    for fn in (gltf.load, lambda p: gltf.load_character(p, textures=False)):
        try:
            out = fn(path)
        except KinemaError as e:
            assert str(path) in str(e), str(e)
            continue
        if hasattr(out, "num_frames"):
            assert out.num_frames > 0 and out.num_joints > 0
            assert np.isfinite(out.rotations).all() and np.isfinite(out.positions).all()
        else:
            assert out.skeleton.num_joints > 0 and np.isfinite(out.bind_positions).all()
            for m in out.meshes:
                assert np.isfinite(m.positions).all() and m.indices.max(initial=0) < max(1, m.num_vertices)


def test_corrupted_chunk_lengths(tmp_path, fox_bytes):
    bad = bytearray(fox_bytes)
    struct.pack_into("<I", bad, 12, 10 ** 9)                   # JSON chunk claims 1 GB
    p = tmp_path / "chunk.glb"
    p.write_bytes(bytes(bad))
    with pytest.raises(FormatError, match=r"chunk.glb: .*chunk at byte 12 claims"):
        gltf.load(p)
    p.write_bytes(fox_bytes[: len(fox_bytes) // 2])
    with pytest.raises(FormatError, match="truncated"):
        gltf.load_character(p)
    p.write_bytes(b"glTF\x01\0\0\0" + fox_bytes[8:])
    with pytest.raises(FormatError, match="version 1"):
        gltf.load(p)


def test_wrong_accessor_size(tmp_path, fox_bytes):
    doc, blob = _split(fox_bytes)
    pos = doc["meshes"][0]["primitives"][0]["attributes"]["POSITION"]
    doc["accessors"][pos]["count"] *= 50
    p = tmp_path / "accessor.glb"
    p.write_bytes(_join(doc, blob))
    with pytest.raises(FormatError, match=rf"accessor.glb: accessor {pos}: needs \d+ bytes"):
        gltf.load_character(p)
    doc, blob = _split(fox_bytes)
    doc["accessors"][pos]["type"] = "VEC2"
    p.write_bytes(_join(doc, blob))
    with pytest.raises(FormatError, match="POSITION: expected"):
        gltf.load_character(p)


def test_morph_only_file_is_refused(tmp_path):
    """A mesh with a morph target animated only through 'weights' has no skeletal motion."""
    g = pygltflib.GLTF2()
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32)
    delta = np.array([[0, 0, 1], [0, 0, 1], [0, 0, 1]], np.float32)
    times = np.array([0, 1], np.float32)
    weights = np.array([0, 1], np.float32)
    blob = pos.tobytes() + delta.tobytes() + times.tobytes() + weights.tobytes()
    g.buffers.append(pygltflib.Buffer(byteLength=len(blob)))
    for off, n in ((0, 36), (36, 36), (72, 8), (80, 8)):
        g.bufferViews.append(pygltflib.BufferView(buffer=0, byteOffset=off, byteLength=n))
    g.accessors += [pygltflib.Accessor(bufferView=0, componentType=5126, count=3, type="VEC3",
                                       min=[0, 0, 0], max=[1, 1, 0]),
                    pygltflib.Accessor(bufferView=1, componentType=5126, count=3, type="VEC3"),
                    pygltflib.Accessor(bufferView=2, componentType=5126, count=2, type="SCALAR", min=[0], max=[1]),
                    pygltflib.Accessor(bufferView=3, componentType=5126, count=2, type="SCALAR")]
    g.meshes.append(pygltflib.Mesh(primitives=[pygltflib.Primitive(
        attributes=pygltflib.Attributes(POSITION=0), targets=[{"POSITION": 1}])], weights=[0.0]))
    g.nodes.append(pygltflib.Node(name="blob", mesh=0))
    g.scenes.append(pygltflib.Scene(nodes=[0]))
    g.animations.append(pygltflib.Animation(
        name="inflate", samplers=[pygltflib.AnimationSampler(input=2, output=3)],
        channels=[pygltflib.AnimationChannel(sampler=0, target=pygltflib.AnimationChannelTarget(node=0, path="weights"))]))
    g.set_binary_blob(blob)
    p = tmp_path / "morph.glb"
    g.save_binary(str(p))
    with pytest.raises(FormatError, match=r"morph.glb: animation 'inflate' only animates morph-target weights"):
        gltf.load(p)
    # the mesh itself is still readable as a (rigid, one-node) character
    assert gltf.load_character(p).meshes[0].num_vertices == 3


def test_unknown_animation_and_missing_buffer(tmp_path, fox_bytes, shared_data):
    with pytest.raises(FormatError, match=r"no animation 'Fly'; the file has \['Survey', 'Walk', 'Run'\]"):
        gltf.load(shared_data / "characters" / "fox" / "fox.glb", animation="Fly")
    doc, blob = _split(fox_bytes)
    p = tmp_path / "nobin.glb"
    js = json.dumps(doc).encode()
    js += b" " * (-len(js) % 4)
    body = struct.pack("<II", len(js), 0x4E4F534A) + js
    p.write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body)
    with pytest.raises(FormatError, match="BIN chunk, which is missing"):
        gltf.load(p)


_JUNK = st.one_of(st.integers(-2 ** 40, 2 ** 40), st.floats(allow_nan=True, allow_infinity=True),
                  st.text(max_size=5), st.none(), st.lists(st.integers(-5, 300), max_size=5),
                  st.booleans(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def _paths(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:40]):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_json_fields_of_a_real_file(tmp_path, fox_bytes, data):
    doc, blob = _split(fox_bytes)
    paths = [p for p in _paths(doc) if p[0] != "images"]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        target = doc
        try:
            for k in path[:-1]:
                target = target[k]
            target[path[-1]] = data.draw(_JUNK)
        except (KeyError, IndexError, TypeError):
            pass
    p = tmp_path / "fuzz_json.glb"
    p.write_bytes(_join(doc, blob))
    _check_outcome(p)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_bytes_of_a_real_file(tmp_path, fox_bytes, data):
    raw = bytearray(fox_bytes)
    json_len = struct.unpack_from("<I", raw, 12)[0]
    for _ in range(data.draw(st.integers(1, 8))):
        # bias half of the flips into the header and JSON chunk, where structure lives
        hi = 20 + json_len if data.draw(st.booleans()) else len(raw)
        i = data.draw(st.integers(0, hi - 1))
        raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    p = tmp_path / "fuzz_bytes.glb"
    p.write_bytes(bytes(raw))
    _check_outcome(p)
