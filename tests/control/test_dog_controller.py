"""The dog's controller on the real MANN takes: transitions are inertialized (no pop in the
shown pose) and every one lands in the commanded gait's search mask."""
from __future__ import annotations

import numpy as np
import pytest

from kinema.control.quadruped import DogController
from kinema.errors import KinemaError
from kinema.matching import quadruped as q

# (first frame, gait, heading degrees): every gait in turn, each toward a new heading
COMMANDS = [(0, "walk", 0.0), (60, "trot", 90.0), (120, "canter", -90.0), (180, "pace", 135.0), (240, "walk", 45.0)]


def _run(db, halflife: float, frames: int = 300) -> tuple[np.ndarray, np.ndarray, list[tuple[int, str]]]:
    """Hips-relative joint positions (F, J, 3) shown, playing rows (F,) and (row, gait) of
    each transition, paws unlocked (leg IK would hide what inertialization does)."""
    c = DogController(db, foot_lock=False, halflife=halflife)
    shown, rows, landed = [], [], []
    for f in range(frames):
        gait, heading = [(g, h) for first, g, h in COMMANDS if f >= first][-1]
        before = c.index
        _, pos = c.step(np.array([np.sin(np.radians(heading)), np.cos(np.radians(heading))]), gait)
        shown.append(pos - pos[:1])
        rows.append(c.index)
        if c.index != before + 1:
            landed.append((c.index - 1, gait))       # the row the search jumped to
    return np.array(shown), np.array(rows), landed


def _pop(shown: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Largest joint move (m) from the previous frame, on frames right after a transition
    and on every other frame."""
    change = np.abs(np.diff(shown, axis=0)).max((1, 2))           # (F - 1,) for frames 1..F-1
    jumped = np.diff(rows) != 1
    return change[jumped], change[~jumped]


def test_transitions_do_not_pop(dog_database):
    at, other = _pop(*_run(dog_database, 0.12)[:2])
    assert len(at) >= 8                                          # gait changes and searches transition
    # inertialized: across a transition the shown pose moves no more than in ordinary playback
    assert at.max() <= np.percentile(other, 99), (at.max(), np.percentile(other, 99))
    # the measure sees a pop: with the offsets gone at once the same run jumps
    snap_at, snap_other = _pop(*_run(dog_database, 1e-6)[:2])
    assert snap_at.max() > 2 * np.percentile(snap_other, 99)


def test_transitions_land_in_the_commanded_gaits_mask(dog_database):
    db = dog_database
    _, _, landed = _run(db, 0.12)
    assert {g for _, g in landed} == set(q.GAITS)
    for row, gait in landed:
        assert db.search_mask(gait)[row] and db.gait[row] == q.GAITS.index(gait)
    mask = db.search_mask("trot", mirrored=True, min_remaining=24)
    assert mask.any() and not (mask & ~db.mirrored).any() and (db.remaining[mask] >= 24).all()
    assert not (mask & (db.gait != q.GAITS.index("trot"))).any() and not (mask & ~db.valid).any()
    with pytest.raises(KinemaError, match="unknown gait"):
        db.search_mask("gallop")
