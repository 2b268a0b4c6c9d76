"""The dog demo on the real MANN takes: commanded direction and gait show in the motion.

Gait is measured from the output's paw heights (footfall correlations, the same measure
that labels the data) and checked against the pattern that defines each gait, not only the
label."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kinema.control.quadruped import DogController
from kinema.matching import quadruped as q


def _roll(db, gait, heading_deg, frames=200, lock=True):
    c = DogController(db, foot_lock=lock)
    d = np.array([np.sin(np.radians(heading_deg)), np.cos(np.radians(heading_deg))])
    poses, contacts = [], []
    for _ in range(frames):
        poses.append(c.step(d, gait)[1])
        contacts.append(db.contacts[c.index])
    c.contact_history = np.array(contacts)
    return np.array(poses), d, c


@pytest.mark.parametrize("gait,heading", [("walk", 0.0), ("pace", 135.0), ("trot", 90.0), ("canter", -90.0)])
def test_dog_goes_where_commanded_in_the_commanded_gait(dog_database, gait, heading):
    poses, d, _ = _roll(dog_database, gait, heading)
    seg = poses[40:]                                     # after turning from +Z and settling
    travel = (seg[-1, 0] - seg[0, 0])[[0, 2]]
    assert np.linalg.norm(travel) > 0.3 * len(seg) / q.FPS   # it moves (at least 0.3 m/s)
    assert travel @ d / np.linalg.norm(travel) > 0.95         # ... the commanded way
    m = q.measure_gait(seg, dog_database.skeleton)
    assert m["gait"] == gait, m
    if gait == "trot":        # diagonal pairs together, lateral pairs apart
        assert m["diagonal"] > 0.3 and m["lateral"] < 0.0
    if gait == "pace":        # lateral pairs together, diagonal apart
        assert m["lateral"] > m["diagonal"] + 0.35
    if gait == "canter":      # front paws together and hind paws together, and fastest
        assert m["front_pair"] > 0.25 and m["hind_pair"] > 0.25 and m["speed_m_s"] > 1.5
    if gait == "walk":        # no pair in step
        assert max(m["diagonal"], m["lateral"]) < 0.3


def test_paw_locking_reduces_sliding(dog_database):
    """Planted paws slide less with locking than without (same commands, same database)."""
    def slide(lock):
        poses, _, c = _roll(dog_database, "walk", 45.0, frames=150, lock=lock)
        paws = poses[:, c.paws][:, :, [0, 2]]
        speed = np.linalg.norm(np.diff(paws, axis=0), axis=-1) * q.FPS       # (F-1, 4) m/s
        planted = c.contact_history[1:] & c.contact_history[:-1]
        return float(speed[planted].mean())
    locked, free = slide(True), slide(False)
    assert locked < 0.7 * free, (locked, free)


def test_demo_headless_tour_writes_metrics(tmp_path, shared_data):
    from kinema.cli.demo import run_demo
    run_demo("quadruped", ["--headless", "--frames", "480", "--tour", "--no-video", "--out", str(tmp_path)])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert [s["gait_commanded"] for s in metrics["segments"]] == list(q.GAITS)
    for s in metrics["segments"]:
        assert s["gait"] == s["gait_commanded"] and s["direction_cos"] > 0.9, s
    assert metrics["steps"] == 480 and metrics["video"] is None
