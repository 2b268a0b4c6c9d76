"""FBX import (ufbx): units/axes, skeleton and bind pose, skinned meshes, animation
stacks, and errors on bad input."""
from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema.errors import FormatError
from kinema.io import fbx
from kinema.io.skinning import linear_blend, skinning_matrices
from kinema.motion import kinematics


def _path(shared_data, rel):
    return shared_data / "characters" / rel


def test_flair_animates_with_constant_bone_lengths(shared_data):
    path = _path(shared_data, "flair/flair.fbx")
    assert fbx.animation_names(path) == ["Take 001", "mixamo.com"]
    m = kinema.load(path)                      # default: the first stack that animates
    assert m.name == "mixamo.com" and m.num_joints == 65 and m.fps == 30
    assert all(n.startswith("mixamorig:") for n in m.joint_names)
    gp = m.global_positions()
    assert np.ptp(gp, axis=0).max() > 0.3                   # bones move, in metres
    p = m.parents
    child = np.nonzero(p >= 0)[0]
    lengths = np.linalg.norm(gp[:, child] - gp[:, p[child]], axis=-1)
    np.testing.assert_allclose(lengths, np.repeat(lengths[:1], len(lengths), 0), atol=1e-4)
    # the empty 'Take 001' stack holds the rest pose
    still = fbx.load(path, animation="Take 001")
    assert np.ptp(still.global_positions(), axis=0).max() < 1e-6
    # frame count follows the stack length and the requested rate
    m60 = fbx.load(path, animation=1, fps=60)
    assert m60.fps == 60 and m60.num_frames == 2 * m.num_frames - 1


def test_units_and_axes_are_metres_y_up(shared_data):
    # geno.fbx is Z-up centimetres; flair.fbx Y-up centimetres: both come out Y-up metres
    for rel, height in (("geno/geno.fbx", (1.4, 1.9)), ("flair/flair.fbx", (1.5, 2.0))):
        c = fbx.load_character(_path(shared_data, rel), textures=False)
        ys = np.concatenate([m.positions[:, 1] for m in c.meshes])
        assert height[0] < ys.max() - ys.min() < height[1], rel
        assert abs(ys.min()) < 0.1, rel                       # feet on the ground
        spans = np.ptp(np.concatenate([m.positions for m in c.meshes]), axis=0)
        assert spans[1] == spans.max(), rel                   # tallest along Y
    info = fbx.info(_path(shared_data, "geno/geno.fbx"))
    assert info["file_unit_meters"] == pytest.approx(0.01) and info["has_mesh"] is True
    assert info["animations"] == []


@pytest.mark.parametrize("rel", ["geno/geno.fbx", "dog/dog.fbx", "cranberry/cranberry.fbx",
                                 "flair/flair.fbx", "geno/geno_bind.fbx"])
def test_lbs_of_bind_pose_reproduces_rest_vertices(shared_data, rel):
    c = fbx.load_character(_path(shared_data, rel), textures=False)
    grot, gpos = kinematics.forward(c.bind_rotations.astype(np.float64), c.bind_positions.astype(np.float64),
                                    c.skeleton.parents)
    mats = skinning_matrices(grot, gpos, c.inverse_bind)
    assert c.meshes
    for mesh in c.meshes:
        np.testing.assert_allclose(linear_blend(mesh.positions, mesh.joints, mesh.weights, mats),
                                   mesh.positions, atol=1e-4, err_msg=f"{rel} {mesh.name}")
        np.testing.assert_allclose(mesh.weights.sum(1), 1.0, atol=1e-5)
        assert mesh.indices.max() < mesh.num_vertices and mesh.joints.max() < c.skeleton.num_joints
        # a vertex's main joint lies within the character's size of it (remap sanity)
        main = mesh.joints[np.arange(mesh.num_vertices), np.argmax(mesh.weights, 1)]
        assert np.median(np.linalg.norm(mesh.positions - gpos[main], axis=1)) < 0.15


def test_triangulation_and_materials(shared_data):
    c = fbx.load_character(_path(shared_data, "flair/flair.fbx"), textures=False)
    assert [m.name for m in c.meshes] == ["Beta_Surface", "Beta_Joints"] or len(c.meshes) == 2
    tris = sum(len(m.indices) for m in c.meshes)
    assert tris == 28272 + 20840                            # ufbx's triangle counts of both meshes
    colours = np.array([m.base_color for m in c.meshes])
    assert np.isclose(colours, [0.837, 0.3023, 0.2637, 1.0], atol=1e-3).all(axis=1).any()
    dog = fbx.load_character(_path(shared_data, "dog/dog.fbx"))
    (mesh,) = dog.meshes
    assert mesh.texture is not None and mesh.texture.shape[2] == 4 and mesh.texture.dtype == np.uint8
    assert mesh.uvs is not None and mesh.uvs.shape == (mesh.num_vertices, 2)


def test_cranberry_static_stack_holds_the_rest_pose(shared_data):
    """cranberry.fbx's only stack ('Take 001', 4 s) animates nothing: every frame is the rest pose."""
    path = _path(shared_data, "cranberry/cranberry.fbx")
    m = fbx.load(path)
    assert m.name == "Take 001" and m.num_frames == 122 and m.num_joints == 159
    rest = fbx.load_character(path, textures=False)
    _, gpos = kinematics.forward(rest.bind_rotations, rest.bind_positions, rest.skeleton.parents)
    np.testing.assert_allclose(m.global_positions(), np.broadcast_to(gpos, m.global_positions().shape), atol=1e-5)


def test_bad_input_raises_format_error(tmp_path, shared_data):
    garbage = tmp_path / "garbage.fbx"
    garbage.write_bytes(b"Kaydara FBX Binary  \x00\x1a\x00" + bytes(range(256)) * 4)
    with pytest.raises(FormatError, match="garbage.fbx"):
        fbx.load(garbage)
    truncated = tmp_path / "truncated.fbx"
    truncated.write_bytes(_path(shared_data, "dog/dog.fbx").read_bytes()[:5000])
    with pytest.raises(FormatError, match="truncated.fbx"):
        fbx.load_character(truncated)
    with pytest.raises(FormatError, match="no animation 'nope'"):
        fbx.load(_path(shared_data, "flair/flair.fbx"), animation="nope")


def test_fbx_without_skeleton_is_refused(tmp_path):
    # a valid ASCII FBX holding one mesh and no bones
    text = """; FBX 7.4.0 project file
FBXHeaderExtension:  {
    FBXHeaderVersion: 1003
    FBXVersion: 7400
}
Objects:  {
    Geometry: 1000, "Geometry::Tri", "Mesh" {
        Vertices: *9 { a: 0,0,0,1,0,0,0,1,0 }
        PolygonVertexIndex: *3 { a: 0,1,-3 }
    }
    Model: 2000, "Model::Tri", "Mesh" {
    }
}
Connections:  {
    C: "OO",1000,2000
    C: "OO",2000,0
}
"""
    path = tmp_path / "static.fbx"
    path.write_text(text)
    with pytest.raises(FormatError, match="no skeleton"):
        fbx.load(path)
    with pytest.raises(FormatError, match="static.fbx"):
        fbx.load_character(path)


def test_evaluated_transforms_carry_the_unit_and_axis_conversion(shared_data):
    """geno.fbx is Z-up centimetres: ufbx's evaluated local transforms (what animation
    sampling uses) equal the converted rest transforms, so animated files convert too."""
    import ufbx

    from kinema.io import scene_graph as sg

    def check(s):   # wrappers stay inside this function: none may outlive the session
        anim = s.k(s.scene.anim)
        nodes = s.items(s.scene.nodes)
        for n in nodes[1:]:
            tr = ufbx.evaluate_transform(anim, n, 0.0)
            q = tr.rotation
            m = sg.trs_matrix(np.array(tr.translation), np.array([q.w, q.x, q.y, q.z]), np.array(tr.scale))
            np.testing.assert_allclose(m, fbx._matrix(n.node_to_parent), atol=1e-9)
        return len(nodes)
    assert fbx._with_session(_path(shared_data, "geno/geno.fbx"), check) > 10
    rest = fbx.load(_path(shared_data, "geno/geno.fbx"))
    assert rest.num_frames == 1 and rest.metadata["bind_pose"]
    hips = rest.global_positions()[0, rest.joint_names.index("Hips")]
    assert 0.8 < hips[1] < 0.95 and abs(hips[2]) < 0.1            # ~86 cm up Y, not Z
