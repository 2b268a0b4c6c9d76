"""What the engine needs from a renderer, without importing one.

``kinema.render`` implements :class:`RendererBackend`; the engine only talks to this
protocol, so ``kinema.engine`` never imports raylib. Standalone mode opens a window,
headless mode can open an offscreen target to write frames to files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass
class InputFrame:
    """A snapshot of the user's input for one frame.

    Attributes:
        keys_down: names of keys held, lower case ("w", "space", "left_shift", "up", ...).
        keys_pressed: keys that went down this frame.
        mouse_position: (2,) pixels from the top-left corner.
        mouse_delta: (2,) pixels moved since the last frame.
        mouse_buttons: names of mouse buttons held ("left", "right", "middle").
        mouse_wheel: wheel movement this frame.
        gamepad_axes: "left_x", "left_y", "right_x", "right_y", "left_trigger",
            "right_trigger" in [-1, 1] (y is +1 when the stick is pushed down, as in SDL/GLFW).
        gamepad_buttons: names of gamepad buttons held ("a", "b", "x", "y", "lb", "rb", ...).
    """

    keys_down: frozenset[str] = frozenset()
    keys_pressed: frozenset[str] = frozenset()
    mouse_position: np.ndarray = field(default_factory=lambda: np.zeros(2, np.float32))
    mouse_delta: np.ndarray = field(default_factory=lambda: np.zeros(2, np.float32))
    mouse_buttons: frozenset[str] = frozenset()
    mouse_wheel: float = 0.0
    gamepad_axes: dict[str, float] = field(default_factory=dict)
    gamepad_buttons: frozenset[str] = frozenset()


class RendererBackend(Protocol):
    """The renderer as the engine's App sees it.

    Call order per rendered frame: ``begin_frame()``, then each component's
    ``draw(renderer)`` and the program's ``draw(renderer)``, then ``begin_gui()``,
    every ``gui(renderer.ui)``, then ``end_frame()``.
    """

    ui: Any  # immediate-mode GUI object passed to gui(ui) callbacks

    def open(self, width: int, height: int, title: str, headless: bool) -> None:
        """Open a window (headless=False) or an offscreen target (headless=True)."""

    def is_open(self) -> bool:
        """False once the user closed the window (always True while an offscreen target is open)."""

    def begin_frame(self) -> None: ...

    def begin_gui(self) -> None: ...

    def end_frame(self) -> None: ...

    def read_input(self) -> InputFrame:
        """Keyboard, mouse and gamepad state for this frame (empty when headless)."""

    def capture(self) -> np.ndarray:
        """The last rendered frame as (H, W, 3) uint8 RGB, read from the framebuffer."""

    def close(self) -> None: ...
