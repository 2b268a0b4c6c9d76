"""End to end: ``kinema serve``'s viewer in headless Chromium (system package, driven by
playwright without downloading a browser). The page loads, the skinned character is visible
in a screenshot, and GUI controls (character toggle, mirror) change what the page shows."""
from __future__ import annotations

import contextlib
import shutil
import threading

import numpy as np
import pytest

playwright = pytest.importorskip("playwright.sync_api")
pytest.importorskip("viser")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--use-angle=swiftshader", "--enable-unsafe-swiftshader"]


def _orange(png: bytes) -> np.ndarray:
    """Mask of pixels in the character's colour (230, 150, 70) under any shading."""
    import imageio.v3 as iio
    img = iio.imread(png)[..., :3].astype(np.int32)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return (r - b > 70) & (r > g + 25) & (g > b + 15)


def _settle(page, condition, timeout_s: float = 30.0) -> np.ndarray:
    """Screenshots until ``condition(mask)`` holds (software WebGL under load can lag a few
    frames behind the GUI); returns the last character mask either way."""
    import time
    deadline = time.time() + timeout_s
    while True:
        mask = _orange(page.screenshot())
        if condition(mask) or time.time() > deadline:
            return mask
        page.wait_for_timeout(500)


@contextlib.contextmanager
def _open_page(profile, port: int):
    """A headless Chromium page connected to the viewer on ``port`` (closed on exit)."""
    with playwright.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, args=ARGS,
                                                   viewport={"width": 1280, "height": 720})
        try:
            page = ctx.new_page()
            page.goto(f"http://127.0.0.1:{port}", timeout=60_000)
            page.get_by_text("Connected").wait_for(timeout=60_000)
            yield page
        finally:
            ctx.close()


@pytest.fixture()
def served(shared_data, tmp_path, free_port):
    from kinema.serve import MotionViewer, ServedClip
    if CHROMIUM is None:
        pytest.skip("Debian chromium not installed (./run.sh setup installs it)")
    clip = ServedClip.load(shared_data / "lafan1/walk4_subject1.bvh",
                           character=shared_data / "characters/lafan1_character/character.bin")
    clip.motion = clip.motion[:400]
    viewer = MotionViewer([clip], port=free_port, playing=False)
    viewer.gui_follow.value = False   # a fixed camera: the mirrored body jumps across the screen
    viewer.frame = 200  # mid-walk, about 2.5 m off the x = 0 mirror plane
    viewer.show()
    hip = clip.poses()[1][200, 1]
    viewer.server.initial_camera.look_at = (0.0, 0.9, float(hip[2]))
    viewer.server.initial_camera.position = (0.0, 1.5, float(hip[2]) + 6.0)
    thread = threading.Thread(target=viewer.serve_forever, daemon=True)
    thread.start()
    yield viewer, tmp_path
    viewer.stop()
    thread.join(5)


def test_page_shows_character_and_gui_changes_scene(served):
    viewer, tmp = served
    with _open_page(tmp / "profile", viewer.port) as page:
        page.get_by_text("frame 201/400").wait_for(timeout=30_000)
        page.wait_for_timeout(1500)
        close = page.locator(".mantine-Notification-closeButton")  # "software WebGL" notice (orange)
        for i in range(close.count()):
            close.nth(i).click()
        shown = _settle(page, lambda m: m.sum() > 1500)
        page.screenshot(path=str(tmp / "shown.png"))
        assert shown.sum() > 1500, f"character not visible: {shown.sum()} character-coloured pixels"
        ys, xs = np.nonzero(shown)
        x_before = xs.mean()

        page.get_by_role("checkbox", name="character").click()           # hide the mesh from the GUI
        hidden = _settle(page, lambda m: m.sum() < 0.05 * shown.sum())
        assert not viewer.gui_mesh.value
        assert hidden.sum() < 0.05 * shown.sum(), (hidden.sum(), shown.sum())

        page.get_by_role("checkbox", name="character").click()
        page.get_by_role("checkbox", name="mirror").click()              # mirror across x = 0 from the GUI
        page.get_by_text("mirrored").wait_for(timeout=30_000)
        mirrored = _settle(page, lambda m: m.sum() > 1500 and abs(np.nonzero(m)[1].mean() - x_before) > 150)
        assert viewer.mirror
        assert mirrored.sum() > 1500
        x_after = np.nonzero(mirrored)[1].mean()
        # hips at x = -2.8 m seen from 6 m: the body jumps across the screen centre line
        assert abs(x_after - x_before) > 150, (x_before, x_after)
        assert np.sign(x_after - 640) != np.sign(x_before - 640)


def test_live_dog_follows_the_heading_typed_in_the_page(shared_data, tmp_path, free_port):
    """``kinema serve quadruped``'s live clip: typing a heading in the page's GUI turns the dog."""
    import time

    from kinema.cli.demo import demo_parser
    from kinema.demos import quadruped
    from kinema.serve import MotionViewer
    if CHROMIUM is None:
        pytest.skip("Debian chromium not installed (./run.sh setup installs it)")
    _, parser = demo_parser("quadruped")
    clips = quadruped.served_clips(parser.parse_args(["--frames", "10", "--heading", "0"]))
    live = clips[0]
    viewer = MotionViewer(clips, port=free_port)
    thread = threading.Thread(target=viewer.serve_forever, daemon=True)
    thread.start()
    try:
        with _open_page(tmp_path / "profile", viewer.port) as page:
            page.get_by_text("heading").wait_for(timeout=30_000)
            box = page.locator("input[type=text]").last          # the heading slider's number box
            box.fill("90")
            box.press("Enter")
            deadline = time.time() + 20
            while live.heading != 90.0 and time.time() < deadline:
                time.sleep(0.1)
            assert live.heading == 90.0
            start = live.poses()[1][0, 0].copy()
            time.sleep(3.0)
            moved = live.poses()[1][0, 0] - start
    finally:
        viewer.stop()
        thread.join(5)
    assert moved[0] > 0.5 and abs(moved[2]) < 0.5 * moved[0], moved     # toward +X, as typed


def test_default_camera_frames_and_follows_a_walk(shared_data, tmp_path, free_port):
    """No camera set by hand: the viewer's default camera frames the character and keeps it
    in view while it walks 6 m away (the follow checkbox, on by default)."""
    from kinema.serve import MotionViewer, ServedClip
    if CHROMIUM is None:
        pytest.skip("Debian chromium not installed (./run.sh setup installs it)")
    clip = ServedClip.load(shared_data / "lafan1/walk4_subject1.bvh",
                           character=shared_data / "characters/lafan1_character/character.bin")
    clip.motion = clip.motion[1200:1500]     # about 6 m of walking
    viewer = MotionViewer([clip], port=free_port, playing=False)
    start = viewer.focus()
    thread = threading.Thread(target=viewer.serve_forever, daemon=True)
    thread.start()
    try:
        with _open_page(tmp_path / "profile", viewer.port) as page:
            page.wait_for_timeout(1500)
            first = _settle(page, lambda m: m.sum() > 1500)
            assert first.sum() > 1500, first.sum()
            viewer.frame = 299
            viewer.show()
            end = viewer.focus()
            assert np.linalg.norm((end - start)[[0, 2]]) > 2.0      # the walk really goes somewhere
            page.get_by_text("frame 300/300").wait_for(timeout=30_000)
            last = _settle(page, lambda m: m.sum() > 1500)
            page.screenshot(path=str(tmp_path / "followed.png"))
            assert last.sum() > 0.4 * first.sum(), (first.sum(), last.sum())
            cams = [c.camera for c in viewer.server.get_clients().values()]
            assert cams and np.allclose(cams[0].look_at, end, atol=0.05)
    finally:
        viewer.stop()
        thread.join(5)
