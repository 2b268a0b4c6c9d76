"""Per-component-class timings per frame, as numbers and as lines for a GUI overlay."""
from __future__ import annotations

from collections import deque
from typing import Any


class Profiler:
    """Collects seconds per (name, phase) for each frame and keeps the last ``window`` frames.

    The scene reports one entry per component class and phase ("update", "late_update",
    "draw", "gui"); the App adds "program" and "transforms". A *frame* is one App
    iteration (a fixed step in headless/manual mode, a rendered frame in standalone).

    Args:
        window: frames kept for averages.
        enabled: when False the App does not time anything.
    """

    def __init__(self, window: int = 120, enabled: bool = True) -> None:
        self.enabled = enabled
        self.frames: deque[dict[str, dict[str, float]]] = deque(maxlen=max(1, int(window)))
        self._current: dict[str, dict[str, float]] = {}

    def add(self, name: str, phase: str, seconds: float) -> None:
        """Add ``seconds`` to ``name``'s ``phase`` in the frame being recorded."""
        phases = self._current.setdefault(name, {})
        phases[phase] = phases.get(phase, 0.0) + seconds

    def end_frame(self) -> None:
        """Close the frame being recorded."""
        self.frames.append(self._current)
        self._current = {}

    def last(self) -> dict[str, float]:
        """Milliseconds per name (all phases) in the latest finished frame."""
        if not self.frames:
            return {}
        return {n: 1e3 * sum(p.values()) for n, p in self.frames[-1].items()}

    def averages(self) -> dict[str, dict[str, float]]:
        """Mean milliseconds per frame over the window: name -> {phase: ms, "total": ms}."""
        n = len(self.frames)
        out: dict[str, dict[str, float]] = {}
        for frame in self.frames:
            for name, phases in frame.items():
                acc = out.setdefault(name, {})
                for phase, s in phases.items():
                    acc[phase] = acc.get(phase, 0.0) + 1e3 * s / n
        for acc in out.values():
            acc["total"] = sum(acc.values())
        return out

    def rows(self) -> list[tuple[str, float]]:
        """(name, mean ms per frame) sorted slowest first, for an overlay."""
        return sorted(((n, a["total"]) for n, a in self.averages().items()), key=lambda r: -r[1])

    def lines(self) -> list[str]:
        """``rows()`` formatted as text lines."""
        return [f"{name:<24s} {ms:8.3f} ms" for name, ms in self.rows()]

    def gui(self, ui: Any, x: float = 10, y: float = 40, width: float = 320) -> None:
        """Show :meth:`lines` in the GUI: a panel of labels when ``ui`` has ``panel`` and
        ``label`` (kinema.render's Ui), else ``text(line, x, y)`` rows, else nothing."""
        lines = self.lines()
        panel, label = getattr(ui, "panel", None), getattr(ui, "label", None)
        if panel is not None and label is not None:
            with panel("profiler (ms per frame)", x=x, y=y, width=width):
                for line in lines:
                    label(line)
            return
        text = getattr(ui, "text", None)
        if text is not None:
            for i, line in enumerate(["profiler (ms per frame)", *lines]):
                text(line, x, y + 18 * i)
