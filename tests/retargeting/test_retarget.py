"""Retargeting on real skeletons: bone lengths, feet, root speed, bone directions."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kinema
from kinema.errors import SkeletonError
from kinema.features.contacts import contacts
from kinema.motion import kinematics
from kinema.retargeting import find_roles, fit, retarget

FEET = ("left_foot", "left_toe", "right_foot", "right_toe")


def _leg(skeleton, roles) -> float:
    """Thigh + shin (m) from the rest offsets, averaged over the two legs."""
    return float(np.mean([np.linalg.norm(skeleton.offsets[roles[f"{s}_lower_leg"]])
                          + np.linalg.norm(skeleton.offsets[roles[f"{s}_foot"]]) for s in ("left", "right")]))


def _angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    c = np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    return np.degrees(np.arccos(np.clip(c, -1, 1)))


def _geno(root):
    return kinema.load_character(root / "characters" / "geno" / "geno.glb")


CASES = {
    "games105->geno": (("games105", "walk_forward.bvh"), "geno"),
    "lafan1->geno": (("lafan1", "walk4_subject1.bvh"), "geno"),
    "bandai->lafan1": (("bandai_namco", "dataset-1", "dataset-1_walk_proud_001.bvh"), "lafan1"),
    "cmu->lafan1": (("cmu", "02_01.bvh"), "lafan1"),
}


@pytest.fixture(scope="module")
def lafan1(shared_data):
    return kinema.load(shared_data / "lafan1" / "walk4_subject1.bvh")[:3000]


@pytest.mark.parametrize("case", list(CASES))
def test_retarget_real_pairs(case, shared_data, lafan1):
    rel, target_name = CASES[case]
    source = kinema.load(shared_data.joinpath(*rel))
    if source.num_frames > 3000:
        source = source[:3000]
    target = _geno(shared_data) if target_name == "geno" else lafan1
    out = retarget(source, target)
    t_skel = target.skeleton
    assert out.skeleton.names == t_skel.names and out.fps == source.fps and out.num_frames == source.num_frames
    rs, rt = find_roles(source.skeleton), find_roles(out.skeleton)

    # bone lengths are the target's, exactly, on every frame (the hips carry the root motion)
    keep = (out.parents >= 0) & (np.arange(out.num_joints) != rt["hips"])
    rest = np.linalg.norm(t_skel.offsets, axis=-1)
    np.testing.assert_allclose(out.bone_lengths()[:, keep], np.broadcast_to(rest[keep], (out.num_frames, keep.sum())),
                               atol=1e-5)

    s_pos, t_pos = source.global_positions().astype(np.float64), out.global_positions().astype(np.float64)
    s_leg, t_leg = _leg(source.skeleton, rs), _leg(t_skel, rt)

    # root speed scales by the leg-length ratio (within 10%)
    def path(p):
        return np.linalg.norm(np.diff(p[:, [0, 2]], axis=0), axis=-1).sum()
    ratio = path(t_pos[:, rt["hips"]]) / path(s_pos[:, rs["hips"]])
    assert ratio == pytest.approx(t_leg / s_leg, rel=0.10)

    # where a source foot joint is on its floor (within 2 cm of its lowest height, slow:
    # kinema.features.contacts) the target's stands within 3 cm of the target's foot
    # height, read from the target itself: a character's bind pose, a captured clip's contacts
    s_j = [rs[r] for r in FEET]
    t_j = [rt[r] for r in FEET]
    s = s_leg / 0.8
    y = s_pos[:, s_j, 1]
    planted = contacts(s_pos, source.fps, s_j, height_threshold=np.percentile(y, 2, axis=0) + 0.02,
                       speed_threshold=0.4 * s)
    if target_name == "geno":
        _, bind = kinematics.forward(target.bind_rotations, target.bind_positions, target.skeleton.parents)
        height = bind[t_j, 1]
    else:
        tp = target.global_positions()
        ty = tp[:, t_j, 1]
        tc = contacts(tp, target.fps, t_j, height_threshold=np.percentile(ty, 2, axis=0) + 0.05 * t_leg / 0.8,
                      speed_threshold=0.4 * t_leg / 0.8)
        height = np.array([np.percentile(ty[tc[:, k], k], 10) for k in range(4)])
    assert planted.mean() > 0.1
    err = np.abs(t_pos[:, t_j, 1] - height[None])[planted]
    assert err.max() < 0.03, f"a planted foot {err.max():.3f} m off the floor"

    # matched bones point where the source's do: arms exactly (no IK there), legs nearly
    # (leg IK bends them to plant the feet)
    for a, b, tol in (("left_upper_arm", "left_forearm", 0.5), ("right_forearm", "right_hand", 0.5),
                      ("left_upper_leg", "left_lower_leg", 5.0), ("right_lower_leg", "right_foot", 5.0)):
        d = _angles(s_pos[:, rs[b]] - s_pos[:, rs[a]], t_pos[:, rt[b]] - t_pos[:, rt[a]])
        assert d.mean() < tol, f"{a}->{b} off by {d.mean():.2f} degrees on average"
    # joint angles: the knee and elbow bend as much as the source's
    for top, mid, end, tol in (("left_upper_leg", "left_lower_leg", "left_foot", 5.0),
                               ("right_upper_arm", "right_forearm", "right_hand", 0.5)):
        def bend(p, r, top=top, mid=mid, end=end):
            return _angles(p[:, r[mid]] - p[:, r[top]], p[:, r[end]] - p[:, r[mid]])
        assert np.abs(bend(s_pos, rs) - bend(t_pos, rt)).mean() < tol


def test_same_skeleton_is_reproduced(shared_data, lafan1):
    """Where the rest poses agree (a skeleton onto itself) world rotations come through."""
    clip = lafan1[:600]
    out = retarget(clip, lafan1, feet=False)
    roles = find_roles(clip.skeleton)
    a, b = clip.global_rotations().astype(np.float64), out.global_rotations().astype(np.float64)
    from kinema.maths import quat
    err = np.degrees(quat.angle(a[:, list(roles.values())], b[:, list(roles.values())]))
    assert err.mean() < 1.0 and np.percentile(err, 99) < 3.0
    np.testing.assert_allclose(out.global_positions(), clip.global_positions(), atol=0.02)


def test_sample_walk_on_geno_and_fit(sample_data):
    """Bundled data only (a fresh clone): GAMES-105 onto the bundled Geno."""
    walk = kinema.load(sample_data / "games105" / "walk_forward.bvh")
    geno = kinema.load_character(sample_data / "geno" / "geno.glb")
    fitted = fit(walk, geno)
    direct = kinema.retarget(walk, geno)              # the facade
    np.testing.assert_array_equal(direct.rotations, fitted.rotations)
    assert fitted.skeleton.names == geno.skeleton.names and "retarget" in fitted.metadata
    meta = fitted.metadata["retarget"]
    assert {"hips", "left_foot", "right_hand", "head"} <= set(meta["matched"])
    assert fit(fitted, geno) is fitted          # the character's own skeleton: nothing to do


def test_non_humanoid_is_refused(sample_data):
    fox = kinema.load(sample_data / "fox" / "fox.glb")
    with pytest.raises(SkeletonError, match="left_upper_leg"):
        find_roles(fox.skeleton)


def test_cli_retarget(sample_data, tmp_path):
    out = tmp_path / "walk_geno.bvh"
    res = subprocess.run([sys.executable, "-m", "kinema.cli", "retarget", str(sample_data / "games105" / "walk_forward.bvh"),
                          "--to", str(sample_data / "geno" / "geno.glb"), "-o", str(out)],
                         capture_output=True, text=True, cwd=tmp_path, check=False)
    assert res.returncode == 0, res.stderr
    assert "root scaled by 0.97" in res.stdout
    back = kinema.load(out)
    geno = kinema.load_character(sample_data / "geno" / "geno.glb")
    assert back.skeleton.names == geno.skeleton.names and back.num_frames == 100
    bad = subprocess.run([sys.executable, "-m", "kinema.cli", "retarget", str(sample_data / "fox" / "fox.glb"),
                          "--to", str(sample_data / "geno" / "geno.glb"), "-o", str(tmp_path / "x.npz")],
                         capture_output=True, text=True, cwd=tmp_path, check=False)
    assert bad.returncode == 1 and "not a humanoid" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_view_and_render_clips_retarget_onto_the_character(sample_data):
    """kinema view / render (``Clip.load``) and kinema serve (``ServedClip.load``) skin a
    character of another skeleton through retargeting, not a procedural body."""
    from kinema.render.playback import Clip
    from kinema.serve.clip import ServedClip
    walk, geno = sample_data / "games105" / "walk_forward.bvh", sample_data / "geno" / "geno.glb"
    for clip in (Clip.load(walk, geno), ServedClip.load(walk, geno)):
        assert clip.character is not None
        assert clip.motion.skeleton.names == clip.character.skeleton.names
        assert "retarget" in clip.motion.metadata


def test_retargeter_maps_single_poses_like_the_clip(sample_data):
    """A live character retargets one pose at a time: the same poses as the whole clip
    (feet left as they are), and the average planted foot brought to the target's height."""
    from kinema.retargeting import Retargeter
    walk = kinema.load(sample_data / "games105" / "walk_forward.bvh")
    geno = kinema.load_character(sample_data / "geno" / "geno.glb")
    g_rot, g_pos = walk.global_transforms()
    r = Retargeter(walk.skeleton, geno, (g_rot, g_pos, walk.fps))
    clip = retarget(walk, geno, feet=False)
    rot, pos = r.world(g_rot[37], g_pos[37])
    c_rot, c_pos = clip.global_transforms()
    np.testing.assert_allclose(pos, c_pos[37], atol=1e-4)
    from kinema.maths import quat
    assert np.degrees(quat.angle(rot, c_rot[37].astype(np.float64))).max() < 0.05
    # the floor offset measured on this clip puts another clip's planted feet on the floor
    other = kinema.load(sample_data / "games105" / "walk60.bvh")
    o_rot, o_pos = other.global_transforms()
    lifted = r.world(o_rot, o_pos)[1].copy()
    lifted[..., 1] += r.floor_offset()
    roles = find_roles(walk.skeleton)
    src_j = [roles[k] for k in FEET]
    y = o_pos[:, src_j, 1]
    planted = contacts(o_pos, other.fps, src_j, height_threshold=np.percentile(y, 2, axis=0) + 0.02,
                       speed_threshold=0.4)
    t_j = [find_roles(geno.skeleton)[k] for k in FEET]
    err = (lifted[:, t_j, 1] - r.target_height[None])[planted]
    assert planted.mean() > 0.1 and abs(np.median(err)) < 0.02, np.median(err)
