"""A hand-built glTF exercising what the real files do not: children stored before their
parents, a node given by a matrix, a scaled and rotated non-joint ancestor, channels on a
subset of nodes with STEP and CUBICSPLINE samplers and non-uniform key times. World joint
positions are checked against scipy-built matrices."""
from __future__ import annotations

import numpy as np
import pygltflib
import pytest
from scipy.spatial.transform import Rotation

from kinema.io import gltf

ARM_Q = Rotation.from_euler("x", -90, degrees=True)      # Z-up armature, like Blender exports
ARM_S = 0.01                                              # centimetres


def _m(t=(0, 0, 0), r=None, s=1.0):
    m = np.eye(4)
    m[:3, :3] = (r.as_matrix() if r is not None else np.eye(3)) * s
    m[:3, 3] = t
    return m


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    # node order: 0 = hand (child of 1), 1 = arm (child of 2), 2 = hips (child of 3), 3 = Armature
    hips_t = np.array([0.0, 0.0, 100.0])
    arm_r = Rotation.from_euler("z", 30, degrees=True)
    arm_m = _m((20.0, 0, 0), arm_r)
    hand_t = np.array([0.0, 30.0, 0.0])
    times_step = np.array([0.0, 0.2, 0.7, 1.0], np.float32)      # non-uniform
    step_vals = np.array([[0, 0, 100], [0, 10, 100], [5, 10, 100], [5, 10, 90]], np.float32)
    times_cubic = np.array([0.0, 0.3, 1.0], np.float32)
    q = Rotation.from_euler("x", [[0], [40], [90]], degrees=True).as_quat().astype(np.float32)
    cubic_vals = np.stack([np.zeros_like(q), q, np.zeros_like(q)], 1).reshape(9, 4)   # flat tangents
    chunks = [times_step.tobytes(), step_vals.tobytes(), times_cubic.tobytes(), cubic_vals.tobytes()]
    blob, offsets = b"", []
    for c in chunks:
        offsets.append(len(blob))
        blob += c
    g = pygltflib.GLTF2()
    g.buffers.append(pygltflib.Buffer(byteLength=len(blob)))
    for off, c in zip(offsets, chunks):
        g.bufferViews.append(pygltflib.BufferView(buffer=0, byteOffset=off, byteLength=len(c)))
    g.accessors += [
        pygltflib.Accessor(bufferView=0, componentType=5126, count=4, type="SCALAR", min=[0.0], max=[1.0]),
        pygltflib.Accessor(bufferView=1, componentType=5126, count=4, type="VEC3"),
        pygltflib.Accessor(bufferView=2, componentType=5126, count=3, type="SCALAR", min=[0.0], max=[1.0]),
        pygltflib.Accessor(bufferView=3, componentType=5126, count=9, type="VEC4")]
    g.nodes += [
        pygltflib.Node(name="hand", translation=list(hand_t)),
        pygltflib.Node(name="arm", matrix=[float(x) for x in arm_m.T.reshape(-1)], children=[0]),
        pygltflib.Node(name="hips", translation=list(hips_t), children=[1]),
        pygltflib.Node(name="Armature", rotation=list(ARM_Q.as_quat()), scale=[ARM_S] * 3, children=[2])]
    g.skins.append(pygltflib.Skin(joints=[0, 1, 2]))                 # the Armature is not a joint
    g.scenes.append(pygltflib.Scene(nodes=[3]))
    g.animations.append(pygltflib.Animation(
        name="subset",
        samplers=[pygltflib.AnimationSampler(input=0, output=1, interpolation="STEP"),
                  pygltflib.AnimationSampler(input=2, output=3, interpolation="CUBICSPLINE")],
        channels=[pygltflib.AnimationChannel(sampler=0, target=pygltflib.AnimationChannelTarget(node=2, path="translation")),
                  pygltflib.AnimationChannel(sampler=1, target=pygltflib.AnimationChannelTarget(node=0, path="rotation"))]))
    g.set_binary_blob(blob)
    path = tmp_path_factory.mktemp("synthetic") / "synthetic.glb"
    g.save_binary(str(path))
    return path, dict(hips_t=hips_t, arm_m=arm_m, hand_t=hand_t, times_step=times_step,
                      step_vals=step_vals, times_cubic=times_cubic, q=q)


def _expected_world(d, t):
    arm_root = _m(r=ARM_Q, s=ARM_S)
    k = np.searchsorted(d["times_step"], t + 1e-9, side="right") - 1
    hips = arm_root @ _m(d["step_vals"][k].astype(float))
    arm = hips @ d["arm_m"]
    # flat tangents: the cubic Hermite basis reduces to smoothstep between keys
    tc = d["times_cubic"].astype(float)
    i = min(np.searchsorted(tc, t, side="right") - 1, len(tc) - 2)
    u = np.clip((t - tc[i]) / (tc[i + 1] - tc[i]), 0, 1)
    h = 3 * u * u - 2 * u ** 3
    qv = (1 - h) * d["q"][i] + h * d["q"][i + 1]
    hand = arm @ _m(d["hand_t"], Rotation.from_quat(qv / np.linalg.norm(qv)))
    return np.array([hips[:3, 3], arm[:3, 3], hand[:3, 3]]), [hips, arm, hand]


def test_joints_are_reordered_parent_first_and_ancestor_folded(synthetic):
    path, d = synthetic
    c = gltf.load_character(path)
    assert c.skeleton.names == ["hips", "arm", "hand"]
    assert list(c.skeleton.parents) == [-1, 0, 1]
    m = gltf.load(path, animation=0, fps=10)
    rest = gltf.load_character(path)
    from kinema.motion import kinematics
    _, gpos = kinematics.forward(rest.bind_rotations, rest.bind_positions, rest.skeleton.parents)
    expected = np.array([(_m(r=ARM_Q, s=ARM_S) @ _m(d["hips_t"]))[:3, 3],
                         (_m(r=ARM_Q, s=ARM_S) @ _m(d["hips_t"]) @ d["arm_m"])[:3, 3],
                         (_m(r=ARM_Q, s=ARM_S) @ _m(d["hips_t"]) @ d["arm_m"] @ _m(d["hand_t"]))[:3, 3]])
    np.testing.assert_allclose(gpos, expected, atol=1e-6)
    assert expected[0, 1] == pytest.approx(1.0)          # 100 cm up the armature's Z = 1 m up Y
    assert m.num_frames == 11


def test_subset_channels_step_and_cubic_against_scipy(synthetic):
    path, d = synthetic
    m = gltf.load(path, animation="subset", fps=10)
    gp = m.global_positions()
    gr = m.global_rotations()
    for f in range(m.num_frames):
        pos, mats = _expected_world(d, f / 10)
        np.testing.assert_allclose(gp[f], pos, atol=1e-5, err_msg=f"frame {f}")
        hand_r = Rotation.from_matrix(mats[2][:3, :3] / ARM_S)
        got = Rotation.from_quat(np.roll(gr[f, 2], -1))
        assert (hand_r.inv() * got).magnitude() < 1e-4
    # the arm has no channel: its local transform is its rest matrix on every frame
    np.testing.assert_allclose(np.ptp(m.positions[:, 1], axis=0), 0.0, atol=1e-7)
    np.testing.assert_allclose(np.ptp(m.rotations[:, 1], axis=0), 0.0, atol=1e-7)


def test_bone_lengths_are_metres_after_folding(synthetic):
    path, d = synthetic
    m = gltf.load(path, fps=10)
    lengths = np.linalg.norm(m.positions[:, 1:], axis=-1)
    np.testing.assert_allclose(lengths[:, 0], 0.2, atol=1e-6)      # 20 cm arm offset
    np.testing.assert_allclose(lengths[:, 1], 0.3, atol=1e-6)      # 30 cm hand offset
