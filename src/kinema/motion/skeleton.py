"""Skeleton: joint names, parents and rest offsets."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from kinema.errors import SkeletonError

# "Left"/"Right" anywhere, in the three usual cases.
_SIDE_WORDS = [("Left", "Right"), ("left", "right"), ("LEFT", "RIGHT")]
# A single side letter standing as its own token: "LHipJoint", "lHip", "Hand_L", "l_hand",
# "Foot.R". A lowercase letter after it ("lowerback", "RootJoint") means it is a word.
_SIDE_LETTER = re.compile(r"(?:(?<=^)|(?<=[_.:\-\s]))([LRlr])(?=$|[_.:\-\s\dA-Z])")
_SWAP_LETTER = {"L": "R", "R": "L", "l": "r", "r": "l"}


def _side_candidates(name: str) -> list[str]:
    """Names the left/right twin of ``name`` may have, most likely first."""
    out = []
    for a, b in _SIDE_WORDS:
        if a in name or b in name:
            out.append(name.replace(a, "\0").replace(b, a).replace("\0", b))
    for m in _SIDE_LETTER.finditer(name):
        i = m.start(1)
        out.append(name[:i] + _SWAP_LETTER[name[i]] + name[i + 1:])
    return out


@dataclass(eq=False)
class Skeleton:
    """Joint hierarchy in a fixed order.

    Attributes:
        names: J unique joint names.
        parents: (J,) int parent index per joint, -1 for a root; ``parents[j] < j``.
        offsets: (J, 3) float32 rest offset of each joint from its parent, metres
            (for a root: its rest position).
    """

    names: list[str]
    parents: np.ndarray
    offsets: np.ndarray

    def __post_init__(self) -> None:
        self.names = [str(n) for n in self.names]
        self.parents = np.asarray(self.parents, dtype=np.int64).reshape(-1)
        self.offsets = np.asarray(self.offsets, dtype=np.float32).reshape(-1, 3)
        j = len(self.names)
        if self.parents.shape[0] != j or self.offsets.shape[0] != j:
            raise SkeletonError(f"skeleton has {j} names, {self.parents.shape[0]} parents and "
                                f"{self.offsets.shape[0]} offsets")
        if len(set(self.names)) != j:
            dup = sorted({n for n in self.names if self.names.count(n) > 1})
            raise SkeletonError(f"duplicate joint names: {dup}")
        bad = np.nonzero((self.parents >= np.arange(j)) | (self.parents < -1))[0]
        if bad.size:
            raise SkeletonError(f"joint {self.names[bad[0]]!r} has parent index {self.parents[bad[0]]}: "
                                "every parent must come before its child")

    @property
    def num_joints(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Index of joint ``name``; raises KeyError listing the joints when absent."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no joint {name!r}; joints are {self.names}") from None

    def children(self, j: int) -> list[int]:
        """Indices of the direct children of joint ``j``."""
        return [int(c) for c in np.nonzero(self.parents == j)[0]]

    def ancestors(self, j: int) -> list[int]:
        """Indices of joint ``j``'s strict ancestors, its parent first, the root last."""
        out, p = [], int(self.parents[j])
        while p >= 0:
            out.append(p)
            p = int(self.parents[p])
        return out

    def depths(self) -> np.ndarray:
        """(J,) int depth of each joint (roots are 0)."""
        d = np.zeros(self.num_joints, np.int64)
        for j, p in enumerate(self.parents):
            if p >= 0:
                d[j] = d[p] + 1
        return d

    def mirror_map(self, overrides: dict[str, str] | None = None) -> np.ndarray:
        """(J,) index of each joint's left/right twin (itself for centre joints).

        Twins are found from names: Left/Right, and single side letters as a token
        (``LHipJoint``/``RHipJoint``, ``lHip``/``rHip``, ``Hand_L``/``Hand_R``).
        ``overrides`` maps names to their twins (both directions are set).
        """
        index = {n: i for i, n in enumerate(self.names)}
        out = np.arange(self.num_joints)
        for i, name in enumerate(self.names):
            for cand in _side_candidates(name):
                if cand in index and cand != name:
                    out[i] = index[cand]
                    break
        for a, b in (overrides or {}).items():
            ia, ib = self.index(a), self.index(b)
            out[ia], out[ib] = ib, ia
        if not np.array_equal(out[out], np.arange(self.num_joints)):
            raise SkeletonError("mirror map is not a pairing (a joint's twin has another twin)")
        mirrored_parents = np.where(self.parents[out] >= 0, out[self.parents[out]], -1)
        if not np.array_equal(mirrored_parents, self.parents):
            bad = int(np.nonzero(mirrored_parents != self.parents)[0][0])
            raise SkeletonError(f"mirror map does not preserve the hierarchy at joint {self.names[bad]!r}; "
                                "pass overrides")
        return out

    def copy(self) -> Skeleton:
        return Skeleton(list(self.names), self.parents.copy(), self.offsets.copy())

    def same_topology(self, other: Skeleton) -> bool:
        """True when names and parents are equal (offsets may differ)."""
        return self.names == other.names and np.array_equal(self.parents, other.parents)
