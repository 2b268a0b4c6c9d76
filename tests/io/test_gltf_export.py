"""GLB export: files pass pygltflib's loader and validator and re-import to the same
motion (1e-5) and character."""
from __future__ import annotations

import numpy as np
import pygltflib
import pytest
from pygltflib.validator import validate

import kinema
from kinema.errors import KinemaError
from kinema.io import gltf
from kinema.io.gltf_export import save_glb
from kinema.motion import Motion, Skeleton

pytestmark = pytest.mark.filterwarnings("ignore:pygltf.utils.validator is a provisional function")


def _same_motion(a: Motion, b: Motion, atol: float) -> None:
    assert a.joint_names == b.joint_names
    np.testing.assert_array_equal(a.parents, b.parents)
    assert a.num_frames == b.num_frames and a.fps == pytest.approx(b.fps)
    np.testing.assert_allclose(a.positions, b.positions, atol=atol)
    np.testing.assert_allclose(a.global_positions(), b.global_positions(), atol=atol)
    dots = np.abs(np.sum(a.rotations.astype(np.float64) * b.rotations, axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=atol)


def test_save_load_round_trip_xbot_walk(shared_data, tmp_path):
    m = gltf.load(shared_data / "characters" / "xbot" / "xbot.glb", animation="walk")
    out = kinema.save(m, tmp_path / "walk.glb")
    g = pygltflib.GLTF2().load(str(out))
    validate(g)                                          # raises on schema/accessor problems
    assert len(g.animations) == 1 and g.animations[0].name == "walk" and len(g.skins) == 1
    _same_motion(kinema.load(out), m, atol=1e-5)


def test_round_trip_odd_fps_and_synthetic_hierarchy(tmp_path):
    rng = np.random.default_rng(3)
    sk = Skeleton(["root", "a", "b", "c"], np.array([-1, 0, 1, 0]), rng.normal(size=(4, 3)))
    rot = rng.normal(size=(17, 4, 4))
    rot /= np.linalg.norm(rot, axis=-1, keepdims=True)
    pos = np.broadcast_to(sk.offsets, (17, 4, 3)).copy()
    pos[:, 0] += rng.normal(size=(17, 3))
    m = Motion(sk, 29.97, rot, pos, name="clip")
    out = kinema.save(m, tmp_path / "clip.glb")
    back = kinema.load(out)
    assert back.fps == pytest.approx(29.97)               # stored in extras, not snapped to 30
    _same_motion(back, m, atol=1e-5)


def test_character_and_several_animations_round_trip(shared_data, tmp_path):
    src = shared_data / "characters" / "fox" / "fox.glb"
    char = gltf.load_character(src)
    motions = [gltf.load(src, animation=n) for n in char.animations]
    out = save_glb(tmp_path / "fox.glb", char.skeleton, motions, character=char)
    validate(pygltflib.GLTF2().load(str(out)))
    assert gltf.animation_names(out) == ["Survey", "Walk", "Run"]
    scale = np.ptp(char.meshes[0].positions, axis=0).max()     # the fox is ~100 units long
    for name, m in zip(char.animations, motions):
        _same_motion(gltf.load(out, animation=name), m, atol=1e-5 * scale)
    back = gltf.load_character(out)
    (a,), (b,) = char.meshes, back.meshes
    np.testing.assert_allclose(b.positions, a.positions, atol=1e-5 * scale)
    np.testing.assert_array_equal(b.indices, a.indices)
    np.testing.assert_allclose(b.weights, a.weights, atol=1e-6)
    np.testing.assert_array_equal(b.joints[b.weights > 0], a.joints[a.weights > 0])
    np.testing.assert_array_equal(b.texture, a.texture)                 # PNG is lossless
    np.testing.assert_allclose(back.inverse_bind, char.inverse_bind, atol=1e-4 * scale)


def test_export_refuses_a_motion_on_another_skeleton(tmp_path):
    a = Motion.rest(Skeleton(["r", "x"], np.array([-1, 0]), np.zeros((2, 3))))
    b = Motion.rest(Skeleton(["r", "y"], np.array([-1, 0]), np.zeros((2, 3))))
    with pytest.raises(KinemaError, match="skeleton"):
        save_glb(tmp_path / "bad.glb", a.skeleton, [a, b])


@pytest.mark.parametrize("layout", ["datauri", "binfile"])
def test_gltf_json_with_embedded_or_external_buffers(shared_data, tmp_path, layout):
    """The same file as .gltf JSON with a data-URI buffer or a side .bin loads identically."""
    import base64
    import json

    from kinema.io.gltf_document import parse_glb
    src = shared_data / "characters" / "fox" / "fox.glb"
    text, blob = parse_glb(src.read_bytes(), src)
    doc = json.loads(text)
    if layout == "datauri":
        doc["buffers"][0]["uri"] = "data:application/octet-stream;base64," + base64.b64encode(blob).decode()
    else:
        doc["buffers"][0]["uri"] = "fox%20data.bin"                    # URI-escaped file name
        (tmp_path / "fox data.bin").write_bytes(blob)
    out = tmp_path / "fox.gltf"
    out.write_text(json.dumps(doc))
    a, b = gltf.load(src, animation="Walk"), gltf.load(out, animation="Walk")
    _same_motion(b, a, atol=1e-6)
    ca, cb = gltf.load_character(src), gltf.load_character(out)
    np.testing.assert_array_equal(cb.meshes[0].positions, ca.meshes[0].positions)
    np.testing.assert_array_equal(cb.meshes[0].texture, ca.meshes[0].texture)
