import numpy as np
import pytest

from kinema.errors import SkeletonError
from kinema.motion import Skeleton


def chain_skeleton(names, parents):
    return Skeleton(names, parents, np.zeros((len(names), 3)))


def test_parent_after_child_is_rejected():
    with pytest.raises(SkeletonError, match="parent"):
        chain_skeleton(["a", "b"], [1, -1])


def test_duplicate_names_are_rejected():
    with pytest.raises(SkeletonError, match="duplicate"):
        chain_skeleton(["a", "a"], [-1, 0])


def test_shape_mismatch_is_rejected():
    with pytest.raises(SkeletonError):
        Skeleton(["a", "b"], [-1, 0], np.zeros((3, 3)))


@pytest.mark.parametrize("names,parents,pairs", [
    # LaFAN1 style
    (["Hips", "LeftUpLeg", "LeftLeg", "RightUpLeg", "RightLeg", "Spine"], [-1, 0, 1, 0, 3, 0],
     {"LeftUpLeg": "RightUpLeg", "LeftLeg": "RightLeg"}),
    # CMU style single letters
    (["Hips", "LHipJoint", "LeftUpLeg", "RHipJoint", "RightUpLeg", "LowerBack"], [-1, 0, 1, 0, 3, 0],
     {"LHipJoint": "RHipJoint", "LeftUpLeg": "RightUpLeg"}),
    # GAMES-105 style lowercase prefix; 'lowerback' is not a side
    (["RootJoint", "lHip", "lKnee", "rHip", "rKnee", "pelvis_lowerback"], [-1, 0, 1, 0, 3, 0],
     {"lHip": "rHip", "lKnee": "rKnee"}),
    # Bandai style suffix
    (["joint_Root", "Hips", "UpperLeg_L", "Foot_L", "UpperLeg_R", "Foot_R"], [-1, 0, 1, 2, 1, 4],
     {"UpperLeg_L": "UpperLeg_R", "Foot_L": "Foot_R"}),
])
def test_mirror_map_from_names(names, parents, pairs):
    sk = chain_skeleton(names, parents)
    m = sk.mirror_map()
    expected = np.arange(len(names))
    for a, b in pairs.items():
        expected[names.index(a)] = names.index(b)
        expected[names.index(b)] = names.index(a)
    np.testing.assert_array_equal(m, expected)


def test_mirror_map_overrides_and_hierarchy_check():
    sk = chain_skeleton(["root", "wing_a", "wing_b"], [-1, 0, 0])
    m = sk.mirror_map({"wing_a": "wing_b"})
    np.testing.assert_array_equal(m, [0, 2, 1])
    bad = chain_skeleton(["root", "LeftArm", "RightArm"], [-1, 0, 1])
    with pytest.raises(SkeletonError, match="hierarchy"):
        bad.mirror_map()


def test_index_names_missing_joint():
    sk = chain_skeleton(["a", "b"], [-1, 0])
    assert sk.index("b") == 1
    with pytest.raises(KeyError, match="no joint 'c'"):
        sk.index("c")


def test_ancestors_walk_up_to_the_root_and_agree_with_the_depths(shared_data):
    from kinema.io import load

    sk = load(shared_data / "bandai_namco" / "dataset-1" / "dataset-1_walk_normal_001.bvh").skeleton
    assert [sk.names[j] for j in sk.ancestors(sk.index("Hips"))] == ["joint_Root"]
    assert sk.ancestors(0) == []
    toe = sk.index("Toes_L")
    chain = sk.ancestors(toe)
    assert chain[0] == sk.parents[toe] and chain[-1] == 0
    assert all(sk.parents[a] == b for a, b in zip(chain, chain[1:]))
    np.testing.assert_array_equal([len(sk.ancestors(j)) for j in range(sk.num_joints)], sk.depths())
