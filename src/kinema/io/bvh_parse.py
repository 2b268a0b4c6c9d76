"""Parse BVH text into raw arrays (file units, degrees); :mod:`kinema.io.bvh` builds a Motion.

The HIERARCHY block is small and parsed token by token; the MOTION block (almost all of
the file) is converted in one call to NumPy's C text reader and validated by shape, so
the cost per frame is never a Python loop. When the fast path fails, a slow pass finds
the first bad line so the :class:`~kinema.errors.FormatError` names it.
"""
from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kinema.errors import FormatError

#: Valid channel names (canonical spelling), keyed by their lower-case form.
CHANNEL_NAMES = {f"{a}{k}".lower(): f"{a.upper()}{k}" for k in ("position", "rotation") for a in "xyz"}

#: Larger magnitudes are refused: no mocap value is near it, and float32 would overflow.
MAX_ABS_VALUE = 1e30

_MOTION_RE = re.compile(rb"^[ \t]*MOTION[ \t]*\r?$", re.MULTILINE)
_FRAMES_RE = re.compile(r"^\s*Frames\s*:?\s*(\S+)\s*$", re.IGNORECASE)
_FRAME_TIME_RE = re.compile(r"^\s*Frame\s*Time\s*:?\s*(\S+)\s*$", re.IGNORECASE)


@dataclass
class BvhData:
    """A BVH file as read, before conversion to a Motion.

    Attributes:
        names: joint names in file (depth-first) order, J entries.
        parents: (J,) int, -1 for the root, every parent index lower than its child.
        offsets: (J, 3) float64 OFFSET values in file units.
        channels: per joint, the list of canonical channel names (e.g. "Zrotation").
        end_sites: (joint index, offset (3,) in file units, number of joints read before
            it) for every End Site, in file order.
        frame_time: seconds per frame (from "Frame Time:").
        values: (F, C) float64 MOTION values (positions in file units, angles in degrees),
            C = total number of channels, columns in joint then channel order.
    """

    names: list[str]
    parents: np.ndarray
    offsets: np.ndarray
    channels: list[list[str]]
    end_sites: list[tuple[int, np.ndarray, int]]
    frame_time: float
    values: np.ndarray
    path: str | None = None
    column_start: list[int] = field(default_factory=list)

    @property
    def num_frames(self) -> int:
        return int(self.values.shape[0])


def read(path: str | Path) -> BvhData:
    """Read the BVH file at ``path``; raises FormatError naming file and line on bad input."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except IsADirectoryError as exc:
        raise FormatError("is a directory, not a BVH file", path) from exc
    return parse(raw, path)


def parse(raw: bytes, path: str | Path | None = None) -> BvhData:
    """Parse the bytes of a BVH file (``path`` only names it in errors)."""
    m = _MOTION_RE.search(raw)
    if m is None:
        raise FormatError("no MOTION section (a line holding only 'MOTION')", path,
                          raw.count(b"\n") + 1)
    header = _decode(raw[:m.start()])
    names, parents, offsets, channels, end_sites = _parse_hierarchy(header, path)
    motion_line = header.count("\n") + 1
    frames, frame_time, data_start, data_line = _parse_motion_header(raw, m.end(), motion_line, path)
    num_channels = sum(len(c) for c in channels)
    values = _parse_values(raw[data_start:], frames, num_channels, data_line, path)
    starts = np.concatenate([[0], np.cumsum([len(c) for c in channels])[:-1]]).astype(int).tolist()
    return BvhData(names, parents, offsets, channels, end_sites, frame_time, values,
                   None if path is None else str(path), starts)


def _decode(b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("latin-1")


# --------------------------------------------------------------------------- hierarchy

def _tokens(text: str) -> list[tuple[str, int]]:
    """(token, 1-based line) for every whitespace-separated token; braces are tokens."""
    out = []
    for i, line in enumerate(text.split("\n"), 1):
        for tok in line.replace("{", " { ").replace("}", " } ").split():
            out.append((tok, i))
    return out


class _Cursor:
    """Walks the header tokens; every read checks bounds and raises FormatError."""

    def __init__(self, tokens: list[tuple[str, int]], path, end_line: int):
        self.tokens, self.i, self.path, self.end_line = tokens, 0, path, end_line

    def peek(self) -> str | None:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def line(self) -> int:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else self.end_line

    def next(self, what: str) -> str:
        if self.i >= len(self.tokens):
            raise FormatError(f"unexpected end of HIERARCHY, expected {what}", self.path, self.end_line)
        tok = self.tokens[self.i][0]
        self.i += 1
        return tok

    def expect(self, word: str) -> None:
        line = self.line()
        tok = self.next(repr(word))
        if tok != word:
            raise FormatError(f"expected {word!r}, found {tok!r}", self.path, line)

    def rest_of_line(self) -> list[str]:
        """Tokens left on the current line (stops before a brace)."""
        if self.i >= len(self.tokens):
            return []
        line = self.tokens[self.i - 1][1] if self.i else 0
        out = []
        while self.i < len(self.tokens) and self.tokens[self.i][1] == line and self.tokens[self.i][0] not in "{}":
            out.append(self.tokens[self.i][0])
            self.i += 1
        return out

    def number(self, what: str) -> float:
        line = self.line()
        tok = self.next(what)
        try:
            v = float(tok)
        except ValueError:
            raise FormatError(f"expected a number for {what}, found {tok!r}", self.path, line) from None
        if not abs(v) < MAX_ABS_VALUE:
            raise FormatError(f"{what} is not finite or out of range ({tok!r})", self.path, line)
        return v


def _parse_hierarchy(text: str, path):
    tokens = _tokens(text)
    cur = _Cursor(tokens, path, text.count("\n") + 1)
    if cur.peek() is None or cur.peek().upper() != "HIERARCHY":
        raise FormatError("file does not start with HIERARCHY", path, cur.line())
    cur.next("HIERARCHY")
    if cur.peek() is None or cur.peek().upper() != "ROOT":
        raise FormatError(f"expected ROOT, found {cur.peek()!r}", path, cur.line())

    names: list[str] = []
    parents: list[int] = []
    offsets: list[list[float]] = []
    channels: list[list[str]] = []
    end_sites: list[tuple[int, np.ndarray, int]] = []
    seen: dict[str, int] = {}

    # Iterative depth-first walk: stack holds the index of the open joint (or -2 for an
    # End Site block) for each '{' opened.
    stack: list[int] = []
    while True:
        tok = cur.peek()
        line = cur.line()
        if tok is None:
            if stack:
                raise FormatError("unexpected end of HIERARCHY: missing '}'", path, line)
            break
        up = tok.upper()
        if up in ("ROOT", "JOINT"):
            cur.next(tok)
            if up == "ROOT" and (stack or names):
                raise FormatError("several ROOT joints (only one skeleton per file is supported)"
                                  if not stack else "ROOT inside another joint", path, line)
            if up == "JOINT" and not stack:
                raise FormatError("JOINT outside of the ROOT block", path, line)
            if stack and stack[-1] < 0:
                raise FormatError("JOINT inside an End Site", path, line)
            name = " ".join(cur.rest_of_line())
            if not name:
                raise FormatError(f"{tok} without a name", path, line)
            if name in seen:
                raise FormatError(f"duplicate joint name {name!r} (first on line {seen[name]})", path, line)
            seen[name] = line
            cur.expect("{")
            j = len(names)
            names.append(name)
            parents.append(stack[-1] if stack else -1)
            offsets.append(None)
            channels.append(None)
            stack.append(j)
        elif up == "END":
            cur.next(tok)
            cur.rest_of_line()  # "Site" (and anything else some exporters put there)
            if not stack or stack[-1] < 0:
                raise FormatError("End Site outside of a joint", path, line)
            cur.expect("{")
            end_sites.append((stack[-1], None, len(names)))
            stack.append(-2)
        elif up == "OFFSET":
            cur.next(tok)
            if not stack:
                raise FormatError("OFFSET outside of a joint", path, line)
            off = [cur.number("OFFSET x"), cur.number("OFFSET y"), cur.number("OFFSET z")]
            if stack[-1] < 0:
                j, prev, at = end_sites[-1]
                if prev is not None:
                    raise FormatError("second OFFSET in an End Site", path, line)
                end_sites[-1] = (j, np.asarray(off, np.float64), at)
            else:
                if offsets[stack[-1]] is not None:
                    raise FormatError(f"second OFFSET for joint {names[stack[-1]]!r}", path, line)
                offsets[stack[-1]] = off
        elif up == "CHANNELS":
            cur.next(tok)
            if not stack or stack[-1] < 0:
                raise FormatError("CHANNELS outside of a joint", path, line)
            j = stack[-1]
            if channels[j] is not None:
                raise FormatError(f"second CHANNELS for joint {names[j]!r}", path, line)
            count_tok = cur.next("channel count")
            if not (count_tok.isascii() and count_tok.isdigit()) or int(count_tok) > 6:
                raise FormatError(f"bad channel count {count_tok!r} (0 to 6)", path, line)
            chans = []
            for k in range(int(count_tok)):
                cline = cur.line()
                if cline != line:
                    raise FormatError(f"CHANNELS {count_tok} but {k} channel names for joint {names[j]!r}",
                                      path, line)
                c = cur.next("channel name")
                canon = CHANNEL_NAMES.get(c.lower())
                if canon is None:
                    raise FormatError(f"unknown channel {c!r} for joint {names[j]!r} (CHANNELS {count_tok})",
                                      path, cline)
                if canon in chans:
                    raise FormatError(f"channel {canon} repeated for joint {names[j]!r}", path, cline)
                chans.append(canon)
            if cur.peek() is not None and cur.line() == line and cur.peek() not in "{}":
                raise FormatError(f"more channel names than CHANNELS {count_tok} for joint {names[j]!r}",
                                  path, line)
            channels[j] = chans
        elif tok == "}":
            cur.next(tok)
            if not stack:
                raise FormatError("unbalanced '}'", path, line)
            j = stack.pop()
            if j < 0:
                if end_sites[-1][1] is None:
                    raise FormatError("End Site without OFFSET", path, line)
            else:
                if offsets[j] is None:
                    raise FormatError(f"joint {names[j]!r} has no OFFSET", path, line)
                if channels[j] is None:
                    raise FormatError(f"joint {names[j]!r} has no CHANNELS", path, line)
            if not stack and cur.peek() is not None:
                raise FormatError(f"unexpected {cur.peek()!r} after the ROOT block", path, cur.line())
        else:
            raise FormatError(f"unexpected {tok!r} in HIERARCHY", path, line)
    if not names:
        raise FormatError("HIERARCHY holds no joints", path, cur.line())
    return (names, np.asarray(parents, np.int64), np.asarray(offsets, np.float64).reshape(-1, 3),
            channels, end_sites)


# --------------------------------------------------------------------------- motion

def _parse_motion_header(raw: bytes, pos: int, motion_line: int, path):
    """Read "Frames:" and "Frame Time:" after MOTION; return (frames, frame_time, data offset, data line).

    ``pos`` is the end of the MOTION line (at its newline), ``motion_line`` its number.
    """
    found: list[tuple[str, int]] = []
    lineno = motion_line
    nl = raw.find(b"\n", pos)
    while len(found) < 2:
        if nl < 0:
            what = "Frames:" if not found else "Frame Time:"
            raise FormatError(f"truncated MOTION header: missing {what!r}", path, lineno)
        pos, lineno = nl + 1, lineno + 1
        nl = raw.find(b"\n", pos)
        text = _decode(raw[pos:len(raw) if nl < 0 else nl]).strip()
        if text:
            found.append((text, lineno))
    (ftext, fline), (ttext, tline) = found
    m = _FRAMES_RE.match(ftext)
    if m is None or not (m.group(1).isascii() and m.group(1).isdigit()):
        raise FormatError(f"expected 'Frames: N', found {ftext[:60]!r}", path, fline)
    frames = int(m.group(1))
    m = _FRAME_TIME_RE.match(ttext)
    try:
        frame_time = float(m.group(1)) if m else float("nan")
    except ValueError:
        frame_time = float("nan")
    if not (np.isfinite(frame_time) and frame_time > 0):
        raise FormatError(f"expected 'Frame Time: SECONDS' (> 0), found {ttext[:60]!r}", path, tline)
    if frames == 0:
        raise FormatError("Frames: 0 (the file holds no motion)", path, fline)
    data_start = len(raw) if nl < 0 else nl + 1
    return frames, frame_time, data_start, tline + 1


def _parse_values(block: bytes, frames: int, num_channels: int, first_line: int, path) -> np.ndarray:
    """(frames, num_channels) float64 from the MOTION lines; FormatError naming the line."""
    values = None
    if num_channels == 0 and not block.strip() and block.count(b"\n") >= frames:
        return np.zeros((frames, 0))            # no channels: one blank line per frame
    if num_channels > 0:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values = np.loadtxt(io.BytesIO(block), dtype=np.float64, comments=None, ndmin=2,
                                    encoding="latin-1")
        except (ValueError, UnicodeDecodeError):
            values = None
        if values is None and b"\r" in block:        # old Mac line ends (CR only): normalise, retry
            block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            return _parse_values(block, frames, num_channels, first_line, path)
    if values is not None and values.shape == (frames, num_channels) and \
            (values.size == 0 or np.abs(values).max() < MAX_ABS_VALUE):     # also False for NaN
        return values
    _diagnose(block, frames, num_channels, first_line, path)
    # _diagnose found every line fine; only a case the fast reader rejects is left.
    raise FormatError("MOTION values could not be read", path, first_line)


def _diagnose(block: bytes, frames: int, num_channels: int, first_line: int, path) -> None:
    """Slow path on bad input: raise FormatError for the first bad MOTION line."""
    rows = 0
    last = first_line
    for i, line in enumerate(block.split(b"\n")):
        toks = line.split()
        if not toks:
            continue
        lineno = first_line + i
        last = lineno
        rows += 1
        if rows > frames:
            raise FormatError(f"more MOTION lines than 'Frames: {frames}'", path, lineno)
        if len(toks) != num_channels:
            raise FormatError(f"frame {rows - 1} has {len(toks)} values, expected {num_channels} "
                              f"(one per channel)", path, lineno)
        for k, t in enumerate(toks):
            try:
                if b"_" in t:           # Python's float() takes "1_0"; NumPy's reader does not
                    raise ValueError(t)
                v = float(t)
            except ValueError:
                raise FormatError(f"non-numeric value {_decode(t)[:30]!r} in column {k + 1}", path, lineno) from None
            if not abs(v) < MAX_ABS_VALUE:
                raise FormatError(f"non-finite or out-of-range value {_decode(t)[:30]!r} in column {k + 1}",
                                  path, lineno)
    if rows < frames:
        raise FormatError(f"truncated: 'Frames: {frames}' but only {rows} MOTION lines", path, last + 1
                          if rows else first_line)
