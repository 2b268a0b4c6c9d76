"""Primitive builders, the debug-draw batch and the procedural body (no OpenGL needed)."""
from __future__ import annotations

import numpy as np
import pytest

from kinema.render import geometry
from kinema.render.body import body_capsules
from kinema.render.debug import DebugDraw, as_colors


def _dist_to_segment(p, a, b):
    ab = b - a
    t = np.clip(((p - a) @ ab) / max(ab @ ab, 1e-12), 0, 1)
    return np.linalg.norm(p - (a + t[:, None] * ab), axis=-1)


@pytest.mark.parametrize("a,b,r", [([0, 0, 0], [0, 1, 0], 0.1), ([0.3, 1, -2], [1.3, 0.2, 0.5], 0.05),
                                    ([0, 0, 0], [0, -2, 0], 0.3)])
def test_capsule_surface_is_radius_from_segment(a, b, r):
    a, b = np.array(a, float), np.array(b, float)
    pos, nrm = geometry.capsules(a[None], b[None], r)
    assert pos.shape[0] % 3 == 0 and pos.shape == nrm.shape
    np.testing.assert_allclose(_dist_to_segment(pos.astype(float), a, b), r, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(nrm, axis=-1), 1.0, atol=1e-5)
    # normals point outwards
    centre = (a + b) / 2
    assert np.mean(np.sum((pos - centre) * nrm, axis=-1) > -1e-6) == 1.0
    # triangles are not degenerate
    t = pos.reshape(-1, 3, 3)
    area = np.linalg.norm(np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]), axis=-1)
    assert area.min() > 0


def test_sphere_surface():
    pos, nrm = geometry.spheres([[1.0, 2.0, 3.0], [0, 0, 0]], [0.2, 0.5])
    half = pos.shape[0] // 2
    np.testing.assert_allclose(np.linalg.norm(pos[:half] - [1, 2, 3], axis=-1), 0.2, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(pos[half:], axis=-1), 0.5, atol=1e-5)
    np.testing.assert_allclose(nrm[half:], pos[half:] / 0.5, atol=1e-5)
    t = pos.reshape(-1, 3, 3)
    assert np.linalg.norm(np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]), axis=-1).min() > 0


def test_frames_from_directions_are_rotations_with_y_along_d():
    d = np.random.default_rng(0).normal(size=(50, 3))
    d[0] = [0, 1, 0]
    d[1] = [0, -3, 0]
    r = geometry.frames_from_directions(d)
    np.testing.assert_allclose(r @ r.transpose(0, 2, 1), np.broadcast_to(np.eye(3), r.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(r), 1.0)
    np.testing.assert_allclose(r[:, :, 1], d / np.linalg.norm(d, axis=-1, keepdims=True), atol=1e-12)


def test_cones_and_boxes():
    pos, _ = geometry.cones([[0, 0, 0]], [[0, 0, 2]], 0.5)
    assert pos[:, 2].min() == pytest.approx(0, abs=1e-6) and pos[:, 2].max() == pytest.approx(2)
    assert np.hypot(pos[:, 0], pos[:, 1]).max() == pytest.approx(0.5, abs=1e-6)
    t = np.eye(4)
    t[:3, 3] = [1, 2, 3]
    pos, nrm = geometry.boxes(t[None], [[2, 4, 6]])
    np.testing.assert_allclose(pos.min(0), [0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(pos.max(0), [2, 4, 6], atol=1e-6)


def test_debug_batch_layout():
    d = DebugDraw()
    d.lines(np.zeros((3, 3)), np.ones((3, 3)), (1, 0, 0), width=4)
    d.points(np.zeros((2, 3)), (0, 1, 0, 0.5), size=9)
    d.skeleton(np.array([[0, 0, 0], [0, 1, 0], [0, 2, 0.0]]), [-1, 0, 1])
    d.arrows([[0, 0, 0]], [[1, 0, 0]])
    d.spheres(np.zeros((4, 3)), 0.1, (0, 0, 1))
    d.trajectory(np.random.default_rng(1).normal(size=(6, 3)), directions=np.ones((6, 3)), current=2)
    d.contacts(np.zeros((3, 3)), [True, False, True])
    d.velocities(np.zeros((2, 3)), np.ones((2, 3)))
    d.axes(np.eye(4)[None])
    d.text([0, 1, 0], "hi")
    lines = d.line_vertices()
    n = d.num_lines
    assert n == 3 + 2 + 2 + 3 + 1 + 5 + 6 + 6 + 2 + 3
    assert lines["start"].shape == (6 * n, 3) and lines["params"].shape == (6 * n, 3)
    # first segment: red, 4 px, corners cover both sides and both ends
    np.testing.assert_allclose(lines["color"][:6], [[1, 0, 0, 1]] * 6)
    np.testing.assert_allclose(lines["params"][:6, 2], 4)
    assert set(map(tuple, lines["params"][:6, :2])) == {(-1, 0), (1, 0), (1, 1), (-1, 1)}
    solids = d.solid_vertices()
    k = geometry.sphere_template().shape[0]
    cone = geometry.cone_template()[0].shape[0]
    # 4 spheres + 2 contacts; cones: 1 arrow + 2 velocity arrows
    assert solids["position"].shape[0] == (4 + 2) * k + 3 * cone
    assert len(d.texts) == 1
    d.clear()
    assert d.line_vertices() is None and d.solid_vertices() is None


def test_as_colors():
    np.testing.assert_allclose(as_colors((0.1, 0.2, 0.3), 2), [[0.1, 0.2, 0.3, 1]] * 2, rtol=1e-6)
    per = np.random.default_rng(0).random((5, 4))
    np.testing.assert_allclose(as_colors(per, 5), per, rtol=1e-6)


def test_body_capsules_cover_bones_and_skip_floor_root():
    # static root on the floor, hips 0.95 m above it, a spine and two legs
    pos = np.array([[0, 0, 0], [0, 0.95, 0], [0, 1.4, 0], [0.1, 0.5, 0], [0.1, 0.05, 0], [0, 1.7, 0.0]])
    par = np.array([-1, 0, 1, 1, 3, 2])
    a, b, r = body_capsules(pos, par)
    pairs = {(tuple(x), tuple(y)) for x, y in zip(a, b)}
    assert ((0, 0, 0), (0, 0.95, 0)) not in pairs           # root link left out
    assert len(pairs) == 4
    assert np.all(r > 0) and np.all(r < 0.1)
    # a bone between two joints of a normal skeleton is kept even when it starts at the root
    a2, _, _ = body_capsules(pos[1:] , np.array([-1, 0, 0, 2, 1]))
    assert len(a2) == 4
