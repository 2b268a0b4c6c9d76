"""Fuzzing the BVH reader with mutated real files: it either returns a valid Motion or
raises a kinema error (FormatError naming the file and a line), never another exception,
and never hangs (hypothesis deadline per example)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinema.errors import FormatError, KinemaError
from kinema.io import bvh
from kinema.io.bvh_parse import parse

SOURCES = [
    ("characters", "geno", "geno_bind.bvh"),                         # 75 joints, 2 frames
    ("bandai_namco", "dataset-1", "dataset-1_dash_normal_001.bvh"),   # 6 channels everywhere
    ("games105", "run_forward.bvh"),                                  # XYZ order, metres
    ("cmu", "xia_styles", "angry_13_000.bvh"),
]

TOKENS = [b"{", b"}", b"ROOT", b"JOINT", b"End Site", b"OFFSET", b"CHANNELS", b"MOTION", b"Frames:",
          b"Frame Time:", b"HIERARCHY", b"Xrotation", b"Yposition", b"0", b"3", b"6", b"7", b"-1",
          b"nan", b"inf", b"1e999", b"-1e31", b"99999999999999999999", b"\n", b"\r", b"\t", b" ",
          b"\x00", b"\xff\xfe", b"1_0", b"0x1F", b"\xc3\xa9", b"Hips", b"\n\n\n"]


def _valid_prefix(raw: bytes, size: int = 40_000) -> bytes:
    """The file cut to about ``size`` bytes, with "Frames:" set to the lines kept."""
    head, _, body = raw.partition(b"MOTION")
    lines = body.split(b"\n")
    data, total = [], len(head)
    for ln in lines[3:]:
        if not ln.strip():
            continue
        if data and total + len(ln) > size:
            break
        data.append(ln)
        total += len(ln) + 1
    return head + b"MOTION\nFrames: %d\n" % len(data) + lines[2] + b"\n" + b"\n".join(data) + b"\n"


def _load_sources():
    from kinema.data import shared_root
    root = shared_root()
    if root is None:
        return []
    return [_valid_prefix(root.joinpath(*parts).read_bytes()) for parts in SOURCES
            if root.joinpath(*parts).exists()]


RAW = _load_sources()


def _motion_split(raw: bytes) -> int:
    i = raw.find(b"MOTION")
    return i if i > 0 else len(raw) // 2


@st.composite
def mutated(draw):
    raw = bytearray(RAW[draw(st.integers(0, len(RAW) - 1))])
    rnd = draw(st.randoms(use_true_random=True))      # uniform positions, not edge-biased
    for _ in range(draw(st.integers(1, 4))):
        split = _motion_split(bytes(raw))
        in_header = draw(st.booleans())
        lo, hi = (0, max(split, 1)) if in_header else (min(split, len(raw)), max(len(raw), 1))
        pos = rnd.randrange(lo, max(lo + 1, hi))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "byte", "duplicate", "swap",
                                     "delete", "insert", "replace", "byte", "truncate"]))
        span = rnd.randint(1, 40)
        if kind == "delete":
            del raw[pos:pos + span]
        elif kind == "insert":
            raw[pos:pos] = draw(st.sampled_from(TOKENS)) + b" "
        elif kind == "replace":
            raw[pos:pos + span] = draw(st.sampled_from(TOKENS))
        elif kind == "byte" and pos < len(raw):
            raw[pos] = draw(st.integers(0, 255))
        elif kind == "duplicate":
            raw[pos:pos] = raw[pos:pos + span * 10]
        elif kind == "truncate":
            del raw[pos:]
        elif kind == "swap":
            lines = bytes(raw).split(b"\n")
            if len(lines) > 2:
                i = draw(st.integers(0, len(lines) - 2))
                lines[i], lines[i + 1] = lines[i + 1], lines[i]
                raw = bytearray(b"\n".join(lines))
    return bytes(raw)


@pytest.mark.skipif(not RAW, reason="real data folder ../shared/data not found (set KINEMA_DATA)")
@settings(max_examples=250, deadline=2000, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_real_files_raise_only_kinema_errors(data):
    try:
        m = bvh.to_motion(parse(data, "fuzz.bvh"))
    except FormatError as exc:
        assert exc.path == "fuzz.bvh"
        assert exc.line is not None and exc.line >= 1
        return
    except KinemaError:
        return
    # accepted: then it is a well-formed motion
    assert m.num_frames >= 1 and m.num_joints >= 1
    assert np.isfinite(m.rotations).all() and np.isfinite(m.positions).all()
    np.testing.assert_allclose(np.linalg.norm(m.rotations, axis=-1), 1.0, atol=1e-5)


@pytest.mark.skipif(not RAW, reason="real data folder ../shared/data not found (set KINEMA_DATA)")
def test_unmutated_sources_parse():
    assert len(RAW) == len(SOURCES)
    for raw in RAW:
        m = bvh.to_motion(parse(raw, "ok.bvh"))
        assert m.num_frames >= 2
