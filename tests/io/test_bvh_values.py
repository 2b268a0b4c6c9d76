"""The compiled MOTION reader (kinema.io.bvh_kernels) gives np.loadtxt's bits, or declines."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from kinema.data import shared_root
from kinema.io import bvh_parse
from kinema.io.bvh_kernels import POW10, read_values

SAMPLE = Path(__file__).resolve().parents[2] / "src" / "kinema" / "assets" / "sample"


def _loadtxt(block: bytes) -> np.ndarray:
    return np.loadtxt(io.BytesIO(block), dtype=np.float64, comments=None, ndmin=2, encoding="latin-1")


def _compiled(block: bytes, frames: int, cols: int) -> np.ndarray | None:
    out = np.empty((frames, cols))
    return out if read_values(np.frombuffer(block, np.uint8), 0, out, POW10) else None


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint64)


def _bvh_files() -> list[Path]:
    root = shared_root()
    files = sorted(SAMPLE.rglob("*.bvh"))
    if root is not None:
        files += sorted((root / "lafan1").glob("*.bvh"))[:2] + sorted(root.rglob("*.bvh"))[::40]
    return files


@pytest.mark.parametrize("path", _bvh_files(), ids=lambda p: p.name)
def test_real_files_read_compiled_with_loadtxt_bits(path):
    raw = path.read_bytes()
    m = bvh_parse._find_motion(raw)
    header = bvh_parse._decode(raw[:m.start()])
    channels = sum(len(c) for c in bvh_parse._parse_hierarchy(header, path)[3])
    frames, _, start, _ = bvh_parse._parse_motion_header(raw, m.end(), header.count("\n") + 1, path)
    got = bvh_parse._read_plain(raw, start, frames, channels)
    if path.parent.name in ("lafan1", "games105", "cmu"):      # plain decimals, no exponents
        assert got is not None, "a plain-decimal file fell back to np.loadtxt"
    if got is not None:                  # else (e.g. 7.5e-16: 10**-24) np.loadtxt reads it
        assert np.array_equal(_bits(got), _bits(_loadtxt(raw[start:])))


def test_edge_values_match_loadtxt_bit_for_bit():
    rng = np.random.default_rng(0)
    words = ["-0.000000", "0", "+1.5", "-.5", "7.", "9007199254740991", "0.9007199254740991",
             "-123.4567890123456", "0.0000000000000000000001", "3.14159265358979",
             "5.1072e-06", "-4.3199E-07", "1e+22", "12e-22", "0e-22", "2.5e0"]
    words += [f"{v:.{d}f}" for v, d in zip(rng.normal(0, 300, 400), rng.integers(0, 12, 400))]
    rows = [" \t".join(words[i:i + 10]) for i in range(0, len(words) - len(words) % 10, 10)]
    block = ("\r\n".join(rows[:20]) + "\n\n  \t\n" + "\n".join(rows[20:]) + "\n\n").encode()
    got = _compiled(block, len(rows), 10)
    assert got is not None
    want = _loadtxt(block)
    assert np.array_equal(_bits(got), _bits(want))
    assert np.signbit(got[0, 0]) and got[0, 0] == 0.0           # "-0.000000" is -0.0


@pytest.mark.parametrize("block", [
    b"1e23 2\n",                      # 10**23 is not an exact double
    b"1.5e-30 2\n",
    b"1e 2\n",
    b"1e12345 2\n",
    b"nan 2\n",
    b"9007199254740993 2\n",           # beyond 2**53: the division could round twice
    b"0.00000000000000000000001 2\n",  # 23 decimals: 10**23 is not an exact double
    b"1 2\r3 4\n",                    # a lone CR
    b"1\x0b2\n",                      # vertical tab, whitespace to np.loadtxt only
    b"1 2 3\n",                       # a wrong count of values
    b"1 - \n",
    b"1.2.3 4\n",
])
def test_other_text_is_left_to_loadtxt(block):
    assert _compiled(block, 1, 2) is None


def test_frame_count_must_match():
    assert _compiled(b"1 2\n3 4\n", 1, 2) is None
    assert _compiled(b"1 2\n", 2, 2) is None
    assert _compiled(b"1 2\n3 4", 2, 2) is not None                # no newline at the end


def test_values_past_the_range_limit_are_declined_and_refused_with_their_line(tmp_path):
    """9e37 (or 9e30) is an exact decimal the fast reader could compute; like the slow path it must not
    accept it (the loader refuses values at or above MAX_ABS_VALUE and names the line)."""
    import kinema
    from kinema.errors import FormatError
    from kinema.io import bvh_kernels

    assert bvh_kernels._MAX_ABS == bvh_parse.MAX_ABS_VALUE
    assert _compiled(b"1.5 9000000000000000e13\n", 1, 2) is not None       # 9e28: fine
    assert _compiled(b"1.5 9000000000000000e15\n", 1, 2) is None           # 9e30: declined
    text = ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Xposition Yposition Zposition\n"
            " End Site\n {\n  OFFSET 0 1 0\n }\n}\nMOTION\nFrames: 2\nFrame Time: 0.0333333\n"
            "0 1 0\n0 9000000000000000e22 0\n")
    path = tmp_path / "huge.bvh"
    path.write_text(text)
    with pytest.raises(FormatError, match="out-of-range") as err:
        kinema.load(path)
    assert "15" in str(err.value)                                          # the second MOTION line
