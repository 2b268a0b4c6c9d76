"""glTF/GLB import on the real characters: skins, hierarchy folding, every animation,
samplers, meshes and skinning, checked against pygltflib-read raw data and scipy."""
from __future__ import annotations

import numpy as np
import pygltflib
import pytest
from scipy.interpolate import CubicHermiteSpline
from scipy.spatial.transform import Rotation, Slerp

import kinema
from kinema.io import gltf
from kinema.io.skinning import linear_blend, skinning_matrices
from kinema.motion import kinematics

CHARS = "characters"


def _char(shared_data, rel):
    return shared_data / CHARS / rel


def _oracle_world(path):
    """name -> world 4x4 of every node, computed from pygltflib's parse (independent code)."""
    g = pygltflib.GLTF2().load(str(path))
    parent = {c: i for i, n in enumerate(g.nodes) for c in (n.children or [])}

    def local(n):
        if n.matrix is not None:
            return np.array(n.matrix, float).reshape(4, 4).T
        m = np.eye(4)
        if n.rotation is not None:
            m[:3, :3] = Rotation.from_quat(n.rotation).as_matrix()
        if n.scale is not None:
            m[:3, :3] = m[:3, :3] * np.array(n.scale)[None, :]
        if n.translation is not None:
            m[:3, 3] = n.translation
        return m

    def world(i):
        m = local(g.nodes[i])
        return world(parent[i]) @ m if i in parent else m

    return g, {g.nodes[i].name: world(i) for i in range(len(g.nodes))}


def _bone_lengths(motion):
    gp = motion.global_positions()
    p = motion.parents
    child = np.nonzero(p >= 0)[0]
    return np.linalg.norm(gp[:, child] - gp[:, p[child]], axis=-1)


def test_fox_has_its_three_animations(shared_data):
    path = _char(shared_data, "fox/fox.glb")
    assert gltf.animation_names(path) == ["Survey", "Walk", "Run"]
    info = gltf.info(path)
    assert info["animations"] == ["Survey", "Walk", "Run"] and info["has_mesh"] is True
    motions = [kinema.load(path, animation=name) for name in ("Survey", "Walk", "Run")]
    assert [m.name for m in motions] == ["Survey", "Walk", "Run"]
    g = pygltflib.GLTF2().load(str(path))
    for m, anim in zip(motions, g.animations):
        acc = g.accessors[anim.samplers[0].input]
        duration = acc.max[0] - acc.min[0]
        assert m.num_joints == 24 and m.fps == 24
        assert m.num_frames == int(np.floor(duration * 24 + 1e-6)) + 1
        assert np.ptp(m.global_positions(), axis=0).max() > 1.0      # it moves
    # different clips really differ, and index selection matches names
    assert not np.allclose(motions[1].rotations[:5], motions[2].rotations[:5])
    np.testing.assert_array_equal(kinema.load(path, animation=2).rotations, motions[2].rotations)
    every = gltf.load_all(path)
    assert [m.name for m in every] == ["Survey", "Walk", "Run"]
    np.testing.assert_array_equal(every[1].positions, motions[1].positions)


def test_robot_expressive_every_animation_loads_and_moves(shared_data):
    path = _char(shared_data, "robot_expressive/robot_expressive.glb")
    names = gltf.animation_names(path)
    assert len(names) == 14 and {"Dance", "Walking", "Running", "Jump", "Wave"} <= set(names)
    for name in names:
        m = gltf.load(path, animation=name)
        assert m.num_joints == 43 and m.num_frames > 1 and m.name == name
        assert np.isfinite(m.rotations).all() and np.isfinite(m.positions).all()
        moving = np.ptp(m.global_positions(), axis=0).max()
        assert moving > 1e-3, name


def test_xbot_animates_with_constant_bone_lengths(shared_data):
    path = _char(shared_data, "xbot/xbot.glb")
    names = gltf.animation_names(path)
    assert len(names) == 7
    for name in ("walk", "run"):
        m = gltf.load(path, animation=name)
        gp = m.global_positions()
        assert np.ptp(gp, axis=0).max() > 0.2                  # bones move (metres)
        lengths = _bone_lengths(m)
        np.testing.assert_allclose(lengths, lengths[:1].repeat(len(lengths), 0), atol=1e-4)
        assert 1.5 < gp[0, :, 1].max() - gp[0, :, 1].min() < 2.0   # a human in metres


def test_armature_scale_and_rotation_are_folded_into_world_positions(shared_data):
    # xbot's skeleton hangs under an 'Armature' node with scale 0.01; geno under a RootNode
    for rel in ("xbot/xbot.glb", "geno/geno.glb", "dog/dog.glb"):
        path = _char(shared_data, rel)
        _, world = _oracle_world(path)
        m = gltf.load(path, animation=None) if not gltf.animation_names(path) else None
        c = gltf.load_character(path, textures=False)
        _, gpos = kinematics.forward(c.bind_rotations.astype(np.float64), c.bind_positions.astype(np.float64),
                                     c.skeleton.parents)
        expected = np.array([world[n][:3, 3] for n in c.skeleton.names])
        np.testing.assert_allclose(gpos, expected, atol=1e-5, err_msg=rel)
        assert np.all(c.skeleton.parents < np.arange(c.skeleton.num_joints))
        if m is not None:
            np.testing.assert_allclose(m.global_positions()[0], expected, atol=1e-5)


def test_skin_joints_only_and_remapped_mesh_joints(shared_data):
    path = _char(shared_data, "geno/geno.glb")
    g = pygltflib.GLTF2().load(str(path))
    c = gltf.load_character(path)
    assert sorted(c.skeleton.names) == sorted(g.nodes[j].name for j in g.skins[0].joints)
    (mesh,) = c.meshes
    # joint indices are into the character skeleton: a vertex's main joint is close to it
    _, gpos = kinematics.forward(c.bind_rotations, c.bind_positions, c.skeleton.parents)
    main = mesh.joints[np.arange(mesh.num_vertices), np.argmax(mesh.weights, 1)]
    assert np.median(np.linalg.norm(mesh.positions - gpos[main], axis=1)) < 0.12
    # and they name the same joints as the file's JOINTS_0 via the skin
    raw_j = g.accessors[g.meshes[0].primitives[0].attributes.JOINTS_0]
    assert mesh.joints.max() < c.skeleton.num_joints and raw_j.count == mesh.num_vertices


@pytest.mark.parametrize("rel", ["fox/fox.glb", "geno/geno.glb", "dog/dog.glb",
                                 "cranberry/cranberry.glb", "xbot/xbot.glb"])
def test_lbs_of_bind_pose_reproduces_rest_vertices(shared_data, rel):
    c = gltf.load_character(_char(shared_data, rel), textures=False)
    grot, gpos = kinematics.forward(c.bind_rotations.astype(np.float64), c.bind_positions.astype(np.float64),
                                    c.skeleton.parents)
    mats = skinning_matrices(grot, gpos, c.inverse_bind)
    for mesh in c.meshes:
        skinned = linear_blend(mesh.positions, mesh.joints, mesh.weights, mats)
        np.testing.assert_allclose(skinned, mesh.positions, atol=1e-4, err_msg=f"{rel} {mesh.name}")
        np.testing.assert_allclose(mesh.weights.sum(1), 1.0, atol=1e-5)


def test_robot_expressive_rest_pose_differs_from_bind_pose_only_at_the_fingers(shared_data):
    """RobotExpressive's node rest pose curls the fingers away from the pose its inverse
    bind matrices were made in, so its skinned hands deform at rest (as in any glTF
    viewer); every other mesh is rigid on a joint and stays put."""
    c = gltf.load_character(_char(shared_data, "robot_expressive/robot_expressive.glb"))
    grot, gpos = kinematics.forward(c.bind_rotations.astype(np.float64), c.bind_positions.astype(np.float64),
                                    c.skeleton.parents)
    mats = skinning_matrices(grot, gpos, c.inverse_bind)
    for mesh in c.meshes:
        err = np.abs(linear_blend(mesh.positions, mesh.joints, mesh.weights, mats) - mesh.positions).max()
        if mesh.name.startswith("Hand"):
            assert err > 1e-3
        else:
            assert err < 1e-4, mesh.name
    colours = np.array([m.base_color for m in c.meshes])
    main = np.array([0.590328, 0.291314, 0.038338, 1.0])               # the 'Main' material
    assert np.isclose(colours, main, atol=1e-5).all(axis=1).any()


def test_meshes_normals_uvs_and_textures(shared_data):
    fox = gltf.load_character(_char(shared_data, "fox/fox.glb"))
    (mesh,) = fox.meshes
    assert mesh.texture is not None and mesh.texture.shape == (1024, 1024, 4) and mesh.texture.dtype == np.uint8
    assert mesh.uvs.shape == (mesh.num_vertices, 2)
    assert np.ptp(mesh.texture[..., :3]) > 50                        # a real picture, not a fill
    xbot = gltf.load_character(_char(shared_data, "xbot/xbot.glb"), textures=False)
    assert len(xbot.meshes) == 2
    for m in xbot.meshes:
        np.testing.assert_allclose(np.linalg.norm(m.normals, axis=1), 1.0, atol=1e-3)
        assert m.indices.max() < m.num_vertices and m.indices.dtype == np.uint32
    assert fox.animations == ["Survey", "Walk", "Run"]


def test_default_fps_is_the_apparent_source_rate_and_resampling(shared_data):
    path = _char(shared_data, "fox/fox.glb")
    m24 = gltf.load(path, animation="Walk")
    m60 = gltf.load(path, animation="Walk", fps=60)
    assert m24.fps == 24 and m60.fps == 60
    assert m60.num_frames == pytest.approx(m24.num_frames * 60 / 24, abs=2)
    # every 5th frame at 60 fps is a frame at 24 fps (same instants)
    np.testing.assert_allclose(m60.global_positions()[::5][:len(m24) // 2],
                               m24.global_positions()[::2][:len(m24) // 2], atol=1e-3)


# ---------------------------------------------------------------------- samplers
def _keys():
    t = np.array([0.0, 0.1, 0.35, 0.4, 1.0])               # non-uniform
    rng = np.random.default_rng(0)
    return t, rng, np.linspace(-0.1, 1.2, 57)


def test_linear_and_step_samplers_match_numpy_with_nonuniform_keys():
    t, rng, s = _keys()
    v = rng.normal(size=(5, 3))
    lin = gltf.sample_channel(t, v, "LINEAR", s, rotation=False)
    for c in range(3):
        np.testing.assert_allclose(lin[:, c], np.interp(s, t, v[:, c]), atol=1e-12)
    step = gltf.sample_channel(t, v, "STEP", s, rotation=False)
    idx = np.clip(np.searchsorted(t, s, side="right") - 1, 0, 4)
    np.testing.assert_allclose(step, v[idx])


def test_linear_rotation_sampler_is_slerp():
    t, rng, s = _keys()
    r = Rotation.random(5, random_state=1)
    wxyz = np.roll(r.as_quat(), 1, axis=1)
    from kinema.io.scene_graph import continuous
    out = gltf.sample_channel(t, continuous(wxyz), "LINEAR", s, rotation=True)
    inside = (s >= 0) & (s <= 1)
    ref = Slerp(t, r)(s[inside])
    got = Rotation.from_quat(np.roll(out[inside], -1, axis=1))
    assert np.max((ref.inv() * got).magnitude()) < 1e-6


def test_cubic_spline_sampler_matches_scipy_hermite():
    t, rng, s = _keys()
    val, tin, tout = rng.normal(size=(3, 5, 3))
    packed = np.stack([tin, val, tout], 1).reshape(15, 3)
    out = gltf.sample_channel(t, packed, "CUBICSPLINE", s, rotation=False)
    inside = (s >= 0) & (s <= 1)
    # glTF uses out-tangent of k and in-tangent of k+1 per segment: check segment by segment
    for k in range(4):
        seg = inside & (s >= t[k]) & (s <= t[k + 1])
        spline = CubicHermiteSpline(t[k:k + 2], val[k:k + 2], np.stack([tout[k], tin[k + 1]]))
        np.testing.assert_allclose(out[seg], spline(s[seg]), atol=1e-9)
    np.testing.assert_allclose(out[s < 0], np.repeat(val[:1], (s < 0).sum(), 0))


def test_kinema_info_json_lists_animations_and_mesh(shared_data):
    import json
    import subprocess
    import sys
    path = _char(shared_data, "robot_expressive/robot_expressive.glb")
    out = subprocess.run([sys.executable, "-m", "kinema.cli", "info", "--json", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    assert facts["animations"] == gltf.animation_names(path) and facts["has_mesh"] is True
    assert facts["name"] == "Dance" and len(facts["joints"]) == 43
