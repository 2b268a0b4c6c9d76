"""Simulation time of an App: fixed step, scale, pause and single-step."""
from __future__ import annotations

from dataclasses import dataclass

from kinema.errors import KinemaError


@dataclass
class Time:
    """The clock of one :class:`~kinema.engine.App` (every App owns its own).

    Attributes:
        fps: fixed update rate in Hz (the step is ``1 / fps`` seconds).
        time_scale: multiplies the step handed to updates (0.5 = slow motion).
        paused: while True, steps still run (so programs can read input) with ``dt = 0``.
        frame: fixed steps done so far.
        total: simulated seconds so far (sum of the scaled steps).
        dt: the scaled step of the latest update, seconds.
        render_frame: frames rendered so far.
    """

    fps: float = 60.0
    time_scale: float = 1.0
    paused: bool = False
    frame: int = 0
    total: float = 0.0
    dt: float = 0.0
    render_frame: int = 0
    _single_steps: int = 0

    def __post_init__(self) -> None:
        if not self.fps > 0:
            raise KinemaError(f"Time: fps must be positive, got {self.fps}")

    @property
    def fixed_dt(self) -> float:
        """The unscaled fixed step, seconds."""
        return 1.0 / self.fps

    def step_once(self) -> None:
        """While paused, let the next fixed step advance by one full scaled step."""
        self._single_steps += 1

    def toggle_pause(self) -> None:
        self.paused = not self.paused

    def next_dt(self) -> float:
        """The scaled dt of the step about to run (consumes a pending single step)."""
        if self.paused:
            if not self._single_steps:
                return 0.0
            self._single_steps -= 1
        return self.fixed_dt * self.time_scale

    def advance(self, dt: float) -> None:
        """Record one finished step of ``dt`` seconds."""
        self.frame += 1
        self.total += dt
        self.dt = dt
