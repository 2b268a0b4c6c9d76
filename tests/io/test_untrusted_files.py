"""Hostile or damaged motion files: every failure is a KinemaError naming the file, sizes
are checked against kinema.limits before allocating, and nothing that loads is silently
wrong (zero frames, non-finite after float32, zero-length quaternions, absurd fps or
coordinates)."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

import kinema
from kinema.cli.info import describe
from kinema.errors import EulerOrderError, FormatError, KinemaError, LimitError, MissingFileError, RenderError
from kinema.io import bvh, gltf, npz
from kinema.limits import DEFAULT, Limits
from kinema.motion import Motion, Skeleton

BVH = """HIERARCHY
ROOT Hips
{{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Spine
  {{
    OFFSET 0 10 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {{
      OFFSET 0 10 0
    }}
  }}
}}
MOTION
Frames: {frames}
Frame Time: {frame_time}
{rows}"""


def _bvh(tmp_path, frames=3, frame_time="0.0333333", name="m.bvh"):
    rows = "\n".join(f"0 {90 + i} 0 {i} 0 0 0 {2 * i} 0" for i in range(frames))
    p = tmp_path / name
    p.write_text(BVH.format(frames=frames, frame_time=frame_time, rows=rows) + "\n")
    return p


def _motion(frames=4, joints=3) -> Motion:
    sk = Skeleton([f"j{i}" for i in range(joints)], [-1] + list(range(joints - 1)),
                  np.tile([[0, 0.1, 0]], (joints, 1)))
    return Motion.rest(sk, 30.0, frames, name="rest")


def _write_npz(path, arrays: dict, compress: bool = False):
    (np.savez_compressed if compress else np.savez)(path, **arrays)
    return path


def _kinema_arrays(m: Motion) -> dict:
    return {"format": np.asarray("kinema.motion"), "format_version": np.asarray(1, np.int64),
            "name": np.asarray("x"), "fps": np.asarray(m.fps, np.float64),
            "joint_names": np.asarray(m.joint_names), "parents": np.asarray(m.parents, np.int64),
            "offsets": m.skeleton.offsets.astype(np.float32), "rotations": m.rotations.copy(),
            "positions": m.positions.copy(), "metadata": np.asarray("{}")}


# ----------------------------------------------------------------------------- BVH
@pytest.mark.parametrize("frame_time", ["1e-320", "1e-300", "0.00001", "100"])
def test_bvh_frame_time_out_of_range(tmp_path, frame_time):
    p = _bvh(tmp_path, frame_time=frame_time)
    with pytest.raises(FormatError, match=r"m\.bvh:\d+: Frame Time .* frames per second, outside 1\.\.10000") as e:
        bvh.load(p)
    assert e.value.line == 18                     # the Frame Time line


def test_bvh_frames_times_joints_is_limited_before_reading(tmp_path):
    p = _bvh(tmp_path, frames=20)
    assert bvh.load(p).num_frames == 20
    with pytest.raises(LimitError, match=r"20 frames declared, over 10 .*Limits\.max_frames") as e:
        bvh.load(p, limits=Limits(max_frames=10))
    assert e.value.limit == "max_frames" and str(p) in str(e.value)
    with pytest.raises(LimitError, match="max_motion_values"):
        bvh.load(p, limits=Limits(max_motion_values=100))


def test_bvh_scale_overflowing_float32_is_refused(tmp_path):
    p = _bvh(tmp_path)
    with pytest.raises(FormatError, match=r"m\.bvh: (offsets|positions): .*max_abs_position"):
        bvh.load(p, scale=1e37)


def test_missing_file_is_a_kinema_error_and_file_not_found(tmp_path):
    for fn in (kinema.load, bvh.load, npz.load):
        with pytest.raises(MissingFileError) as e:
            fn(tmp_path / "nothing.bvh")
        assert isinstance(e.value, KinemaError) and isinstance(e.value, FileNotFoundError)
        assert "nothing.bvh" in str(e.value)


# ----------------------------------------------------------------------------- npz
def test_npz_deeply_nested_metadata(tmp_path):
    arrays = _kinema_arrays(_motion())
    arrays["metadata"] = np.asarray("[" * 100_000 + "]" * 100_000)
    p = _write_npz(tmp_path / "deep.npz", arrays)
    with pytest.raises(FormatError, match=r"deep\.npz: metadata: JSON nested too deeply"):
        npz.load(p)
    arrays["metadata"] = np.asarray(json.dumps({"a": [[[[[[1]]]]]]}))
    _write_npz(p, arrays)
    with pytest.raises(FormatError, match="nested 7 levels deep, over the limit of 5"):
        npz.load(p, limits=Limits(max_json_depth=5))


def _npz_with_header(path, shape: tuple) -> None:
    """An npz whose 'rotations' member declares ``shape`` but holds only 16 bytes."""
    arrays = _kinema_arrays(_motion())
    _write_npz(path, arrays)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["rotations.npy"] = header.getvalue() + b"\0" * 16
    with zipfile.ZipFile(path, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)


def test_npz_huge_array_header_is_refused_without_allocating(tmp_path):
    p = tmp_path / "header.npz"
    _npz_with_header(p, (10 ** 12, 3, 4))
    with pytest.raises(FormatError, match=r"header\.npz: npz member 'rotations\.npy': header declares shape "
                                          r"\(1000000000000, 3, 4\) .* but the member holds"):
        npz.load(p)


def test_npz_zip_bomb_is_refused_from_the_directory(tmp_path):
    m = _motion(frames=200_000, joints=3)                  # 9.6 MB of rotations, compresses ~1000x
    p = _write_npz(tmp_path / "bomb.npz", _kinema_arrays(m), compress=True)
    assert p.stat().st_size < 200_000
    small = Limits(ratio_free_bytes=1 << 20)
    with pytest.raises(LimitError, match=r"bomb\.npz: npz members inflate to \d+ bytes, \d+x the \d+-byte file "
                                         r"\(a zip bomb\?\), over 20x .*max_compression_ratio"):
        npz.load(p, limits=small)
    with pytest.raises(LimitError, match="max_array_bytes"):
        npz.load(p, limits=Limits(max_array_bytes=1 << 20))
    with pytest.raises(LimitError, match="max_total_bytes"):
        npz.load(p, limits=Limits(max_total_bytes=1 << 20))
    assert npz.load(p).num_frames == 200_000               # the defaults allow it


def test_npz_damaged_member_gives_format_error_in_load_and_info(tmp_path, capsys):
    from kinema.cli.main import main

    p = npz_path = tmp_path / "damaged.npz"
    npz.save(_motion(), npz_path)
    raw = bytearray(p.read_bytes())
    with zipfile.ZipFile(p) as z:
        info = z.getinfo("format_version.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 2, start + info.compress_size - 2):
        raw[i] ^= 0x5A
    p.write_bytes(bytes(raw))
    for fn in (npz.load, npz.info, describe):
        with pytest.raises(FormatError, match="damaged.npz"):
            fn(p)
    assert main(["info", str(p)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kinema info: error: ") and "damaged.npz" in err
    assert main(["--debug", "info", str(p)]) == 1
    assert "Traceback" in capsys.readouterr().err
    assert main(["info", str(p), "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_npz_values_beyond_float32_are_refused(tmp_path):
    m = _motion()
    ai = {"positions": np.full((4, 3, 3), 5e38), "quaternions": np.tile([0.0, 0, 0, 1], (4, 3, 1)),
          "bone_names": np.asarray(m.joint_names), "parent_indices": np.asarray(m.parents),
          "framerate": np.asarray(60.0)}
    p = _write_npz(tmp_path / "ai.npz", ai)
    with pytest.raises(FormatError, match=r"ai\.npz: positions: .* beyond float32 range"):
        npz.load(p)
    ai["positions"] = np.zeros((4, 3, 3))
    _write_npz(p, ai)
    assert np.isfinite(npz.load(p).positions).all()


def test_npz_zero_frames_zero_quaternions_and_fps(tmp_path):
    p = tmp_path / "m.npz"
    arrays = _kinema_arrays(_motion())
    empty = dict(arrays, rotations=np.zeros((0, 3, 4), np.float32), positions=np.zeros((0, 3, 3), np.float32))
    _write_npz(p, empty)
    with pytest.raises(FormatError, match=r"m\.npz: the motion has no frames"):
        npz.load(p)
    zero = dict(arrays, rotations=arrays["rotations"].copy())
    zero["rotations"][1, 2] = 0.0
    _write_npz(p, zero)
    with pytest.raises(FormatError, match="quaternion norm 0 is not unit"):
        npz.load(p)
    huge = dict(arrays, rotations=np.full_like(arrays["rotations"], 1e38))
    _write_npz(p, huge)
    with pytest.raises(FormatError, match="not unit"):
        npz.load(p)
    near = dict(arrays, rotations=arrays["rotations"] * 1.01)
    _write_npz(p, near)
    np.testing.assert_allclose(np.linalg.norm(npz.load(p).rotations, axis=-1), 1.0, atol=1e-6)
    for fps in (1e300, 0.001, float("nan")):
        _write_npz(p, dict(arrays, fps=np.asarray(fps)))
        with pytest.raises(FormatError, match="fps .* outside 1..10000"):
            npz.load(p)


# ----------------------------------------------------------------------------- glTF
def test_gltf_flt_max_translation_is_refused(tmp_path, sample_data):
    from tests.io.test_gltf_fuzz import _join, _split

    doc, blob = _split((sample_data / "fox" / "fox.glb").read_bytes())
    joint = doc["skins"][0]["joints"][3]
    doc["nodes"][joint]["translation"] = [3.4e38, 0.0, 0.0]
    p = tmp_path / "far.glb"
    p.write_bytes(_join(doc, blob))
    with pytest.raises(FormatError, match=r"far\.glb: .*(not finite|max_abs_position)"):
        gltf.load(p)
    with pytest.raises(FormatError, match=r"far\.glb: .*(not finite|max_abs_position)"):
        gltf.load_character(p, textures=False)
    doc["nodes"][joint]["translation"] = [5e6, 0.0, 0.0]          # finite, but 5000 km
    p.write_bytes(_join(doc, blob))
    with pytest.raises(LimitError, match=r"far\.glb: .*a coordinate of 5e\+06 m .*max_abs_position"):
        gltf.load(p)


# ----------------------------------------------------------------------------- errors
def test_every_custom_error_lives_in_errors_and_is_a_kinema_error():
    from kinema.maths import quat

    assert quat.EulerOrderError is EulerOrderError and issubclass(EulerOrderError, KinemaError)
    assert issubclass(RenderError, KinemaError) and issubclass(RenderError, RuntimeError)
    assert issubclass(LimitError, FormatError)
    with pytest.raises(EulerOrderError):
        quat.from_euler(np.zeros(3), "xxy")
    assert DEFAULT.min_fps == 1.0 and DEFAULT.max_fps == 10_000.0
    with pytest.raises(AttributeError):
        DEFAULT.max_frames = 1                        # frozen: no global mutable state


def test_npz_garbled_array_header_dict(tmp_path):
    """numpy's .npy header parser raises tokenize.TokenError on an unbalanced dict (found
    by benchmarks/fuzz.py): a FormatError here."""
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, "
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    p = tmp_path / "garbled.npz"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("rotations.npy", b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 12)
    with pytest.raises(FormatError, match=r"garbled\.npz: not a readable npz file \(TokenError"):
        npz.load(p)
