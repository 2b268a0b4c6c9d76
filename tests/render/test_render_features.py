"""Debug drawing, several characters, cameras, GUI, capture and recording, rendered for real."""
from __future__ import annotations

import inspect
import os

import imageio.v2 as imageio
import numpy as np
import pytest
from render_util import neighbourhood, render

from kinema.engine.protocols import InputFrame, RendererBackend


def colour_near(img, px, rgb, tol=60, k=1) -> np.ndarray:
    """For each pixel position: does a pixel within k have roughly colour ``rgb`` (0-255)?"""
    d = np.abs(neighbourhood(img, px, k).astype(int) - np.asarray(rgb)).max(axis=-1)
    return (d < tol).any(axis=1)


def plain(r):
    for k in ("shadows", "ssao", "bloom", "fxaa"):
        setattr(r.effects, k, False)


def test_renderer_implements_the_engine_protocol(renderer):
    for name, member in inspect.getmembers(RendererBackend, inspect.isfunction):
        if name.startswith("_"):
            continue
        mine = getattr(renderer, name)
        want = [p for p in inspect.signature(member).parameters if p != "self"]
        have = list(inspect.signature(mine).parameters)
        assert have[:len(want)] == want, name
    assert renderer.ui is not None
    assert renderer.is_open()
    inp = renderer.read_input()                                # headless: no input
    assert isinstance(inp, InputFrame)
    assert not (inp.keys_down or inp.keys_pressed or inp.mouse_buttons or inp.mouse_wheel)
    assert not inp.mouse_delta.any()


def test_debug_primitives_land_where_projected(fresh):
    plain(fresh)
    fresh.effects.floor = False
    rng = np.random.default_rng(3)
    a = rng.uniform([-1.5, 0.2, -1], [1.5, 1.8, 1], size=(2000, 3))
    b = a + rng.normal(scale=0.05, size=a.shape)

    def scene(r):
        r.draw_lines(a, b, (0.5, 0.5, 0.5), 1.0)              # thousands of small lines: batched
        r.draw_sphere([[0.8, 1.6, 0.3]], 0.12, (1.0, 0.0, 0.0))
        r.draw_line([-1.2, 0.3, 1.2], [-0.2, 0.3, 1.2], (0.0, 1.0, 0.0), 6.0)
        r.draw_points([[0.5, 0.4, 1.3]], (0.0, 0.0, 1.0), 12.0)
        r.draw_arrow([0.9, 0.3, 1.0], [1.4, 0.3, 1.0], (1.0, 1.0, 0.0), 5.0)
        r.draw_text([-0.8, 1.9, 0.8], "label", (1.0, 0.0, 1.0), 20)

    img = render(fresh, scene)
    assert fresh.gl_errors() == []
    pts = np.array([[0.8, 1.6, 0.3], [-0.7, 0.3, 1.2], [0.5, 0.4, 1.3], [1.15, 0.3, 1.0]])
    px, _, vis = fresh.project(pts)
    assert vis.all()
    assert colour_near(img, px[:1], (235, 40, 40))[0]         # lit red sphere
    assert colour_near(img, px[1:2], (0, 255, 0), 10)[0]      # unlit green line, exact colour
    assert colour_near(img, px[2:3], (0, 0, 255), 10)[0]      # blue point
    assert colour_near(img, px[3:4], (255, 255, 0), 10)[0]    # yellow arrow shaft
    tp, _, _ = fresh.project(np.array([[-0.8, 1.9, 0.8]]))
    x, y = np.round(tp[0]).astype(int)
    patch = img[y:y + 20, x:x + 60].astype(int)
    assert ((np.abs(patch - [255, 0, 255]).max(-1)) < 10).sum() > 20   # magenta text drawn there
    # the sky far from everything stays sky
    sky = np.asarray(fresh.effects.sky_color) * 255
    assert np.abs(img[2, 2].astype(float) - sky).max() < 10


def test_skeleton_trajectory_contacts_velocities(fresh):
    plain(fresh)
    pos = np.array([[0, 1.0, 0], [0, 1.5, 0], [0.3, 1.5, 0], [0, 0.5, 0]])
    par = np.array([-1, 0, 1, 0])
    traj = np.stack([np.linspace(-1, 1, 9), np.full(9, 0.02), np.linspace(0.5, 1.5, 9)], 1)

    def scene(r):
        r.draw_skeleton(pos, par, (0.0, 1.0, 1.0, 1.0), width=5.0)
        r.draw_trajectory(traj, current=4, past_color=(0, 0, 1.0), future_color=(1.0, 0.5, 0.0))
        r.draw_contacts(np.array([[0.6, 0.05, -0.5], [-0.6, 0.05, -0.5]]), [True, False], color=(1, 0, 0))
        r.draw_velocities(pos[:1] + [0.6, 0, 0], np.array([[0, 0, 5.0]]), scale=0.1, color=(1, 0, 1))

    img = render(fresh, scene)
    mid = (pos[1:] + pos[par[1:]]) / 2
    px, _, _ = fresh.project(mid)
    assert colour_near(img, px, (0, 255, 255), 10).all()
    px, _, vis = fresh.project(traj)
    assert vis[:7].all()
    assert colour_near(img, px[:3], (0, 0, 255), 10).all()
    assert colour_near(img, px[5:7], (255, 128, 0), 10).all()
    px, _, _ = fresh.project(np.array([[0.6, 0.05, -0.5], [-0.6, 0.05, -0.5]]))
    near_red = colour_near(img, px, (220, 40, 40), 70)
    assert near_red[0] and not near_red[1]                    # only the contact foot is marked
    px, _, _ = fresh.project(np.array([[0.6, 1.0, 0.25]]))
    assert colour_near(img, px, (255, 0, 255), 10)[0]


def test_several_characters_each_in_its_own_colour(fresh, geno):
    model = fresh.model_for(geno)
    rot, pos = model.bind_pose()
    tints = [(1.0, 0.15, 0.15, 1), (0.15, 1.0, 0.15, 1), (0.15, 0.15, 1.0, 1)]
    offsets = np.array([[-1.3, 0, 0], [0, 0, 0], [1.3, 0, 0]])
    fresh.camera.set_fixed([0.0, 1.4, 5.0], [0.0, 0.9, 0.0])
    fresh.camera.snap()
    img = render(fresh, lambda r: [r.draw_character(model, rot, pos + o, tint=t) for o, t in zip(offsets, tints)])
    hips = pos[geno.skeleton.names.index("Spine1")]
    px, _, _ = fresh.project(hips + offsets)
    for k in range(3):
        c = neighbourhood(img, px[k:k + 1], 1)[0].astype(int).mean(0)
        assert np.argmax(c) == k and c[k] > c.sum() / 3 + 25, (k, c)


def test_follow_camera_centres_the_focus(fresh):
    plain(fresh)
    fresh.camera.set_mode("follow")
    focus = np.array([3.0, 1.0, -2.0])
    fresh.camera.set_focus(focus, heading=0.7)
    fresh.camera.snap()
    img = render(fresh, lambda r: r.draw_sphere(focus, 0.1, (1.0, 0.0, 0.0)))
    h, w = img.shape[:2]
    px, _, _ = fresh.project(focus[None])
    np.testing.assert_allclose(px[0], [w / 2, h / 2], atol=1e-6)
    c = img[int(px[0, 1]), int(px[0, 0])].astype(int)
    assert c[0] > 80 and c[1] < 30 and c[2] < 30               # the red sphere, lit or not
    # the camera sits behind the focus along the heading
    back = fresh.camera.camera.position - focus
    assert np.dot(back[[0, 2]], [np.sin(0.7), np.cos(0.7)]) < 0


def test_gui_widgets_draw_and_keep_values_without_input(fresh):
    plain(fresh)
    state = {}

    def gui(ui):
        with ui.panel("Panel", 10, 10, 220):
            state["clicked"] = ui.button("button")
            state["checked"] = ui.checkbox("check", True)
            state["speed"] = ui.slider("speed", 0.75, 0.0, 2.0)
            state["mode"] = ui.dropdown("mode", ["a", "b", "c"], 2)
            ui.label("text")
            ui.plot("curve", {"sin": np.sin(np.linspace(0, 6, 60)), "cos": np.cos(np.linspace(0, 6, 60))})
            ui.bars("bars", [1.0, 2.0, 3.0], labels=["x", "y", "z"])

    base = render(fresh, lambda r: None)
    render(fresh, lambda r: None, gui)     # first frame measures the panel height
    img = render(fresh, lambda r: None, gui)
    assert state == {"clicked": False, "checked": True, "speed": pytest.approx(0.75), "mode": 2}
    diff = np.abs(img.astype(int) - base.astype(int)).max(-1) > 30
    assert diff[10:200, 10:230].mean() > 0.3                   # the panel is there
    assert diff[:, 300:].mean() < 0.001                        # and nowhere else
    # the plot panel holds curve pixels in the palette's first colour
    assert ((np.abs(img[:, 10:230].astype(int) - [242, 115, 64]).max(-1)) < 40).sum() > 30


def test_panels_stay_inside_the_image_and_clear_of_each_other(fresh):
    """Panels asked for at the same spot stack instead of covering one another, one asked
    for past the right edge moves inside, and a text panel is as wide as its longest line
    (the demos' panels: a program's, the profiler's, one anchored to the right edge)."""
    plain(fresh)
    long = "step 12345  (4 per frame)  loss 0.012345  validation 0.067890  and more text"
    boxes = {}

    def gui(ui):
        ui.lines("first", ["one line", "two lines"])
        ui.lines("second", [long])
        with ui.panel("right", x=fresh.width - 100, y=40, width=300):
            ui.label("anchored past the edge")
        boxes.update(zip(("first", "second", "right"), ui._panels))

    render(fresh, lambda r: None, gui)        # the first frame measures the heights
    at_first = dict(boxes)
    img = render(fresh, lambda r: None, gui)
    assert img is not None
    # a text panel holds all its rows from the first frame on (a recording may have only that one)
    for k in ("first", "second"):
        assert at_first[k][3] == boxes[k][3], (k, at_first[k], boxes[k])
    assert boxes["second"][3] < boxes["first"][3]
    first, second, right = (np.array(boxes[k]) for k in ("first", "second", "right"))
    for a, b in ((first, second), (first, right), (second, right)):
        overlap_x = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
        overlap_y = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
        assert overlap_x <= 0 or overlap_y <= 0, (a, b)
    for box in (first, second, right):
        assert box[0] >= 0 and box[0] + box[2] <= fresh.width, box
    import pyray as rl

    from kinema.render.ui import MARGIN, PAD
    spacing = float(rl.gui_get_style(rl.DEFAULT, rl.TEXT_SPACING))
    need = rl.measure_text_ex(rl.gui_get_font(), long, 14.0, spacing).x
    # as wide as the GUI's own font measures the long line (within the image), the short
    # panel at the asked 360 px
    assert first[2] == 360, first
    assert second[2] == pytest.approx(min(max(360.0, need + 2 * PAD + 8), fresh.width - 2 * MARGIN)), (second, need)


REOPEN = '''
import json, pyray as rl
from kinema.render import Renderer
widths = []
for _ in range(3):
    r = Renderer(); r.open(480, 320, headless=True)
    default = rl.measure_text_ex(rl.get_font_default(), "two lines", 14.0, 1.0).x
    widths.append([r.ui.fit_width(["two lines"], 0.0), default])
    r.close()
print(json.dumps(widths))
'''


def test_gui_text_measures_the_same_after_the_window_is_reopened(with_display, tmp_path):
    """A program that closes its renderer and opens another (tests, notebooks, the editor)
    gets the same panel widths each time: raygui's font does not keep pointing at the
    closed window's glyphs (it measured 8 px or 45000 px for the same text before)."""
    import json
    import subprocess
    import sys
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path))
    out = subprocess.run(with_display([sys.executable, "-c", REOPEN]), capture_output=True,
                         text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    widths = json.loads(out.stdout.strip().splitlines()[-1])
    first = widths[0][0]
    assert first > widths[0][1] > 20, widths      # a real measurement, padded
    assert all(w == pytest.approx(first) for w, _ in widths), widths


def test_fps_overlay_drawn_when_enabled(fresh):
    plain(fresh)
    base = render(fresh, lambda r: None)
    fresh.show_fps = True
    fresh.show_profiler = True
    img = render(fresh, lambda r: None)
    fresh.show_fps = fresh.show_profiler = False
    changed = np.abs(img.astype(int) - base.astype(int)).max(-1) > 30
    assert changed[:40, :250].mean() > 0.05 and changed[:, 300:].mean() == 0
    assert set(fresh.timings) >= {"shadow", "scene", "post", "gui"}


def _walking_body(lafan_walk, n):
    g = lafan_walk.global_positions()[1000:1000 + 2 * n:2]
    return g - g[:1, :1] * [1, 0, 1]


def test_record_mp4_has_the_frames_asked_and_they_change(fresh, lafan_walk, tmp_path):
    n = 12
    poses = _walking_body(lafan_walk, n)
    out = tmp_path / "clip.mp4"
    fresh.start_recording(out, fps=30)
    for p in poses:
        render(fresh, lambda r, p=p: r.draw_body(p, lafan_walk.parents))
    assert fresh.stop_recording() == out
    frames = list(imageio.get_reader(str(out)).iter_data())
    assert len(frames) == n
    assert frames[0].shape == (320, 480, 3)
    diffs = [np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(frames, frames[1:])]
    assert min(diffs) > 0.2
    # the video shows what capture() showed (lossy, so compare loosely)
    assert np.abs(frames[-1].astype(int) - fresh.capture().astype(int)).mean() < 6


def test_record_png_sequence_is_the_captured_framebuffer(fresh, lafan_walk, tmp_path):
    poses = _walking_body(lafan_walk, 3)
    fresh.start_recording(tmp_path / "pngs")
    caps = []
    for p in poses:
        caps.append(render(fresh, lambda r, p=p: r.draw_body(p, lafan_walk.parents)))
    fresh.stop_recording()
    files = sorted((tmp_path / "pngs").glob("frame_*.png"))
    assert [f.name for f in files] == ["frame_00000.png", "frame_00001.png", "frame_00002.png"]
    for f, c in zip(files, caps):
        np.testing.assert_array_equal(imageio.imread(f), c)
    assert np.abs(caps[0].astype(int) - caps[2].astype(int)).mean() > 0.2
