"""Scripted input: keyframes, per-frame tracks, JSON/npz round trips, recording, replay."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kinema.engine import App, Component, InputFrame, InputRecorder, Scene, ScriptedInput, dead_zone, stick
from kinema.errors import FormatError, KinemaError


def test_keyframes_interpolate_axes_and_hold_keys():
    track = ScriptedInput.from_keyframes([
        {"time": 0.0, "axes": {"left_x": 0.0}},
        {"time": 1.0, "axes": {"left_x": 1.0}, "keys": ["left_shift"]},
        {"time": 2.0, "axes": {"left_x": -1.0}},
    ], fps=10)
    assert len(track) == 21 and track.duration == pytest.approx(2.1)
    assert track.read(5, 10).gamepad_axes["left_x"] == pytest.approx(0.5)
    assert track.read(15, 10).gamepad_axes["left_x"] == pytest.approx(0.0)
    assert track.read(9, 10).keys_down == frozenset()
    first = track.read(10, 10)
    assert first.keys_down == {"left_shift"} and first.keys_pressed == {"left_shift"}
    held = track.read(11, 10)
    assert held.keys_down == {"left_shift"} and held.keys_pressed == frozenset()
    assert track.read(20, 10).keys_down == frozenset()
    # an App at 20 Hz reads the 10 Hz track by time; a press is reported once
    assert track.read(10, 20).gamepad_axes["left_x"] == pytest.approx(0.5)
    presses = [track.read(i, 20).keys_pressed for i in range(40)]
    assert sum(1 for p in presses if p) == 1 and presses[20] == {"left_shift"}


def test_end_modes():
    keys = {"a": np.array([True, False, False])}
    assert ScriptedInput(1, keys=keys, end="hold").read(7, 1).keys_down == frozenset()
    assert ScriptedInput(1, keys=keys, end="loop").read(6, 1).keys_down == {"a"}
    released = ScriptedInput(1, keys={"a": np.ones(3, bool)}, axes={"left_x": np.ones(3)}, end="release")
    assert released.read(2, 1).keys_down == {"a"}
    assert released.read(3, 1).keys_down == frozenset() and released.read(3, 1).gamepad_axes == {}
    with pytest.raises(KinemaError):
        ScriptedInput(1, keys=keys, end="bounce")
    with pytest.raises(KinemaError):
        ScriptedInput(1, keys=keys, axes={"left_x": np.zeros(4)})


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_file_round_trip(tmp_path, suffix):
    rng = np.random.default_rng(1)
    n = 50
    track = ScriptedInput(30, axes={"left_x": rng.uniform(-1, 1, n), "right_trigger": rng.uniform(0, 1, n)},
                          keys={"w": rng.random(n) < 0.5, "space": rng.random(n) < 0.2},
                          buttons={"a": rng.random(n) < 0.3}, mouse_buttons={"left": rng.random(n) < 0.4},
                          mouse_position=rng.uniform(0, 500, (n, 2)), mouse_wheel=rng.normal(size=n))
    back = ScriptedInput.load(track.save(tmp_path / f"track{suffix}"))
    assert back.fps == 30 and len(back) == n
    for i in range(n + 3):
        a, b = track.read(i, 30), back.read(i, 30)
        assert a.keys_down == b.keys_down and a.keys_pressed == b.keys_pressed
        assert a.gamepad_buttons == b.gamepad_buttons and a.mouse_buttons == b.mouse_buttons
        assert a.gamepad_axes == pytest.approx(b.gamepad_axes)
        np.testing.assert_allclose(a.mouse_position, b.mouse_position, rtol=1e-6)
        assert a.mouse_wheel == pytest.approx(b.mouse_wheel, rel=1e-6)


def test_authored_json_keyframes_file(tmp_path):
    path = tmp_path / "walk.json"
    path.write_text(json.dumps({"version": 1, "fps": 60, "duration": 1.0,
                                "keyframes": [{"time": 0, "axes": {"left_y": -1}}, {"time": 0.5, "keys": ["space"]}]}))
    track = ScriptedInput.load(path)
    assert len(track) == 61
    assert track.read(0, 60).gamepad_axes["left_y"] == -1 and track.read(60, 60).keys_down == {"space"}


def test_bad_files_raise_format_error_naming_the_file(tmp_path):
    cases = {"a.json": "{not json", "b.json": json.dumps({"fps": 60, "frames": []}),
             "c.json": json.dumps({"version": 1, "fps": 60}),
             "d.json": json.dumps({"version": 1, "fps": 60, "frames": [{"axes": {"left_x": "fast"}}]}),
             "e.txt": "x"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(FormatError) as info:
            ScriptedInput.load(tmp_path / name)
        assert name in str(info.value)
    np.savez(tmp_path / "f.npz", version=np.array(9), fps=np.array(60.0))
    with pytest.raises(FormatError, match="version 9"):
        ScriptedInput.load(tmp_path / "f.npz")
    with pytest.raises(FormatError):
        ScriptedInput.load(tmp_path / "missing.npz")


def test_dead_zone_and_stick():
    np.testing.assert_array_equal(dead_zone(np.array([0.1, 0.05])), [0, 0])
    np.testing.assert_allclose(dead_zone(np.array([1.0, 0.0])), [1, 0], atol=1e-6)
    v = dead_zone(np.array([0.0, 0.575]), radius=0.15)  # halfway through the live range
    np.testing.assert_allclose(v, [0, 0.5], atol=1e-6)
    # gamepad y is +1 pushed down: pushed up means forward (+y of the stick vector)
    np.testing.assert_allclose(stick(InputFrame(gamepad_axes={"left_x": 0.0, "left_y": -1.0})), [0, 1], atol=1e-6)
    np.testing.assert_allclose(stick(InputFrame(keys_down=frozenset({"w", "d"}))), [0.70710677, 0.70710677])
    np.testing.assert_allclose(stick(InputFrame(keys_down=frozenset({"left"}))), [-1, 0])
    np.testing.assert_allclose(stick(InputFrame(keys_down=frozenset({"w", "s"}))), [0, 0])
    # a tilted pad wins over keys; a pad inside the dead zone lets keys through
    np.testing.assert_allclose(stick(InputFrame(keys_down=frozenset({"a"}), gamepad_axes={"left_x": 1.0})), [1, 0],
                               atol=1e-6)
    np.testing.assert_allclose(stick(InputFrame(keys_down=frozenset({"a"}), gamepad_axes={"left_x": 0.1})), [-1, 0])
    np.testing.assert_allclose(stick(InputFrame(gamepad_axes={"right_x": -1.0}), side="right"), [-1, 0], atol=1e-6)


class Log(Component):
    def on_start(self):
        self.seen = []

    def update(self, dt):
        i = self.app.input
        self.seen.append((sorted(i.keys_down), sorted(i.keys_pressed), round(i.gamepad_axes.get("left_x", 0.0), 6)))


def test_record_then_replay_gives_the_same_run(tmp_path):
    """Record what an App read (from a scripted source standing in for a person) and replay it."""
    source = ScriptedInput.from_keyframes([
        {"time": 0.0, "axes": {"left_x": -1.0}, "keys": ["w"]},
        {"time": 0.5, "axes": {"left_x": 1.0}, "keys": ["w", "space"]},
        {"time": 1.0, "axes": {"left_x": 0.0}},
    ], fps=60)
    scene = Scene()
    log = scene.create_entity("log").add(Log())
    App(scene, mode="headless", input=source, record_input=tmp_path / "rec.npz").run(frames=90)
    scene2 = Scene()
    log2 = scene2.create_entity("log").add(Log())
    App(scene2, mode="headless", input=tmp_path / "rec.npz").run(frames=90)
    assert log.seen == log2.seen and len(log.seen) == 90
    assert log.seen[30] == (["space", "w"], ["space"], 1.0)

    rec = InputRecorder(60)
    rec.record(InputFrame(keys_down=frozenset({"q"})))
    rec.record(InputFrame())
    back = ScriptedInput.load(rec.save(tmp_path / "r.json"))
    assert [back.read(i, 60).keys_down for i in range(2)] == [{"q"}, frozenset()]
