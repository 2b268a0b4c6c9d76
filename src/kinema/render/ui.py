"""Immediate-mode GUI on raygui: panels with an automatic vertical layout, buttons,
sliders, checkboxes, dropdowns, text, live curve and bar plots.

Widgets return the new value each frame (immediate mode)::

    def gui(ui):
        with ui.panel("Playback", x=10, y=40, width=260):
            playing = ui.checkbox("play", playing)
            speed = ui.slider("speed", speed, 0.0, 2.0)
            if ui.button("reset"):
                frame = 0
            mode = ui.dropdown("camera", ["orbit", "follow"], mode)
            ui.plot("root speed", history, lo=0, hi=5)

Rects are ``(x, y, w, h)`` pixels from the top-left; inside a panel they may be omitted
and rows stack downwards.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pyray as rl

ROW = 24
ROW_GAP = 4    # px between stacked widget rows
PAD = 6
MARGIN = 6   # pixels kept between a panel and the image's edge


def _color(c) -> rl.Color:
    c = np.asarray(c, np.float64).ravel()
    if c.size == 3:
        c = np.append(c, 1.0)
    if c.max() <= 1.0:
        c = c * 255.0
    return rl.Color(*[int(v) for v in np.clip(np.round(c), 0, 255)])


class Ui:
    """The renderer's GUI object (``renderer.ui``); widgets draw only inside ``begin_gui``/``end_frame``."""

    PALETTE = [(0.95, 0.45, 0.25), (0.25, 0.6, 0.95), (0.3, 0.8, 0.4), (0.9, 0.8, 0.2), (0.8, 0.4, 0.9)]

    def __init__(self, renderer) -> None:
        self.renderer = renderer
        self._dropdown_open: dict[str, bool] = {}
        self._panels: list[tuple[float, float, float, float]] = []
        self._last_panels: list[tuple[float, float, float, float]] = []
        self._cursor: list[float] | None = None
        self._heights: dict[str, float] = {}
        self._pending: dict[str, dict] = {}
        self._deferred: list = []
        self.font_size = 14

    def setup(self) -> None:
        rl.gui_load_style_default()
        # raygui keeps its font across windows, and after close_window/init_window it points
        # at the previous window's freed glyph tables (measured widths of 8 px or 45000 px for
        # the same text); the style reset does not replace it when the texture ids match
        rl.gui_set_font(rl.get_font_default())
        rl.gui_set_style(rl.DEFAULT, rl.TEXT_SIZE, self.font_size)

    def begin(self) -> None:
        self._panels = []
        self._cursor = None
        self._deferred = []

    def end(self) -> None:
        for fn in self._deferred:   # open dropdowns draw last, over everything else
            fn()
        self._deferred = []
        self._last_panels = self._panels

    @property
    def wants_mouse(self) -> bool:
        """True when the mouse is over a panel drawn last frame (cameras should ignore it)."""
        if self.renderer.headless:
            return False
        m = rl.get_mouse_position()
        return any(x <= m.x <= x + w and y <= m.y <= y + h for x, y, w, h in self._last_panels)

    # ------------------------------------------------------------------ layout
    def place(self, x: float, y: float, width: float, height: float) -> tuple[float, float]:
        """Where a panel asked for at ``(x, y)`` goes: moved left to fit the image's width,
        and below every panel already drawn this frame that it would overlap (panels of
        several parts of a program, or of the engine's profiler, never cover one another)."""
        screen_w = float(getattr(self.renderer, "width", 0) or 0)
        if screen_w > 0:
            x = max(MARGIN, min(x, screen_w - width - MARGIN))
        moved = True
        while moved:
            moved = False
            for px, py, pw, ph in self._panels:
                if x < px + pw and px < x + width and y < py + ph and py < y + height:
                    y, moved = py + ph + PAD, True
        return x, y

    def fit_width(self, texts, width: float) -> float:
        """``width``, widened to hold the widest of ``texts`` in a panel row, at most the
        image's width less the margins."""
        font, spacing = rl.gui_get_font(), float(rl.gui_get_style(rl.DEFAULT, rl.TEXT_SPACING))
        need = max((rl.measure_text_ex(font, str(t), float(self.font_size), spacing).x for t in texts), default=0.0)
        width = max(float(width), need + 2 * PAD + 8)
        screen_w = float(getattr(self.renderer, "width", 0) or 0)
        return min(width, screen_w - 2 * MARGIN) if screen_w > 0 else width

    @contextmanager
    def panel(self, title: str, x: float = 10, y: float = 40, width: float = 240, height: float | None = None):
        """A titled panel; widgets inside without a rect stack in rows.

        With ``height`` None the panel fits the rows it held last frame. The panel is
        placed by :meth:`place` (inside the image, clear of the panels drawn before it).
        """
        h = height if height is not None else self._heights.get(title, ROW + 2 * PAD)
        x, y = self.place(x, y, width, h)
        rl.gui_panel(rl.Rectangle(float(x), float(y), float(width), float(h)), str(title))
        self._cursor = [x + PAD, y + ROW + PAD, width - 2 * PAD]
        try:
            yield self
        finally:
            self._heights[title] = self._cursor[1] - y + PAD
            self._panels.append((x, y, width, h))
            self._cursor = None

    def lines(self, title: str, lines: list[str], x: float = 10, y: float = 40, width: float = 360) -> None:
        """A titled panel holding one label per line of text, as wide as its longest line
        needs (within the image) and as tall as its rows from the first frame on (a panel's
        remembered height would hold one row in the first frame: a recording's only frame)."""
        height = ROW + 2 * PAD + len(lines) * (ROW + ROW_GAP)     # what the rows will fill (see _rect)
        with self.panel(title, x=x, y=y, width=self.fit_width([title, *lines], width), height=height):
            for line in lines:
                self.label(line)

    def _rect(self, rect, height: float = ROW) -> rl.Rectangle:
        if rect is not None:
            if self._cursor is None:   # a free-standing widget also keeps the mouse from the camera
                self._panels.append(tuple(float(v) for v in rect))
            return rl.Rectangle(*[float(v) for v in rect])
        if self._cursor is None:
            raise ValueError("widget needs a rect outside ui.panel(...)")
        x, y, w = self._cursor
        self._cursor[1] = y + height + ROW_GAP
        return rl.Rectangle(x, y, w, height)

    def background(self, rect, color=(0.12, 0.13, 0.15, 0.85)) -> None:
        """A filled rectangle (panel background)."""
        x, y, w, h = rect
        rl.draw_rectangle(int(x), int(y), int(w), int(h), _color(color))

    # ------------------------------------------------------------------ widgets
    def label(self, text: str, rect=None) -> None:
        rl.gui_label(self._rect(rect), str(text))

    def text(self, text: str, x: float, y: float, size: int = 16, color=(1, 1, 1, 1)) -> None:
        """Plain text at pixel ``(x, y)``."""
        rl.draw_text(str(text), int(x), int(y), int(size), _color(color))

    def button(self, text: str, rect=None) -> bool:
        """True on the frame the button is clicked."""
        return bool(rl.gui_button(self._rect(rect), str(text)))

    def checkbox(self, text: str, checked: bool, rect=None) -> bool:
        r = self._rect(rect)
        box = rl.Rectangle(r.x, r.y + 4, r.height - 8, r.height - 8)
        ptr = rl.ffi.new("bool *", bool(checked))
        rl.gui_check_box(box, str(text), ptr)
        return bool(ptr[0])

    def toggle(self, text: str, active: bool, rect=None) -> bool:
        ptr = rl.ffi.new("bool *", bool(active))
        rl.gui_toggle(self._rect(rect), str(text), ptr)
        return bool(ptr[0])

    def slider(self, text: str, value: float, lo: float, hi: float, rect=None, fmt: str = "{:.2f}") -> float:
        """A horizontal slider with its label on the left and value on the right."""
        r = self._rect(rect)
        label_w = min(80.0, r.width * 0.35)
        value_w = 44.0
        bar = rl.Rectangle(r.x + label_w, r.y + 3, max(r.width - label_w - value_w, 10), r.height - 6)
        ptr = rl.ffi.new("float *", float(value))
        rl.gui_slider_bar(bar, str(text), fmt.format(value), ptr, float(lo), float(hi))
        return float(ptr[0])

    def dropdown(self, text: str, options: list[str], index: int, rect=None) -> int:
        """A dropdown selecting one of ``options``; returns the selected index."""
        r = self._rect(rect)
        label_w = min(80.0, r.width * 0.35)
        rl.gui_label(rl.Rectangle(r.x, r.y, label_w, r.height), str(text))
        box = rl.Rectangle(r.x + label_w, r.y, r.width - label_w, r.height)
        key = text
        state = {"index": int(index)}

        def draw() -> None:
            ptr = rl.ffi.new("int *", state["index"])
            if rl.gui_dropdown_box(box, ";".join(options), ptr, self._dropdown_open.get(key, False)):
                self._dropdown_open[key] = not self._dropdown_open.get(key, False)
            state["index"] = int(ptr[0])

        if self._dropdown_open.get(key, False):
            self._deferred.append(draw)   # drawn last, on top; the choice applies next frame
            self._pending[key] = state
            return int(index)
        prev = self._pending.pop(key, None)
        if prev is not None:
            state["index"] = prev["index"]
        draw()
        return state["index"]

    def progress(self, text: str, value: float, lo: float = 0.0, hi: float = 1.0, rect=None) -> None:
        r = self._rect(rect)
        ptr = rl.ffi.new("float *", float(value))
        rl.gui_progress_bar(rl.Rectangle(r.x + 80, r.y + 4, r.width - 80, r.height - 8), str(text), "", ptr, lo, hi)

    def plot(self, title: str, series, lo: float | None = None, hi: float | None = None,
             rect=None, height: float = 80, colors=None) -> None:
        """Live curves: ``series`` is one (N,) array or a dict name -> (N,) array."""
        r = self._rect(rect, height)
        items = series if isinstance(series, dict) else {title: series}
        arrays = {k: np.asarray(v, np.float64).ravel() for k, v in items.items()}
        allv = np.concatenate([a for a in arrays.values() if a.size] or [np.zeros(1)])
        lo = float(allv.min()) if lo is None else lo
        hi = float(allv.max()) if hi is None else hi
        if hi - lo < 1e-9:
            hi = lo + 1.0
        self.background((r.x, r.y, r.width, r.height))
        rl.draw_text(f"{title}  [{lo:.3g}, {hi:.3g}]", int(r.x + 4), int(r.y + 2), 10, rl.LIGHTGRAY)
        for i, (_name, a) in enumerate(arrays.items()):
            if a.size < 2:
                continue
            col = _color((colors or self.PALETTE)[i % len(colors or self.PALETTE)])
            xs = r.x + np.linspace(0, r.width, a.size)
            ys = r.y + r.height - 2 - (np.clip(a, lo, hi) - lo) / (hi - lo) * (r.height - 14)
            xy = np.ascontiguousarray(np.stack([xs, ys], -1), np.float32)
            pts = rl.ffi.new("Vector2[]", a.size)
            rl.ffi.memmove(pts, rl.ffi.from_buffer(xy), xy.nbytes)
            rl.draw_line_strip(rl.ffi.cast("Vector2 *", pts), a.size, col)

    def bars(self, title: str, values, labels=None, lo: float = 0.0, hi: float | None = None,
             rect=None, height: float = 80) -> None:
        """A bar chart of ``values`` (N,)."""
        r = self._rect(rect, height)
        v = np.asarray(values, np.float64).ravel()
        hi = float(max(v.max(), lo + 1e-9)) if hi is None else hi
        self.background((r.x, r.y, r.width, r.height))
        rl.draw_text(title, int(r.x + 4), int(r.y + 2), 10, rl.LIGHTGRAY)
        n = max(v.size, 1)
        bw = (r.width - 8) / n
        for i, x in enumerate(v):
            hgt = (np.clip(x, lo, hi) - lo) / (hi - lo) * (r.height - 26)
            col = _color(self.PALETTE[i % len(self.PALETTE)])
            rl.draw_rectangle(int(r.x + 4 + i * bw + 1), int(r.y + r.height - 12 - hgt), max(int(bw - 2), 1), int(hgt), col)
            if labels is not None:
                rl.draw_text(str(labels[i])[:4], int(r.x + 4 + i * bw), int(r.y + r.height - 11), 10, rl.LIGHTGRAY)
