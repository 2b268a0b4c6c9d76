"""Every BVH in the shared data (all skeleton families) imports, survives a BVH export and
an npz round trip, and keeps its bone lengths constant over time."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kinema
from kinema.data import shared_root
from kinema.io import bvh, npz
from kinema.io.bvh_parse import parse
from kinema.maths import quat


def _families() -> dict[str, list[Path]]:
    root = shared_root()
    out: dict[str, list[Path]] = {}
    if root is None:
        return out
    for f in sorted(root.rglob("*.bvh")):
        parts = f.relative_to(root).parts
        out.setdefault("/".join(parts[:2]) if len(parts) > 2 else parts[0], []).append(f)
    return out


FAMILIES = _families()


def test_all_families_present(shared_data):
    total = sum(len(v) for v in FAMILIES.values())
    assert total >= 450, f"only {total} BVH files under {shared_data}"
    for fam in ("bandai_namco/dataset-1", "bandai_namco/dataset-2", "lafan1", "cmu", "cmu/xia_styles",
                "games105", "quadruped/bvh", "characters/geno"):
        assert fam in FAMILIES, fam


def _check_bone_lengths(m: kinema.motion.Motion, path: Path) -> None:
    """Constant bone lengths (world distance to the parent), for every bone whose local
    translation is not itself animated. Animated translations below the root carry root
    motion (Bandai Namco: ``Hips`` moves relative to ``joint_Root``); at most one per file."""
    lengths = m.bone_lengths()                                       # (F, J) metres
    animated = np.ptp(m.positions, axis=0).max(axis=-1) > 1e-6       # (J,)
    keep = [j for j in range(m.num_joints) if m.parents[j] >= 0 and not animated[j]]
    assert len(keep) >= m.num_joints - 2, f"{path}: {animated.sum()} joints with animated translation"
    spread = np.ptp(lengths[:, keep], axis=0)
    worst = int(np.argmax(spread))
    assert spread.max() < 1e-5, f"{path}: bone {m.joint_names[keep[worst]]} varies by {spread.max():.3g} m"
    # and they equal the skeleton's rest offsets
    np.testing.assert_allclose(lengths[0, keep], np.linalg.norm(m.skeleton.offsets[keep], axis=-1), atol=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_bvh_imports_and_round_trips(shared_data, family, tmp_path):
    files = FAMILIES[family]
    assert files
    for f in files:
        m = kinema.load(f)
        assert m.num_frames > 0 and m.num_joints > 1, f
        assert np.isfinite(m.positions).all() and np.isfinite(m.rotations).all(), f
        np.testing.assert_allclose(np.linalg.norm(m.rotations, axis=-1), 1, atol=1e-5, err_msg=str(f))
        _check_bone_lengths(m, f)

        # BVH export -> import: same motion within 1e-5
        back = bvh.to_motion(parse(bvh.to_text(m).encode(), f"{f} (exported)"), scale=m.metadata["bvh"]["scale"])
        assert back.joint_names == m.joint_names and np.array_equal(back.parents, m.parents), f
        assert np.abs(back.positions - m.positions).max() < 1e-5, f
        assert quat.angle(back.rotations.astype(np.float64), m.rotations.astype(np.float64)).max() < 1e-5, f
        np.testing.assert_allclose(back.skeleton.offsets, m.skeleton.offsets, atol=1e-6, err_msg=str(f))
        assert back.fps == pytest.approx(m.fps, rel=1e-6)

        # npz: exact
        out = tmp_path / (f.stem + ".npz")
        npz.save(m, out, compress=False)
        again = npz.load(out)
        assert np.array_equal(again.rotations, m.rotations) and np.array_equal(again.positions, m.positions), f
        assert again.metadata == m.metadata and again.fps == m.fps and again.joint_names == m.joint_names
        out.unlink()
