"""Parse BVH text into raw arrays (file units, degrees); :mod:`kinema.io.bvh` builds a Motion.

The HIERARCHY block is small: a compiled reader (:mod:`kinema.io.bvh_hierarchy_kernels`)
takes the plain case and declines everything else to the statement-by-statement parser
here, which names any error; the MOTION block (almost
all of the file) is read by a compiled reader of plain decimals
(:mod:`kinema.io.bvh_kernels`, the same bits as ``np.loadtxt`` several times faster),
else in one call to NumPy's C text reader, and validated by shape, so the cost per frame
is never a Python loop. When both fail, a slow pass finds the first bad line so the
:class:`~kinema.errors.FormatError` names it.
"""
from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

import numpy as np

from kinema.errors import FormatError, MissingFileError
from kinema.io.validate import check_motion_size
from kinema.limits import DEFAULT, Limits

#: Valid channel names (canonical spelling), keyed by their lower-case form.
CHANNEL_NAMES = {f"{a}{k}".lower(): f"{a.upper()}{k}" for k in ("position", "rotation") for a in "xyz"}

#: Larger magnitudes are refused: no mocap value is near it, and float32 would overflow.
MAX_ABS_VALUE = 1e30

#: Upper-case forms of the usual spellings of HIERARCHY keywords (no str.upper() per line).
_UPPER = {k: k.upper() for k in ("ROOT", "JOINT", "End", "END", "OFFSET", "CHANNELS", "{", "}")}
#: CHANNELS statements (all their tokens) already checked, with their canonical channel names.
_CHANNEL_LISTS: dict[tuple[str, ...], tuple[str, ...]] = {}

_MOTION_RE = re.compile(rb"^[ \t]*MOTION[ \t]*\r?$", re.MULTILINE | re.IGNORECASE)
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


def read(path: str | Path, limits: Limits = DEFAULT) -> BvhData:
    """Read the BVH file at ``path``; raises FormatError naming file and line on bad input."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise MissingFileError("no such file", path) from None
    except IsADirectoryError as exc:
        raise FormatError("is a directory, not a BVH file", path) from exc
    except OSError as exc:
        raise FormatError(f"cannot read the file ({exc.strerror})", path) from None
    return parse(raw, path, limits)


def _find_motion(raw: bytes) -> re.Match | None:
    """The first MOTION line, as ``_MOTION_RE.search(raw)`` finds it, but scanning only as
    far as needed (the HIERARCHY is a few kilobytes of a file of megabytes): windows that
    double in size; a match ending at a window's end is checked again in a larger one (the
    line might go on)."""
    at = raw.find(b"MOTION")
    if at >= 0:                 # usually the line sought, when nothing before it reads "motion"
        line = raw.rfind(b"\n", 0, at) + 1
        nl = raw.find(b"\n", at)
        m = _MOTION_RE.match(raw, line, len(raw) if nl < 0 else nl)
        if m is not None and b"motion" not in raw[:line].lower():
            return m
    end = 1 << 16
    while True:
        m = _MOTION_RE.search(raw, 0, end)
        if end >= len(raw) or (m is not None and m.end() < end):
            return m
        end *= 4


def parse(raw: bytes, path: str | Path | None = None, limits: Limits = DEFAULT) -> BvhData:
    """Parse the bytes of a BVH file (``path`` only names it in errors).

    The declared frame count times the joint count is checked against ``limits`` before
    the MOTION block is read, and the frame rate (1 / Frame Time) against its range.
    """
    m = _find_motion(raw)
    if m is None:
        raise FormatError("no MOTION section (a line holding only 'MOTION')", path,
                          raw.count(b"\n") + 1)
    header = _decode(raw[:m.start()])
    parsed = _compiled_hierarchy(raw, m.start(), header)
    names, parents, offsets, channels, end_sites = parsed or _parse_hierarchy(header, path)
    motion_line = header.count("\n") + 1
    frames, frame_time, data_start, data_line = _parse_motion_header(raw, m.end(), motion_line, path,
                                                                     limits)
    check_motion_size(frames, len(names) + len(end_sites), path, limits)
    num_channels = sum(len(c) for c in channels)
    values = _read_plain(raw, data_start, frames, num_channels)
    if values is None:
        values = _parse_values(raw[data_start:], frames, num_channels, data_line, path)
    starts = list(accumulate((len(c) for c in channels[:-1]), initial=0))
    return BvhData(names, parents, offsets, channels, end_sites, frame_time, values,
                   None if path is None else str(path), starts)


def _decode(b: bytes) -> str:
    try:
        return b.decode("utf-8-sig")        # a byte-order mark is not part of "HIERARCHY"
    except UnicodeDecodeError:
        return b.decode("latin-1")


# --------------------------------------------------------------------------- hierarchy

def _statements(text: str):
    """Yield (tokens, 1-based line) per statement: the tokens of a line, split at braces
    (so "JOINT a {" gives ["JOINT", "a"] then ["{"])."""
    for i, line in enumerate(text.split("\n"), 1):
        toks = line.split()
        if not toks:
            continue
        if len(toks) > 1 and ("{" in line or "}" in line):
            group: list[str] = []
            for tok in line.replace("{", " { ").replace("}", " } ").split():
                if tok in ("{", "}"):
                    if group:
                        yield group, i
                        group = []
                    yield [tok], i
                else:
                    group.append(tok)
            if group:
                yield group, i
        else:
            yield toks, i


def _channel_list(toks: list[str], joint: str, path, line: int) -> list[str]:
    """The canonical channel names of the statement ``CHANNELS n name...`` (its tokens)
    of ``joint``; FormatError on a bad count or name. Lists read before are remembered
    (a data set uses a handful)."""
    key = tuple(toks)
    known = _CHANNEL_LISTS.get(key)
    if known is not None:
        return list(known)
    count_tok = toks[1] if len(toks) > 1 else ""
    if not (count_tok.isascii() and count_tok.isdigit()) or int(count_tok) > 6:
        raise FormatError(f"bad channel count {count_tok!r} (0 to 6)", path, line)
    n = int(count_tok)
    if len(toks) - 2 != n:
        raise FormatError(f"CHANNELS {n} but {len(toks) - 2} channel names for joint {joint!r}", path, line)
    chans: list[str] = []
    for c in toks[2:]:
        canon = CHANNEL_NAMES.get(c.lower())
        if canon is None:
            raise FormatError(f"unknown channel {c!r} for joint {joint!r}", path, line)
        if canon in chans:
            raise FormatError(f"channel {canon} repeated for joint {joint!r}", path, line)
        chans.append(canon)
    if len(_CHANNEL_LISTS) < 256:
        _CHANNEL_LISTS[key] = tuple(chans)
    return chans


#: Canonical channel names by the codes of :mod:`kinema.io.bvh_hierarchy_kernels`.
_CHANNEL_CODES = ("Xposition", "Yposition", "Zposition", "Xrotation", "Yrotation", "Zrotation")
#: Channel lists by layout code (:data:`kinema.io.bvh_hierarchy_kernels.LAYOUT_BASE`).
_LAYOUTS: dict[int, tuple[str, ...]] = {}


def _layout(code: int) -> tuple[str, ...]:
    """The channel names of a layout code from the compiled HIERARCHY reader."""
    known = _LAYOUTS.get(code)
    if known is None:
        from kinema.io.bvh_hierarchy_kernels import LAYOUT_BASE
        names, rest = [], code
        while rest:
            rest, digit = divmod(rest, LAYOUT_BASE)
            names.append(_CHANNEL_CODES[digit - 1])
        known = _LAYOUTS[code] = tuple(names)        # bounded: 1,957 lists of distinct channels
    return known


def _compiled_hierarchy(raw: bytes, end: int, header: str):
    """What :func:`_parse_hierarchy` returns for ``header`` (the decoded ``raw[:end]``), read
    by :func:`kinema.io.bvh_hierarchy_kernels.hierarchy`, or None when that declines (the
    block is not the plain case, or is malformed: the Python parser then reads it and
    names the error). The same values: names, parents, OFFSET bits, channel lists."""
    cap = raw.count(b"{", 0, end)            # every joint and End Site opens one
    if cap == 0:
        return None
    from kinema.io import bvh_hierarchy_kernels, bvh_kernels
    ints = np.empty((6, cap), np.int64)
    floats = np.empty((2, cap, 3))
    joints, sites = bvh_hierarchy_kernels.hierarchy(np.frombuffer(raw, np.uint8), end, bvh_kernels.POW10,
                                                     ints, floats)
    if joints < 0:
        return None
    _, layouts, starts, stops, site_joint, site_at = ints.tolist()
    names = [header[s:e] for s, e in zip(starts[:joints], stops[:joints])]     # ASCII: a byte is a character
    if len(set(names)) != joints:
        return None                                  # the Python parser names the duplicate
    channels = [list(_layout(c)) for c in layouts[:joints]]
    site_off = floats[1]
    end_sites = [(site_joint[k], site_off[k], site_at[k]) for k in range(sites)]
    return names, ints[0, :joints], floats[0, :joints], channels, end_sites


def _number(tok: str, what: str, path, line: int) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise FormatError(f"expected a number for {what}, found {tok!r}", path, line) from None
    if not abs(v) < MAX_ABS_VALUE:
        raise FormatError(f"{what} is not finite or out of range ({tok!r})", path, line)
    return v


def _parse_hierarchy(text: str, path):
    """Joint names, parents, offsets, channels and End Sites of the HIERARCHY block."""
    names: list[str] = []
    parents: list[int] = []
    offsets: list = []
    channels: list = []
    end_sites: list[tuple[int, np.ndarray, int]] = []
    seen: dict[str, int] = {}
    # One entry per open '{': the joint index, or -2 for an End Site block. A joint or
    # End Site statement waits in `pending` until its '{'.
    stack: list[int] = []
    pending: tuple[int, int] | None = None      # (joint index or -2, line)
    closed_root = False
    last_line = text.count("\n") + 1
    statements = _statements(text)
    first = next(statements, None)
    if first is None or first[0][0].upper() != "HIERARCHY" or len(first[0]) != 1:
        raise FormatError("file does not start with HIERARCHY", path, 1 if first is None else first[1])
    for toks, line in statements:
        head = toks[0]
        key = _UPPER.get(head) or head.upper()
        if closed_root:
            raise FormatError(f"unexpected {head!r} after the ROOT block", path, line)
        if pending is not None and head != "{":
            raise FormatError(f"expected '{{', found {head!r}", path, line)
        if head == "{":
            if pending is None:
                raise FormatError("'{' without ROOT, JOINT or End Site before it", path, line)
            stack.append(pending[0])
            pending = None
        elif head == "}":
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
            closed_root = not stack
        elif key in ("ROOT", "JOINT"):
            if key == "ROOT" and (stack or names):
                raise FormatError("ROOT inside another joint" if stack else
                                  "several ROOT joints (only one skeleton per file is supported)", path, line)
            if key == "JOINT" and not stack:
                raise FormatError("JOINT outside of the ROOT block" if names else f"expected ROOT, found {head!r}",
                                  path, line)
            if stack and stack[-1] < 0:
                raise FormatError("JOINT inside an End Site", path, line)
            name = " ".join(toks[1:])
            if not name:
                raise FormatError(f"{head} without a name", path, line)
            if name in seen:
                raise FormatError(f"duplicate joint name {name!r} (first on line {seen[name]})", path, line)
            seen[name] = line
            names.append(name)
            parents.append(stack[-1] if stack else -1)
            offsets.append(None)
            channels.append(None)
            pending = (len(names) - 1, line)
        elif key == "END":
            if not stack or stack[-1] < 0:
                raise FormatError("End Site outside of a joint", path, line)
            end_sites.append((stack[-1], None, len(names)))
            pending = (-2, line)
        elif key == "OFFSET":
            if not stack:
                raise FormatError("OFFSET outside of a joint", path, line)
            if len(toks) != 4:
                if len(toks) < 4:
                    for k, tok in enumerate(toks[1:]):
                        _number(tok, "OFFSET " + "xyz"[k], path, line)
                    raise FormatError(f"OFFSET needs 3 numbers, found {len(toks) - 1}", path, line)
                raise FormatError(f"OFFSET needs 3 numbers, found {len(toks) - 1}: {' '.join(toks[1:])[:60]!r}",
                                  path, line)
            try:
                off = [float(toks[1]), float(toks[2]), float(toks[3])]
            except ValueError:
                off = []
            if not (len(off) == 3 and abs(off[0]) < MAX_ABS_VALUE and abs(off[1]) < MAX_ABS_VALUE
                    and abs(off[2]) < MAX_ABS_VALUE):            # NaN: False; _number names the bad one
                off = [_number(toks[1], "OFFSET x", path, line), _number(toks[2], "OFFSET y", path, line),
                       _number(toks[3], "OFFSET z", path, line)]
            if stack[-1] < 0:
                j, prev, at = end_sites[-1]
                if prev is not None:
                    raise FormatError("second OFFSET in an End Site", path, line)
                end_sites[-1] = (j, np.asarray(off, np.float64), at)
            else:
                if offsets[stack[-1]] is not None:
                    raise FormatError(f"second OFFSET for joint {names[stack[-1]]!r}", path, line)
                offsets[stack[-1]] = off
        elif key == "CHANNELS":
            if not stack or stack[-1] < 0:
                raise FormatError("CHANNELS outside of a joint", path, line)
            j = stack[-1]
            if channels[j] is not None:
                raise FormatError(f"second CHANNELS for joint {names[j]!r}", path, line)
            channels[j] = _channel_list(toks, names[j], path, line)
        else:
            raise FormatError(f"unexpected {head!r} in HIERARCHY", path, line)
    if pending is not None:
        raise FormatError("unexpected end of HIERARCHY: expected '{'", path, last_line)
    if stack:
        raise FormatError("unexpected end of HIERARCHY: missing '}'", path, last_line)
    if not names:
        raise FormatError("HIERARCHY holds no joints", path, last_line)
    return (names, np.asarray(parents, np.int64), np.asarray(offsets, np.float64).reshape(-1, 3),
            channels, end_sites)


# --------------------------------------------------------------------------- motion

def _parse_motion_header(raw: bytes, pos: int, motion_line: int, path, limits: Limits = DEFAULT):
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
    fps = 1.0 / frame_time if frame_time >= 1e-300 else float("inf")
    if not limits.min_fps <= fps <= limits.max_fps:
        raise FormatError(f"Frame Time {frame_time:g} s is {fps:g} frames per second, outside "
                          f"{limits.min_fps:g}..{limits.max_fps:g} (kinema.limits.Limits.min_fps/max_fps)",
                          path, tline)
    if frames == 0:
        raise FormatError("Frames: 0 (the file holds no motion)", path, fline)
    data_start = len(raw) if nl < 0 else nl + 1
    return frames, frame_time, data_start, tline + 1


def _read_plain(raw: bytes, start: int, frames: int, num_channels: int) -> np.ndarray | None:
    """(frames, num_channels) float64 from the MOTION lines at ``raw[start:]`` when they are
    plain decimals that :mod:`kinema.io.bvh_kernels` reads exactly (the same bits as
    ``np.loadtxt``), else None (the caller then takes :func:`_parse_values`, which also
    diagnoses a value at or above :data:`MAX_ABS_VALUE`)."""
    if num_channels == 0:
        return None
    from kinema.io import bvh_kernels
    out = np.empty((frames, num_channels))
    if bvh_kernels.read_values(np.frombuffer(raw, np.uint8), start, out, bvh_kernels.POW10):
        return out
    return None


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
            (values.size == 0 or -MAX_ABS_VALUE < values.min() and values.max() < MAX_ABS_VALUE):  # NaN: False
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
