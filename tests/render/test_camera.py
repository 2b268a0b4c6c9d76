"""Camera maths and the camera rig (no OpenGL needed)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from kinema.engine.protocols import InputFrame
from kinema.render.camera import CameraRig, look_at, orthographic, perspective, project


def test_look_at_is_a_rigid_transform_putting_the_target_on_minus_z():
    eye, target = np.array([2.0, 1.5, 4.0]), np.array([-0.3, 0.8, 0.1])
    v = look_at(eye, target)
    r = v[:3, :3]
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(r) == pytest.approx(1.0)
    np.testing.assert_allclose(v @ np.append(eye, 1), [0, 0, 0, 1], atol=1e-12)
    t = v @ np.append(target, 1)
    np.testing.assert_allclose(t[:2], 0, atol=1e-12)
    assert t[2] == pytest.approx(-np.linalg.norm(target - eye))
    # camera x axis is horizontal (no roll) for an up vector of +Y
    assert abs(r[0, 1]) < 1e-12


def test_perspective_matches_pinhole_model():
    fovy, aspect, near, far = 50.0, 16 / 9, 0.1, 100.0
    p = perspective(fovy, aspect, near, far)
    f = 1 / np.tan(np.radians(fovy) / 2)
    pts = np.array([[0.3, -0.2, -2.0], [1.0, 0.5, -7.0]])
    c = np.c_[pts, np.ones(2)] @ p.T
    ndc = c[:, :3] / c[:, 3:]
    np.testing.assert_allclose(ndc[:, 0], f / aspect * pts[:, 0] / -pts[:, 2])
    np.testing.assert_allclose(ndc[:, 1], f * pts[:, 1] / -pts[:, 2])
    # near and far planes map to -1 and +1
    for z, want in ((-near, -1.0), (-far, 1.0)):
        c = p @ np.array([0, 0, z, 1.0])
        assert c[2] / c[3] == pytest.approx(want)


def test_orthographic_maps_box_to_cube():
    o = orthographic(2.0, 3.0, 1.0, 11.0)
    np.testing.assert_allclose(o @ [2.0, -3.0, -1.0, 1.0], [1, -1, -1, 1])
    np.testing.assert_allclose(o @ [-2.0, 3.0, -11.0, 1.0], [-1, 1, 1, 1])


def test_project_pixels_from_top_left_against_scipy_rotation():
    # camera at the origin rotated 30 degrees about Y, looking along its -Z
    rot = Rotation.from_euler("y", 30, degrees=True)
    fwd = rot.apply([0, 0, -1.0])
    view = look_at([0, 0, 0], fwd)
    proj = perspective(60.0, 2.0, 0.1, 50.0)
    w, h = 400, 200
    # a point 5 m ahead, 1 m up in camera space
    cam_pt = np.array([0.0, 1.0, -5.0])
    world = rot.apply(cam_pt)
    px, depth, vis = project(world, proj @ view, w, h)
    f = 1 / np.tan(np.radians(30))
    assert px[0] == pytest.approx(w / 2)
    assert px[1] == pytest.approx(h / 2 - f * (1 / 5) * h / 2)
    assert vis and -1 < depth < 1
    _, _, vis_behind = project(-world, proj @ view, w, h)
    assert not vis_behind


def test_rig_modes_and_snap():
    rig = CameraRig("orbit")
    rig.set_focus([1.0, 0.9, 2.0], heading=np.pi / 2)
    rig.yaw, rig.pitch, rig.distance = 0.0, 0.0, 3.0
    cam = rig.snap()
    np.testing.assert_allclose(cam.position, [1.0, 0.9, 5.0])
    np.testing.assert_allclose(cam.target, [1.0, 0.9, 2.0])
    rig.set_mode("follow")
    cam = rig.snap()   # heading +X: camera behind, i.e. at -X
    np.testing.assert_allclose(cam.position, [1.0 - rig.follow_distance, 0.9 + rig.follow_height, 2.0])
    rig.set_fixed([5, 5, 5], None)
    np.testing.assert_allclose(rig.snap().target, [1.0, 0.9, 2.0])
    with pytest.raises(ValueError):
        rig.set_mode("dolly")


def test_rig_blends_smoothly_between_modes():
    rig = CameraRig("orbit", halflife=0.2)
    rig.snap()
    start = rig.camera.position.copy()
    rig.set_fixed([6.0, 3.0, -6.0], [0, 1, 0])
    goal = rig.goal().position
    dist = [np.linalg.norm(rig.update(1 / 30).position - goal) for _ in range(60)]
    assert np.all(np.diff(dist) < 0)                     # monotone approach, no jump
    first_step = np.linalg.norm(start - goal) - dist[0]
    assert 0 < first_step < 0.2 * np.linalg.norm(start - goal)
    # exponential damping: 10 half-lives after 2 s
    assert dist[-1] == pytest.approx(np.linalg.norm(start - goal) * 0.5 ** 10, rel=1e-6)


def test_free_fly_moves_with_keys_and_orbit_with_mouse():
    rig = CameraRig("orbit")
    rig.snap()
    rig.set_mode("free")
    p0 = rig.free_position.copy()
    fwd = rig._free_forward()
    rig.handle_input(InputFrame(keys_down=frozenset({"w"})), 0.5)
    np.testing.assert_allclose(rig.free_position - p0, fwd * rig.free_speed * 0.5)
    rig.set_mode("orbit")
    yaw = rig.yaw
    rig.handle_input(InputFrame(mouse_buttons=frozenset({"left"}), mouse_delta=np.array([10.0, 0.0])), 1 / 60)
    assert rig.yaw < yaw
    d = rig.distance
    rig.handle_input(InputFrame(mouse_wheel=2.0), 1 / 60)
    assert rig.distance == pytest.approx(d * 0.81)


def test_pixel_ray_inverts_project_and_hits_what_it_points_at():
    from kinema.render.camera import Camera, pixel_ray, project, ray_plane, ray_sphere
    cam = Camera(np.array([2.0, 1.8, 2.6]), np.array([0.0, 1.1, 0.0]))
    w, h = 640, 360
    vp = cam.view_projection(w / h)
    rng = np.random.default_rng(0)
    for p in rng.uniform([-1, 0, -1], [1, 2, 1], (20, 3)):
        px = project(p, vp, w, h)[0]
        o, d = pixel_ray(px, vp, w, h)
        assert abs(np.linalg.norm(d) - 1) < 1e-9
        off = (p - o) - ((p - o) @ d) * d              # the point lies on the ray
        assert np.linalg.norm(off) < 1e-6
        assert ray_sphere(o, d, p, 0.05) is not None
        assert ray_sphere(o, d, p + np.cross(d, [0, 1, 0]) * 0.2, 0.05) is None
        hit = ray_plane(o, d, p, p - cam.position)
        np.testing.assert_allclose(hit, p, atol=1e-6)


@pytest.mark.parametrize("clip", ["walk_forward", "run_forward", "walk_and_turn_left"])
def test_subject_camera_keeps_a_travelling_clip_in_frame(sample_data, clip):
    """The demos' default camera: sized from the figure's bounds on the first frame, then
    following it with the rig's damping. Every joint of a bundled walk or run (1.2-3.2 m
    of travel) projects inside a 640x360 image in every frame, the figure spans at
    least a third of the image height, and the camera has moved with it."""
    import kinema.io
    from kinema.render.camera import SubjectCamera

    m = kinema.io.load(sample_data / "games105" / f"{clip}.bvh")
    g = m.global_positions()
    travel = np.linalg.norm((g[-1, 0] - g[0, 0])[[0, 2]])
    assert travel > 1.0
    rig, view = CameraRig(), SubjectCamera()
    w, h = 640, 360
    heights, start = [], None
    for f in range(m.num_frames):
        view.frame(rig, g[f])
        cam = rig.update(1.0 / m.fps)
        start = cam.position.copy() if start is None else start
        px, _, visible = project(g[f], cam.view_projection(w / h), w, h)
        assert visible.all(), (clip, f, px[~visible])
        heights.append(np.ptp(px[:, 1]) / h)
    assert min(heights) > 0.33, min(heights)
    assert max(heights) < 0.9, max(heights)             # framed, not a close-up
    assert np.linalg.norm((cam.position - start)[[0, 2]]) > 0.8 * travel


def test_subject_camera_sizes_from_the_bounds_and_keeps_the_users_zoom():
    """A figure twice as tall gets a camera twice as far; after the first frame the rig's
    distance is the user's (a wheel zoom stays), unless refit asks for the bounds each time."""
    from kinema.render.camera import SubjectCamera

    pose = np.array([[0.0, 0.0, 0.0], [0.0, 0.9, 0.0], [0.0, 1.7, 0.0], [0.2, 1.2, 0.1]])
    a, b = CameraRig(), CameraRig()
    SubjectCamera().frame(a, pose)
    SubjectCamera().frame(b, 2 * pose)
    assert b.distance == pytest.approx(2 * a.distance) and a.mode == "orbit"
    np.testing.assert_allclose(a.focus, [0.1, 0.85, 0.05])
    view = SubjectCamera()
    view.frame(a, pose)
    a.distance = 9.0                                      # the user zoomed out
    view.frame(a, pose + [3.0, 0.0, 0.0])
    assert a.distance == 9.0 and a.focus[0] == pytest.approx(3.1)
    fixed = SubjectCamera(mode="fixed", yaw=0.0, pitch=0.0, refit=True)
    fixed.frame(a, pose)
    fixed.frame(a, 2 * pose)
    np.testing.assert_allclose(a.fixed_position, a.focus + [0.0, 0.0, a.distance])
    assert a.distance == pytest.approx(b.distance) and a.mode == "fixed"
