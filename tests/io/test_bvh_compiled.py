"""The compiled HIERARCHY reader, Euler conversion and range check of a BVH load give the
Python code's answers bit for bit, or decline so that code runs."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from kinema.data import shared_root
from kinema.errors import FormatError
from kinema.io import bvh, bvh_kernels, bvh_parse
from kinema.limits import DEFAULT
from kinema.maths import quat

SAMPLE = Path(__file__).resolve().parents[2] / "src" / "kinema" / "assets" / "sample"


def _files() -> list[Path]:
    root = shared_root()
    files = sorted(SAMPLE.rglob("*.bvh"))
    if root is not None:
        files += sorted(root.rglob("*.bvh"))[::25]
    return files


def _header(raw: bytes) -> tuple[int, str]:
    end = bvh_parse._find_motion(raw).start()
    return end, bvh_parse._decode(raw[:end])


def _python(header: str):
    """What the Python parser gives: its five results, or the FormatError it raises."""
    try:
        return bvh_parse._parse_hierarchy(header, "h.bvh")
    except FormatError as e:
        return e


def _assert_same(fast, slow) -> None:
    names, parents, offsets, channels, sites = fast
    assert names == slow[0] and channels == slow[3]
    assert parents.dtype == slow[1].dtype and np.array_equal(parents, slow[1])
    assert offsets.dtype == slow[2].dtype and offsets.tobytes() == slow[2].tobytes()
    assert [(j, at) for j, _, at in sites] == [(j, at) for j, _, at in slow[4]]
    assert all(a.tobytes() == b.tobytes() for (_, a, _), (_, b, _) in zip(sites, slow[4]))


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_real_headers_read_compiled_as_the_python_parser_reads_them(path):
    raw = path.read_bytes()
    end, header = _header(raw)
    fast = bvh_parse._compiled_hierarchy(raw, end, header)
    if path.parent.name in ("games105", "cmu", "xia"):       # plain headers
        assert fast is not None, "a plain header fell back to the Python parser"
    if fast is not None:
        _assert_same(fast, _python(header))


HEADER = """HIERARCHY
ROOT Hips
{
\tOFFSET 0.0 -0.000 91.5
\tCHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
\tJOINT LeftUpLeg
\t{
\t\tOFFSET 9.1 -1.5e1 +0.25
\t\tCHANNELS 3 Zrotation Xrotation Yrotation
\t\tEnd Site
\t\t{
\t\t\tOFFSET 0 -40.5 .5
\t\t}
\t}
\tJOINT Spine { OFFSET 0 10 0
\t\tCHANNELS 2 yrotation XROTATION
\t\tEND Site
\t\t{
\t\t\tOFFSET 0 10 0
\t\t}
\t}
\tjoint Tail
\t{
\t\tOFFSET 0 -1 -5
\t\tCHANNELS 0
\t\tEnd Site
\t\t{
\t\t\tOFFSET 0 0 -5
\t\t}
\t}
}
"""


def test_keyword_case_braces_on_a_line_and_signed_zero_read_compiled():
    raw = (HEADER + "MOTION\n").encode()
    end, header = _header(raw)
    fast = bvh_parse._compiled_hierarchy(raw, end, header)
    assert fast is not None
    _assert_same(fast, _python(header))
    assert fast[0] == ["Hips", "LeftUpLeg", "Spine", "Tail"] and fast[3][2] == ["Yrotation", "Xrotation"]
    assert np.signbit(fast[2][0, 1]) and fast[4][1][2] == 3


@pytest.mark.parametrize("change", [
    ("ROOT Hips", "ROOT Hip s"),                  # a name of two words: joined by the parser
    ("OFFSET 0.0 -0.000", "OFFSET 1_0 -0.000"),   # float() reads 1_0
    ("OFFSET 0.0 -0.000", "OFFSET 1e-30 -0.000"), # 10**-30 is no exact double
    ("HIERARCHY", "\ufeffHIERARCHY"),             # a byte order mark
    ("JOINT Spine", "JOINT Sp\u00efne"),          # not ASCII
    ("\t}\n\tjoint Tail", "\t}}\n\tjoint Tail"),  # a token "}}": an error to the parser
    ("JOINT Spine {", "JOINT Spine{"),            # a brace touching a name
    ("JOINT LeftUpLeg", "JOINT Hips"),            # a duplicate name
    ("CHANNELS 0", "CHANNELS 1"),                 # a wrong count
    ("\tjoint Tail", "\tjoint Tail\x0b"),         # vertical tab: whitespace to str.split
])
def test_other_headers_are_left_to_the_python_parser(change):
    text = HEADER.replace(*change)
    assert text != HEADER
    raw = (text + "MOTION\n").encode()
    end, header = _header(raw)
    assert bvh_parse._compiled_hierarchy(raw, end, header) is None


def _mutants(raw: bytes, count: int, seed: int):
    """Headers with lines dropped, repeated or swapped, tokens inserted, bytes replaced."""
    rnd = random.Random(seed)
    lines = raw.split(b"\n")
    words = [b"{", b"}", b"ROOT", b"JOINT", b"End", b"OFFSET", b"CHANNELS", b"3", b"7", b"-0", b"1e5",
             b"Xrotation", b"zPOSITION", b"HIERARCHY", b"a", b"\t", b"\r", b"{}", b"\xc3\xa9", b"1.5.2"]
    for _ in range(count):
        out = list(lines)
        for _ in range(rnd.randint(1, 3)):
            i, k = rnd.randrange(len(out)), rnd.randrange(len(out))
            kind = rnd.randrange(5)
            if kind == 0:
                del out[i]
            elif kind == 1:
                out.insert(i, out[k])
            elif kind == 2:
                out[i], out[k] = out[k], out[i]
            elif kind == 3:
                toks = out[i].split(b" ")
                toks.insert(rnd.randint(0, len(toks)), rnd.choice(words))
                out[i] = b" ".join(toks)
            elif out[i]:
                at = rnd.randrange(len(out[i]))
                out[i] = out[i][:at] + bytes([rnd.randrange(256)]) + out[i][at + 1:]
            if not out:
                out = [b""]
        yield b"\n".join(out)


def test_mutated_headers_read_compiled_give_the_parser_result_or_decline():
    raw = (HEADER + "MOTION\n").encode()
    head = raw[:raw.index(b"MOTION")]
    compiled = errors = 0
    for text in _mutants(head, 3000, seed=5):
        header = bvh_parse._decode(text)
        fast = bvh_parse._compiled_hierarchy(text, len(text), header)
        slow = _python(header)
        if isinstance(slow, FormatError):
            errors += 1
            assert fast is None, (text, slow)
        elif fast is not None:
            compiled += 1
            _assert_same(fast, slow)
    assert compiled > 100 and errors > 1000          # both sides of the comparison were met


@pytest.mark.parametrize("order", quat.EULER_ORDERS)
def test_euler_kernels_give_from_euler_bits(order):
    rng = np.random.default_rng(7)
    angles = rng.normal(0, 200, (300, 4, 3))
    angles[0], angles[1], angles[2, :, 1] = 0.0, -0.0, 90.0
    angles[3] = rng.integers(-4, 5, (4, 3)) * 90.0
    want = quat.from_euler(np.radians(angles).astype(np.float32), order)
    cols = np.arange(12).reshape(4, 3)
    axes = np.tile(["xyz".index(a) for a in order], (4, 1))
    half = np.empty((300, 4, 3), np.float32)
    bvh_kernels.half_angles(angles.reshape(300, 12), cols, half)
    got = np.empty((300, 4, 4), np.float32)
    bvh_kernels.euler_quaternions(np.cos(half), np.sin(half), axes, got)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_euler_kernels_missing_axes_are_zero_angles_and_no_rotation_is_identity():
    values = np.array([[30.0, -45.0]])
    cols = np.array([[0, -1, 1], [-1, -1, -1]])            # "zxy" with no x channel; no rotation
    axes = np.array([[2, 0, 1], [-1, -1, -1]])
    half = np.empty((1, 2, 3), np.float32)
    bvh_kernels.half_angles(values, cols, half)
    got = np.empty((1, 2, 4), np.float32)
    bvh_kernels.euler_quaternions(np.cos(half), np.sin(half), axes, got)
    want = quat.from_euler(np.radians([[30.0, 0.0, -45.0]]).astype(np.float32), "zxy")
    assert np.array_equal(got[0, 0].view(np.uint32), want[0].view(np.uint32))
    assert got[0, 1].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_range_check_passes_a_loaded_motion_and_refuses_what_check_motion_would_change():
    m = bvh.load(SAMPLE / "games105" / "run_forward.bvh")
    limit = DEFAULT.max_abs_position
    args = (m.skeleton.offsets, m.positions, m.rotations)
    assert bvh_kernels.motion_in_range(*args, limit, 5e-6)
    pos, rot, off = m.positions.copy(), m.rotations.copy(), m.skeleton.offsets.copy()
    pos[3, 2, 1] = np.nan
    assert not bvh_kernels.motion_in_range(off, pos, rot, limit, 5e-6)
    pos[3, 2, 1] = limit * 1.01
    assert not bvh_kernels.motion_in_range(off, pos, rot, limit, 5e-6)
    off[0, 0] = np.inf
    assert not bvh_kernels.motion_in_range(off, m.positions, rot, limit, 5e-6)
    rot[7, 1] *= np.float32(1 + 1e-5)                       # check_motion renormalises this one
    assert not bvh_kernels.motion_in_range(m.skeleton.offsets, m.positions, rot, limit, 5e-6)
