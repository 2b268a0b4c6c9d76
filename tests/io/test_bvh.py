"""BVH import/export: channel orders and layouts against a scipy FK oracle, End Sites,
scale, export round trips, and errors that name the file and line."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kinema
from kinema.errors import FormatError
from kinema.io import bvh
from kinema.io.bvh_parse import parse
from kinema.maths import quat
from kinema.motion import Motion, Skeleton

ORDERS = ["xyz", "xzy", "yxz", "yzx", "zxy", "zyx"]


def rot_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Geodesic angle between rotations a and b (sign-insensitive), float64."""
    r = quat.mul(quat.inv(np.asarray(a, np.float64)), np.asarray(b, np.float64))
    return 2 * np.arctan2(np.linalg.norm(r[..., 1:], axis=-1), np.abs(r[..., 0]))


def make_bvh(joints, frames: np.ndarray, frame_time=1 / 30, end_site_for=()) -> str:
    """BVH text from joints [(name, parent, offset, channels)] (depth-first) and values."""
    lines = ["HIERARCHY"]
    depth = {}
    open_ = []
    for j, (name, parent, off, chans) in enumerate(joints):
        while open_ and open_[-1] != parent:
            k = open_.pop()
            if joints[k][0] in end_site_for:
                lines += ["  " * (depth[k] + 1) + "End Site", "  " * (depth[k] + 1) + "{",
                          "  " * (depth[k] + 2) + "OFFSET 1 2 3", "  " * (depth[k] + 1) + "}"]
            lines.append("  " * depth[k] + "}")
        depth[j] = 0 if parent < 0 else depth[parent] + 1
        ind = "  " * depth[j]
        lines += [f"{ind}{'ROOT' if parent < 0 else 'JOINT'} {name}", ind + "{",
                  f"{ind}  OFFSET {off[0]} {off[1]} {off[2]}",
                  f"{ind}  CHANNELS {len(chans)} {' '.join(chans)}"]
        open_.append(j)
    while open_:
        k = open_.pop()
        if joints[k][0] in end_site_for:
            lines += ["  " * (depth[k] + 1) + "End Site", "  " * (depth[k] + 1) + "{",
                      "  " * (depth[k] + 2) + "OFFSET 1 2 3", "  " * (depth[k] + 1) + "}"]
        lines.append("  " * depth[k] + "}")
    lines += ["MOTION", f"Frames: {len(frames)}", f"Frame Time: {frame_time}"]
    lines += [" ".join(f"{float(v):.10g}" for v in row) for row in frames]
    return "\n".join(lines) + "\n"


def scipy_fk(joints, frames: np.ndarray, scale: float):
    """Independent FK oracle: world positions (F, J, 3) from Euler channels via scipy."""
    f = len(frames)
    world_r = []
    world_p = []
    col = 0
    for _name, parent, off, chans in joints:
        vals = frames[:, col:col + len(chans)]
        col += len(chans)
        p = np.tile(np.asarray(off, float), (f, 1))
        for i, c in enumerate(chans):
            if c.endswith("position"):
                p[:, "XYZ".index(c[0])] = vals[:, i]
        rot_ch = [(c[0], vals[:, i]) for i, c in enumerate(chans) if c.endswith("rotation")]
        if rot_ch:
            r = Rotation.from_euler("".join(a for a, _ in rot_ch), np.stack([v for _, v in rot_ch], 1),
                                    degrees=True)
        else:
            r = Rotation.identity(f)
        p = p * scale
        if parent < 0:
            world_r.append(r)
            world_p.append(p)
        else:
            world_p.append(world_p[parent] + world_r[parent].apply(p))
            world_r.append(world_r[parent] * r)
    return np.stack(world_p, 1), np.stack([r.as_quat(scalar_first=True) for r in world_r], 1)


def random_skeleton(rng, orders=ORDERS, six_everywhere=False):
    joints = [("Root", -1, [1.0, 2.0, 3.0], ["Xposition", "Yposition", "Zposition"]
               + [f"{a.upper()}rotation" for a in orders[0]])]
    for k in range(1, 9):
        parent = int(rng.integers(0, k))
        order = orders[k % len(orders)]
        rot = [f"{a.upper()}rotation" for a in order]
        if six_everywhere or k % 4 == 0:
            pos = ["Zposition", "Xposition", "Yposition"]
            chans = pos + rot if k % 2 == 0 else rot + pos
        else:
            chans = rot
        joints.append((f"J{k}", parent, rng.normal(size=3).round(3).tolist(), chans))
    # depth-first order as BVH requires: sort by the path from the root
    def path(j):
        out = []
        while j >= 0:
            out.append(j)
            j = joints[j][1]
        return out[::-1]
    order_idx = sorted(range(len(joints)), key=path)
    remap = {old: new for new, old in enumerate(order_idx)}
    return [(joints[o][0], remap[joints[o][1]] if joints[o][1] >= 0 else -1, joints[o][2], joints[o][3])
            for o in order_idx]


@pytest.mark.parametrize("seed", range(4))
def test_any_channel_order_matches_scipy_fk(seed):
    rng = np.random.default_rng(seed)
    joints = random_skeleton(rng, orders=ORDERS[seed:] + ORDERS[:seed], six_everywhere=seed == 3)
    ncols = sum(len(j[3]) for j in joints)
    frames = rng.uniform(-180, 180, size=(7, ncols))
    m = bvh.to_motion(parse(make_bvh(joints, frames).encode(), "synthetic.bvh"), scale=0.01)
    want_p, want_q = scipy_fk(joints, frames, 0.01)
    np.testing.assert_allclose(m.global_positions(), want_p, atol=2e-6)
    assert rot_angle(m.global_rotations(), want_q).max() < 2e-6
    assert m.joint_names == [j[0] for j in joints]
    assert m.parents.tolist() == [j[1] for j in joints]


def test_partial_channels_and_zero_channels():
    joints = [("R", -1, [0, 0, 0], ["Yposition", "Zrotation"]),
              ("A", 0, [1, 0, 0], []),
              ("B", 1, [0, 1, 0], ["Xrotation", "Yrotation"])]
    frames = np.array([[5.0, 90.0, 30.0, -40.0], [6.0, 45.0, 0.0, 10.0]])
    m = bvh.to_motion(parse(make_bvh(joints, frames).encode()), scale=1.0)
    want_p, want_q = scipy_fk(joints, frames, 1.0)
    np.testing.assert_allclose(m.global_positions(), want_p, atol=1e-5)
    assert rot_angle(m.global_rotations(), want_q).max() < 1e-6
    # root: X and Z keep the OFFSET, Y comes from the channel
    np.testing.assert_allclose(m.positions[:, 0], [[0, 5, 0], [0, 6, 0]])


def test_scale_fps_and_metadata():
    joints = [("Hips", -1, [0, 90, 0], bvh.DEFAULT_ROOT_CHANNELS), ("Leg", 0, [10, -40, 0], bvh.DEFAULT_CHANNELS)]
    frames = np.array([[1, 2, 3, 10, 20, 30, 40, 50, 60]], float)
    text = make_bvh(joints, frames, frame_time="0.0333333")
    cm = bvh.to_motion(parse(text.encode()))
    m = bvh.to_motion(parse(text.encode()), scale=1.0)
    np.testing.assert_allclose(cm.positions, m.positions * 0.01, rtol=1e-6)
    np.testing.assert_allclose(cm.skeleton.offsets, [[0, 0.9, 0], [0.1, -0.4, 0]], atol=1e-7)
    assert cm.fps == 30.0                       # 1 / 0.0333333 snapped
    assert cm.metadata["bvh"]["frame_time"] == pytest.approx(0.0333333)
    assert cm.metadata["bvh"]["channels"]["Leg"] == bvh.DEFAULT_CHANNELS
    odd = bvh.to_motion(parse(make_bvh(joints, frames, frame_time=0.04123).encode()))
    assert odd.fps == pytest.approx(1 / 0.04123)


def test_end_sites_kept_or_dropped(sample_data):
    path = sample_data / "cmu" / "02_01.bvh"
    dropped = bvh.load(path)
    kept = bvh.load(path, end_sites=True)
    sites = kept.metadata["bvh"]["site_joints"]
    assert len(sites) == len(dropped.metadata["bvh"]["end_sites"]) > 0
    assert set(kept.joint_names) - set(dropped.joint_names) == set(sites)
    # the joints they share have identical world motion
    idx = [kept.joint_names.index(n) for n in dropped.joint_names]
    np.testing.assert_allclose(kept.global_positions()[:, idx], dropped.global_positions(), atol=1e-6)
    # each site sits at its parent's world position plus the rotated End Site offset
    gp, gq = kept.global_positions(), kept.global_rotations()
    for s in sites:
        j = kept.joint_names.index(s)
        p = kept.parents[j]
        assert s == kept.joint_names[p] + "Site"
        np.testing.assert_allclose(gp[:, j], gp[:, p] + quat.rotate(gq[:, p], kept.skeleton.offsets[j]), atol=1e-6)


def test_real_file_round_trip_reproduces_layout(sample_data, tmp_path):
    for f in sorted((sample_data).rglob("*.bvh")):
        m = kinema.load(f)
        out = tmp_path / f.name
        kinema.save(m, out)
        m2 = kinema.load(out)
        assert m2.joint_names == m.joint_names
        assert m2.metadata["bvh"]["channels"] == m.metadata["bvh"]["channels"]
        assert len(m2.metadata["bvh"]["end_sites"]) == len(m.metadata["bvh"]["end_sites"])
        np.testing.assert_allclose(m2.positions, m.positions, atol=1e-5)
        assert rot_angle(m2.rotations, m.rotations).max() < 1e-5
        assert m2.fps == pytest.approx(m.fps, rel=1e-6)
        # End Site offsets survive too
        for (n1, o1), (n2, o2) in zip(m.metadata["bvh"]["end_sites"], m2.metadata["bvh"]["end_sites"]):
            assert n1 == n2 and np.allclose(o1, o2, atol=1e-6)


def test_round_trip_with_sites_kept(sample_data, tmp_path):
    m = bvh.load(sample_data / "cmu" / "02_01.bvh", end_sites=True)
    bvh.save(m, tmp_path / "x.bvh")
    m2 = bvh.load(tmp_path / "x.bvh", end_sites=True)
    assert m2.joint_names == m.joint_names
    np.testing.assert_allclose(m2.global_positions(), m.global_positions(), atol=1e-5)
    assert "JOINT LeftToeBaseSite" not in (tmp_path / "x.bvh").read_text()


def test_export_of_a_motion_from_elsewhere_uses_zyx_and_keeps_translations(tmp_path):
    rng = np.random.default_rng(0)
    sk = Skeleton(["root", "a", "b", "c"], [-1, 0, 1, 0], rng.normal(size=(4, 3)))
    f = 20
    rot = quat.normalize(rng.normal(size=(f, 4, 4)))
    pos = np.broadcast_to(sk.offsets, (f, 4, 3)).copy()
    pos[:, 0] += rng.normal(size=(f, 3))
    pos[:, 2] += rng.normal(size=(f, 3)) * 0.1        # a translated non-root joint
    m = Motion(sk, 24.0, rot, pos, name="synthetic")
    kinema.save(m, tmp_path / "s.bvh")
    text = (tmp_path / "s.bvh").read_text()
    assert "CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation" in text
    assert "JOINT a\n\t{\n\t\tOFFSET" in text and text.count("CHANNELS 3 Zrotation Yrotation Xrotation") == 2
    m2 = kinema.load(tmp_path / "s.bvh")
    # depth-first order of the file: root, a, b, c
    assert m2.joint_names == ["root", "a", "b", "c"]
    np.testing.assert_allclose(m2.positions, m.positions, atol=1e-5)
    assert rot_angle(m2.rotations, m.rotations).max() < 1e-5
    assert m2.fps == pytest.approx(24.0)


def test_crlf_tabs_and_blank_lines():
    joints = [("R", -1, [0, 0, 0], bvh.DEFAULT_ROOT_CHANNELS), ("A", 0, [1, 0, 0], bvh.DEFAULT_CHANNELS)]
    frames = np.arange(18, dtype=float).reshape(2, 9)
    text = make_bvh(joints, frames).replace(" ", "\t").replace("\n", "\r\n")
    text = text.replace("Frame\tTime", "Frame Time") + "\r\n\r\n"
    m = bvh.to_motion(parse(text.encode()), scale=1.0)
    np.testing.assert_allclose(m.positions[:, 0], frames[:, :3])


def test_byte_order_mark_and_keyword_case():
    joints = [("R", -1, [0, 0, 0], bvh.DEFAULT_ROOT_CHANNELS), ("A", 0, [1, 0, 0], bvh.DEFAULT_CHANNELS)]
    frames = np.arange(18, dtype=float).reshape(2, 9)
    text = make_bvh(joints, frames)
    text = text.replace("HIERARCHY", "hierarchy").replace("ROOT", "Root").replace("MOTION", "Motion")
    m = bvh.to_motion(parse(b"\xef\xbb\xbf" + text.encode()), scale=1.0)
    np.testing.assert_allclose(m.positions[:, 0], frames[:, :3])


# ----------------------------------------------------------------------------- errors

GOOD = make_bvh([("R", -1, [0, 0, 0], bvh.DEFAULT_ROOT_CHANNELS), ("A", 0, [1, 0, 0], bvh.DEFAULT_CHANNELS)],
                np.arange(27, dtype=float).reshape(3, 9), frame_time="0.0333333333")


def line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


@pytest.mark.parametrize("mutate, line_needle, message", [
    (lambda t: t.replace("\nMOTION", "\nNOTION"), None, "MOTION"),
    (lambda t: t.replace("HIERARCHY", "HIERARCH"), "HIERARCH", "HIERARCHY"),
    (lambda t: t.replace("9 10 11 12 13 14 15 16 17", "9 10 11 12 13 14 15 16"), "9 10 11 12", "8 values"),
    (lambda t: t.replace("9 10 11 12 13 14 15 16 17", "9 10 11 12 13 14 15 16 17 18"), "9 10 11 12", "10 values"),
    (lambda t: t.replace("9 10 11 12 13", "9 10 abc 12 13"), "9 10 abc", "non-numeric"),
    (lambda t: t.replace("9 10 11 12 13", "9 10 nan 12 13"), "9 10 nan", "non-finite"),
    (lambda t: t.replace("Frames: 3", "Frames: 4"), None, "truncated"),
    (lambda t: t.replace("Frames: 3", "Frames: 2"), "18 19 20", "more MOTION lines"),
    (lambda t: t.replace("Frames: 3", "Frames: many"), "Frames:", "Frames: N"),
    (lambda t: t.replace("Frame Time: 0.0333333333", "Frame Time: -1"), "Frame Time", "Frame Time"),
    (lambda t: t.replace("JOINT A", "JOINT R"), "JOINT R", "duplicate joint name"),
    (lambda t: t.replace("CHANNELS 3", "CHANNELS 4"), "CHANNELS 4", "channel"),
    (lambda t: t.replace("CHANNELS 3 Zrotation", "CHANNELS 3 Wrotation"), "CHANNELS 3 W", "unknown channel"),
    (lambda t: t.replace("CHANNELS 3 Zrotation Yrotation", "CHANNELS 3 Zrotation Zrotation"), "Zrotation Zrotation",
     "repeated"),
    (lambda t: t.replace("CHANNELS 3", "CHANNELS x"), "CHANNELS x", "channel count"),
    (lambda t: t.replace("OFFSET 1 0", "OFFSET 1 zero"), "OFFSET 1 zero", "number"),
    (lambda t: t[:t.index("MOTION")].rstrip()[:-1] + "\n" + t[t.index("MOTION"):], "MOTION", "missing '}'"),
    (lambda t: t.split("Frames")[0], None, "truncated MOTION header"),
])
def test_bad_input_names_file_and_line(mutate, line_needle, message):
    text = mutate(GOOD)
    assert text != GOOD
    with pytest.raises(FormatError) as err:
        parse(text.encode(), "bad.bvh")
    e = err.value
    assert e.path == "bad.bvh" and e.line is not None
    assert message.lower() in str(e).lower()
    assert str(e).startswith(f"bad.bvh:{e.line}: ")
    if line_needle is not None:
        assert e.line == line_of(text, line_needle), str(e)


def test_truncated_file_at_every_cut_raises_format_error():
    raw = GOOD.encode()
    assert raw.endswith(b" 26\n")
    for cut in range(0, len(raw) - 2):
        with pytest.raises(FormatError) as err:
            parse(raw[:cut], "t.bvh")
        assert err.value.line is not None
    # cutting inside the very last number still leaves 9 values: indistinguishable from
    # a file that ends there, so it parses (to 2 instead of 26)
    assert parse(raw[:-2], "t.bvh").values[-1, -1] == 2


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        kinema.load(tmp_path / "nope.bvh")
    d = tmp_path / "dir.bvh"
    d.mkdir()
    with pytest.raises(FormatError):
        kinema.load(d)
