"""Input sources for the App: scripted tracks (JSON / npz), a recorder, and a stick helper.

A track is a dense per-frame table at its own ``fps``: gamepad axes (float), held keys,
gamepad buttons and mouse buttons (bool), mouse position (pixels) and wheel. It is read
step by step by the App (``read(step, fps)``) in any mode, so demos run headless with the
same input a person gave in standalone mode.

File formats (``version`` 1):

* ``.npz``: ``version``, ``fps``, ``axis_names`` (A,) str + ``axes`` (F, A) float32,
  ``key_names`` + ``keys`` (F, K) bool, ``button_names`` + ``buttons`` (F, B) bool,
  ``mouse_button_names`` + ``mouse_buttons`` (F, M) bool, ``mouse_position`` (F, 2)
  float32, ``mouse_wheel`` (F,) float32. Loaded with ``allow_pickle=False``.
* ``.json`` per frame: ``{"version": 1, "fps": 60, "frames": [{"keys": ["w"],
  "axes": {"left_x": 0.5}, "buttons": ["a"], "mouse_position": [x, y],
  "mouse_buttons": ["left"], "mouse_wheel": 0}, ...]}`` (every field optional).
* ``.json`` authored keyframes: ``{"version": 1, "fps": 60, "duration": 4.0,
  "keyframes": [{"time": 0.0, "axes": {"left_y": -1.0}, "keys": ["left_shift"]}, ...]}``:
  axes are linearly interpolated between keyframes (an axis a keyframe omits is 0 there),
  keys and buttons are held from their keyframe until the next one.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from kinema.engine.protocols import InputFrame
from kinema.errors import FormatError, KinemaError

VERSION = 1
AXES = ("left_x", "left_y", "right_x", "right_y", "left_trigger", "right_trigger")
_BOOL_GROUPS = ("keys", "buttons", "mouse_buttons")


class InputSource(Protocol):
    """Anything the App can pull one :class:`InputFrame` per fixed step from."""

    def read(self, step: int, fps: float) -> InputFrame: ...


class ScriptedInput:
    """Replays a per-frame input track (see the module doc for the formats).

    Args:
        fps: frame rate of the track, Hz.
        axes: name -> (F,) values in [-1, 1].
        keys, buttons, mouse_buttons: name -> (F,) bool "held" flags.
        mouse_position: (F, 2) pixels, or None (zeros).
        mouse_wheel: (F,) wheel movement per frame, or None (zeros).
        end: after the last frame: "hold" (keep the last state), "loop", or "release"
            (empty input).
    """

    def __init__(self, fps: float, axes: Mapping[str, np.ndarray] | None = None,
                 keys: Mapping[str, np.ndarray] | None = None,
                 buttons: Mapping[str, np.ndarray] | None = None,
                 mouse_buttons: Mapping[str, np.ndarray] | None = None,
                 mouse_position: np.ndarray | None = None, mouse_wheel: np.ndarray | None = None,
                 end: str = "hold") -> None:
        if not fps > 0:
            raise KinemaError(f"ScriptedInput: fps must be positive, got {fps}")
        if end not in ("hold", "loop", "release"):
            raise KinemaError(f"ScriptedInput: end must be 'hold', 'loop' or 'release', got {end!r}")
        self.fps = float(fps)
        self.end = end
        self.axes = {k: np.asarray(v, np.float32) for k, v in (axes or {}).items()}
        self.keys = {k: np.asarray(v, bool) for k, v in (keys or {}).items()}
        self.buttons = {k: np.asarray(v, bool) for k, v in (buttons or {}).items()}
        self.mouse_buttons = {k: np.asarray(v, bool) for k, v in (mouse_buttons or {}).items()}
        lengths = {len(v) for d in (self.axes, self.keys, self.buttons, self.mouse_buttons) for v in d.values()}
        for arr in (mouse_position, mouse_wheel):
            if arr is not None:
                lengths.add(len(arr))
        if len(lengths) > 1:
            raise KinemaError(f"ScriptedInput: tracks have different frame counts {sorted(lengths)}")
        n = lengths.pop() if lengths else 0
        self.mouse_position = np.zeros((n, 2), np.float32) if mouse_position is None \
            else np.asarray(mouse_position, np.float32).reshape(n, 2)
        self.mouse_wheel = np.zeros(n, np.float32) if mouse_wheel is None \
            else np.asarray(mouse_wheel, np.float32).reshape(n)
        self.num_frames = n

    def __len__(self) -> int:
        return self.num_frames

    @property
    def duration(self) -> float:
        """Seconds covered by the track."""
        return self.num_frames / self.fps

    # ------------------------------------------------------------------ read
    def _index(self, step: int, fps: float) -> int | None:
        if step < 0 or self.num_frames == 0:
            return None
        i = step if fps == self.fps else int(np.floor(step * self.fps / fps + 1e-9))
        if i < self.num_frames:
            return i
        if self.end == "hold":
            return self.num_frames - 1
        if self.end == "loop":
            return i % self.num_frames
        return None

    def frame(self, i: int, previous: int | None = None) -> InputFrame:
        """The input of track frame ``i``; keys count as pressed when not held at ``previous``."""
        down = frozenset(k for k, v in self.keys.items() if v[i])
        if previous == i:
            pressed: frozenset[str] = frozenset()
            delta = np.zeros(2, np.float32)
        else:
            before = frozenset() if previous is None else frozenset(k for k, v in self.keys.items() if v[previous])
            pressed = down - before
            delta = self.mouse_position[i] - (self.mouse_position[i] if previous is None
                                              else self.mouse_position[previous])
        return InputFrame(
            keys_down=down, keys_pressed=pressed,
            mouse_position=self.mouse_position[i].copy(), mouse_delta=delta,
            mouse_buttons=frozenset(k for k, v in self.mouse_buttons.items() if v[i]),
            mouse_wheel=float(self.mouse_wheel[i]) if previous != i else 0.0,
            gamepad_axes={k: float(v[i]) for k, v in self.axes.items()},
            gamepad_buttons=frozenset(k for k, v in self.buttons.items() if v[i]),
        )

    def read(self, step: int, fps: float) -> InputFrame:
        """Input for App step ``step`` of an App running at ``fps`` Hz (time-mapped)."""
        i = self._index(step, fps)
        if i is None:
            return InputFrame()
        return self.frame(i, self._index(step - 1, fps))

    # --------------------------------------------------------- constructors
    @classmethod
    def from_frames(cls, frames: Sequence[InputFrame], fps: float, end: str = "hold") -> ScriptedInput:
        """A track from recorded :class:`InputFrame` objects (one per frame)."""
        def names(attr: str) -> list[str]:
            return sorted({n for f in frames for n in getattr(f, attr)})

        axes = {a: np.array([f.gamepad_axes.get(a, 0.0) for f in frames], np.float32)
                for a in names("gamepad_axes")}
        groups = {}
        for group, attr in (("keys", "keys_down"), ("buttons", "gamepad_buttons"), ("mouse_buttons", "mouse_buttons")):
            groups[group] = {n: np.array([n in getattr(f, attr) for f in frames], bool) for n in names(attr)}
        return cls(fps, axes=axes, **groups,
                   mouse_position=np.array([f.mouse_position for f in frames], np.float32).reshape(-1, 2),
                   mouse_wheel=np.array([f.mouse_wheel for f in frames], np.float32), end=end)

    @classmethod
    def from_keyframes(cls, keyframes: Sequence[Mapping], fps: float = 60.0, duration: float | None = None,
                       end: str = "hold") -> ScriptedInput:
        """A track sampled at ``fps`` from authored keyframes (see the module doc).

        Args:
            keyframes: dicts with ``time`` (seconds) and optional ``axes`` {name: value},
                ``keys``/``buttons``/``mouse_buttons`` [names], ``mouse_position`` [x, y].
            duration: track length in seconds (default: the last keyframe's time).
        """
        if not keyframes:
            raise KinemaError("ScriptedInput.from_keyframes: no keyframes")
        kfs = sorted(keyframes, key=lambda k: float(k.get("time", 0.0)))
        times = np.array([float(k.get("time", 0.0)) for k in kfs])
        duration = float(times[-1] if duration is None else duration)
        n = int(round(duration * fps)) + 1
        t = np.arange(n) / fps
        axis_names = sorted({a for k in kfs for a in k.get("axes", {})})
        axes = {a: np.interp(t, times, [float(k.get("axes", {}).get(a, 0.0)) for k in kfs]).astype(np.float32)
                for a in axis_names}
        which = np.clip(np.searchsorted(times, t + 1e-9, side="right") - 1, 0, len(kfs) - 1)
        groups = {}
        for group in _BOOL_GROUPS:
            held = [set(k.get(group, ())) for k in kfs]
            groups[group] = {name: np.array([name in held[j] for j in which], bool)
                             for name in sorted(set().union(*held))}
        mouse = np.array([k.get("mouse_position", (0.0, 0.0)) for k in kfs], np.float32)
        mouse_position = np.stack([np.interp(t, times, mouse[:, 0]), np.interp(t, times, mouse[:, 1])], -1)
        return cls(fps, axes=axes, **groups, mouse_position=mouse_position, end=end)

    # ------------------------------------------------------------------ files
    @classmethod
    def load(cls, path: str | Path, end: str = "hold") -> ScriptedInput:
        """Read a ``.json`` (per-frame or keyframes) or ``.npz`` track."""
        path = Path(path)
        if not path.exists():
            raise FormatError("input track not found", path)
        if path.suffix.lower() == ".npz":
            return cls._load_npz(path, end)
        if path.suffix.lower() == ".json":
            try:
                data = json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise FormatError(f"not valid JSON: {exc}", path) from exc
            return cls._from_json(data, path, end)
        raise FormatError("input tracks are .json or .npz", path)

    @classmethod
    def _from_json(cls, data: object, path: Path, end: str) -> ScriptedInput:
        if not isinstance(data, dict) or data.get("version") != VERSION or "fps" not in data:
            raise FormatError(f"expected an object with version {VERSION} and fps", path)
        if "keyframes" not in data and "frames" not in data:
            raise FormatError("expected 'frames' or 'keyframes'", path)
        try:
            fps = float(data["fps"])
            if "keyframes" in data:
                return cls.from_keyframes(data["keyframes"], fps, data.get("duration"), end)
            frames = [InputFrame(keys_down=frozenset(f.get("keys", ())),
                                 gamepad_axes={k: float(v) for k, v in f.get("axes", {}).items()},
                                 gamepad_buttons=frozenset(f.get("buttons", ())),
                                 mouse_buttons=frozenset(f.get("mouse_buttons", ())),
                                 mouse_position=np.asarray(f.get("mouse_position", (0, 0)), np.float32),
                                 mouse_wheel=float(f.get("mouse_wheel", 0.0)))
                      for f in data["frames"]]
        except KinemaError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:
            raise FormatError(f"malformed input track: {exc}", path) from exc
        return cls.from_frames(frames, fps, end)

    @classmethod
    def _load_npz(cls, path: Path, end: str) -> ScriptedInput:
        try:
            with np.load(path, allow_pickle=False) as z:
                if int(z["version"]) != VERSION:
                    raise FormatError(f"unsupported input track version {int(z['version'])}", path)
                def table(names: str, values: str) -> dict[str, np.ndarray]:
                    if names not in z:
                        return {}
                    return {str(n): z[values][:, i] for i, n in enumerate(z[names])}
                return cls(float(z["fps"]), axes=table("axis_names", "axes"), keys=table("key_names", "keys"),
                           buttons=table("button_names", "buttons"),
                           mouse_buttons=table("mouse_button_names", "mouse_buttons"),
                           mouse_position=z["mouse_position"] if "mouse_position" in z else None,
                           mouse_wheel=z["mouse_wheel"] if "mouse_wheel" in z else None, end=end)
        except FormatError:
            raise
        except (KeyError, ValueError, OSError) as exc:
            raise FormatError(f"malformed input track: {exc}", path) from exc

    def save(self, path: str | Path) -> Path:
        """Write the track as ``.npz`` or per-frame ``.json`` (by suffix); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() == ".npz":
            arrays: dict[str, np.ndarray] = {"version": np.array(VERSION), "fps": np.array(self.fps),
                                             "mouse_position": self.mouse_position,
                                             "mouse_wheel": self.mouse_wheel}
            for group, names, values, dtype in (("axes", "axis_names", "axes", np.float32),
                                                ("keys", "key_names", "keys", bool),
                                                ("buttons", "button_names", "buttons", bool),
                                                ("mouse_buttons", "mouse_button_names", "mouse_buttons", bool)):
                d = getattr(self, group)
                arrays[names] = np.array(list(d), dtype=str)
                arrays[values] = np.stack(list(d.values()), -1).astype(dtype) if d \
                    else np.zeros((self.num_frames, 0), dtype)
            np.savez_compressed(path, **arrays)
        elif path.suffix.lower() == ".json":
            frames = []
            for i in range(self.num_frames):
                f: dict[str, object] = {}
                for group in _BOOL_GROUPS:
                    held = [k for k, v in getattr(self, group).items() if v[i]]
                    if held:
                        f[group] = held
                if self.axes:
                    f["axes"] = {k: float(v[i]) for k, v in self.axes.items()}
                if self.mouse_position[i].any():
                    f["mouse_position"] = self.mouse_position[i].tolist()
                if self.mouse_wheel[i]:
                    f["mouse_wheel"] = float(self.mouse_wheel[i])
                frames.append(f)
            path.write_text(json.dumps({"version": VERSION, "fps": self.fps, "frames": frames}))
        else:
            raise KinemaError(f"ScriptedInput.save: use a .json or .npz path, got {path}")
        return path


class InputRecorder:
    """Collects one :class:`InputFrame` per fixed step (the App feeds it) and saves a track.

    Args:
        fps: the App's fixed rate (the track's frame rate).
    """

    def __init__(self, fps: float) -> None:
        self.fps = float(fps)
        self.frames: list[InputFrame] = []

    def __len__(self) -> int:
        return len(self.frames)

    def record(self, frame: InputFrame) -> None:
        self.frames.append(frame)

    def to_scripted(self, end: str = "hold") -> ScriptedInput:
        return ScriptedInput.from_frames(self.frames, self.fps, end)

    def save(self, path: str | Path) -> Path:
        """Write the recording as ``.json`` or ``.npz`` (readable by :meth:`ScriptedInput.load`)."""
        return self.to_scripted().save(path)


# --------------------------------------------------------------------- sticks
_KEYS_LEFT = {"up": ("w", "up"), "down": ("s", "down"), "left": ("a", "left"), "right": ("d", "right")}


def dead_zone(v: np.ndarray, radius: float = 0.15) -> np.ndarray:
    """Radial dead zone: (2,) stick values inside ``radius`` become 0, the rest is rescaled
    so the output magnitude runs from 0 at the edge of the zone to 1 at full tilt."""
    v = np.asarray(v, np.float32)
    m = float(np.hypot(v[0], v[1]))
    if m <= radius:
        return np.zeros(2, np.float32)
    return (v / m * min(1.0, (m - radius) / (1.0 - radius))).astype(np.float32)


def stick(frame: InputFrame, side: str = "left", radius: float = 0.15,
          keys: Mapping[str, Iterable[str]] | None = None) -> np.ndarray:
    """A (2,) stick vector from a gamepad stick or the keyboard: x to the right, y forward
    (away from the player, i.e. the stick pushed up), magnitude <= 1.

    The gamepad stick (after the :func:`dead_zone`) wins when it is tilted; otherwise the
    keys decide (left stick: WASD or the arrow keys; ``keys`` overrides with a mapping
    ``{"up"|"down"|"left"|"right": key names}``), diagonals normalised to length 1.
    """
    if side not in ("left", "right"):
        raise KinemaError(f"stick: side must be 'left' or 'right', got {side!r}")
    axes = frame.gamepad_axes
    pad = dead_zone(np.array([axes.get(f"{side}_x", 0.0), -axes.get(f"{side}_y", 0.0)], np.float32), radius)
    if pad.any():
        return pad
    mapping = keys if keys is not None else (_KEYS_LEFT if side == "left" else {})
    held = frame.keys_down

    def on(direction: str) -> float:
        return 1.0 if any(k in held for k in mapping.get(direction, ())) else 0.0

    v = np.array([on("right") - on("left"), on("up") - on("down")], np.float32)
    n = float(np.hypot(v[0], v[1]))
    return v / n if n > 1 else v
