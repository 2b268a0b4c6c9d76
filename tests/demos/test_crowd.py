"""``kinema demo crowd``: N characters on their own scripted sticks through one batched
controller (the bundled sample's retrieval model, and motion matching), headless: metrics
per character, every character follows its own stick, and the MP4 shows the crowd."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kinema.cli.demo import run_demo
from kinema.demos.crowd import crowd_sticks, grid

SAMPLE = Path(__file__).resolve().parents[2] / "models" / "retrieval_sample_games105.safetensors"


def test_sticks_are_per_character_and_stop_now_and_then():
    seeds = np.random.default_rng(0).random((16, 4))
    s = np.stack([crowd_sticks(t, seeds) for t in np.arange(0, 16, 1 / 60)])   # (T, N, 2)
    assert s.shape == (960, 16, 2) and np.all(np.linalg.norm(s, axis=-1) <= 1 + 1e-9)
    assert np.all((np.linalg.norm(s, axis=-1) < 1e-12).mean(0) > 0.1)          # each one stops
    assert np.ptp(s[300], axis=0).min() > 0.1                                  # and they differ
    g = grid(10, 2.0)
    assert g.shape == (10, 3) and len(np.unique(g, axis=0)) == 10 and np.allclose(g[:, 1], 0)


@pytest.mark.parametrize("controller", ["retrieval", "matching"])
def test_headless_crowd_writes_per_character_metrics(tmp_path, sample_data, controller):
    n, frames = 9, 150
    m = run_demo("crowd", ["--headless", "--frames", str(frames), "--count", str(n), "--controller", controller,
                           "--checkpoint", str(SAMPLE), "--cache", str(tmp_path / "cache"), "--out",
                           str(tmp_path / "out"), "--width", "320", "--height", "192", "--render-every", "10"])
    assert json.loads((tmp_path / "out" / "metrics.json").read_text()) == json.loads(json.dumps(m))
    assert m["controller"] == controller and m["count"] == n and m["frames"] == frames and m["all_finite"]
    per = m["characters"]
    assert [c["character"] for c in per] == list(range(n))
    travelled = np.array([c["travelled_m"] for c in per])
    assert travelled.min() > 0.5 and np.ptp(travelled) > 0.05        # everyone moved, each its own way
    assert m["root_error_m"] < 1.0 and m["step_ms"]["median"] > 0
    assert m["lowest_hips"] == min(c["lowest_hips"] for c in per)
    assert m["fallen"] == sum(c["lowest_hips"] < 0.5 for c in per)
    if m["video"] is not None:
        import imageio.v2 as imageio
        with imageio.get_reader(m["video"]) as reader:
            last = np.asarray(list(reader.iter_data())[-1], np.float32)
        assert last.shape == (192, 320, 3) and last.std() > 5


def _alone(prog, i: int, checkpoint: Path, frames: int) -> np.ndarray:
    """(F, P) pose vectors of crowd character ``i`` stepped by a RetrievalController of its
    own: same start row, root, search phase and stick script as in the crowd."""
    from kinema.control.retrieval.controller import RetrievalController
    from kinema.control.trajectory import TrajectoryController

    start, yaw = grid(prog.count, 2.5)[i:i + 1], 2 * np.pi * prog.seeds[i:i + 1, 0]
    c = RetrievalController(checkpoint, prog.db, start_row=int(prog.start_rows[i]), phase=i % 6)
    c.reset(int(prog.start_rows[i]), start[0].astype(np.float32),
            np.array([np.sin(yaw[0]), 0.0, np.cos(yaw[0])], np.float32))
    traj = TrajectoryController(batch=1, position=start, yaw=yaw)
    out = []
    for f in range(frames):
        sim = traj.update(crowd_sticks(f / 60, prog.seeds[i:i + 1]), 1 / 60, walk=np.zeros(1, bool))
        c.step(traj.predict().features(c.root_pos, c.root_dir)[0])
        c.adjust_toward(sim.position, sim.direction, 1 / 60)
        out.append(c.pose.copy())
    return np.array(out)


def test_a_crowd_character_steps_as_it_would_alone(tmp_path, sample_data):
    """Characters share no state in the batch: a crowd character's poses are those of the
    same character stepped alone (to float32 rounding of the batched products)."""
    import torch

    from kinema.control.retrieval.evaluate import cached_database
    from kinema.demos.crowd import CrowdProgram

    torch.set_num_threads(1)
    prog = CrowdProgram(cached_database(SAMPLE, tmp_path), 8, checkpoint=SAMPLE)
    crowd = []
    for _ in range(60):
        prog.step(1 / 60)
        crowd.append(prog.ctl.poses.copy())
    crowd = np.array(crowd)
    for i in (0, 5):
        np.testing.assert_allclose(_alone(prog, i, SAMPLE, 60), crowd[:, i], atol=1e-4)


def test_the_lafan1_crowd_starts_and_stays_on_its_feet(shared_data):
    """The sample LaFAN1 model's database holds falls, getting up, crawls and jumps: every
    character starts in a row where the data stands (hips near their median height) and none
    lies down within 120 frames (hips above half that height); uniform start rows started
    about one in five on the floor."""
    import torch

    from kinema.control.retrieval.evaluate import cached_database
    from kinema.control.retrieval.metrics import joint_positions
    from kinema.demos.crowd import MODEL, CrowdProgram

    if not (shared_data / "lafan1").is_dir():
        pytest.skip("lafan1 not in the shared data folder")
    torch.set_num_threads(1)
    db = cached_database(MODEL, Path.home() / ".cache" / "kinema")       # the demo's cache
    standing = float(np.median(joint_positions(db, db.pose)[:, db.roles["hips"], 1]))
    prog = CrowdProgram(db, 64)
    hips = [prog.ctl.world_pose()[1][:, db.roles["hips"], 1]]
    assert np.all(np.abs(hips[0] / standing - 1) < 0.15), hips[0]
    for _ in range(120):
        prog.step(1 / 60)
        hips.append(prog.ctl.world_pose()[1][:, db.roles["hips"], 1])
    assert np.min(hips) > 0.5 * standing, np.min(hips, axis=0)


def test_run_crowd_counts_who_lies_down(shared_data):
    """The evaluation's crowd check (``kinema.control.retrieval.scenarios.run_crowd``) on the
    LaFAN1 database, through motion-matching playback: a character started where the data
    lies on the floor (``fallAndGetUp``), searching every row, is counted as fallen; the
    same crowd started on its feet and searching only the upright rows has no one fallen or
    sunk (its rows keep the hips within 15% of standing) or airborne. The same crowd with one
    character drawn 0.3 m up is counted airborne for the whole second (a crowd that floats
    never lies down, and the fall count alone would pass it); drawn 0.1 m up, it is not. Without
    the runtime's root adjustment (``adjust=False``) the crowd's roots end elsewhere. Its legs
    step as the data's do (stride ratio within a band of the database's); the same crowd drawn
    as a frozen pose carried by its roots (a glide) reads a stride near 0 and skates more."""
    import torch

    from kinema.control.retrieval.controller import RetrievalCrowd
    from kinema.control.retrieval.evaluate import cached_database
    from kinema.control.retrieval.scenarios import (
        AIRBORNE_M,
        SUNK,
        crowd_starts,
        database_stride_ratio,
        run_crowd,
        standing_hips,
    )
    from kinema.demos.crowd import MODEL
    from kinema.features.root import yaw_rotate
    from kinema.matching.database import _hips_height, upright_mask

    if not (shared_data / "lafan1").is_dir():
        pytest.skip("lafan1 not in the shared data folder")
    torch.set_num_threads(1)
    db = cached_database(MODEL, Path.home() / ".cache" / "kinema")
    seeds, rows = crowd_starts(db, 4)
    clip = db.clip_names.index("fallAndGetUp2_subject2")
    lo, hi = db.ranges[clip]
    lying = lo + int(np.argmin(_hips_height(db)[lo:hi - 600]))
    assert _hips_height(db)[lying] < 0.4 * standing_hips(db)
    down = rows.copy()
    down[3] = lying
    r = run_crowd(RetrievalCrowd(MODEL, db, 4, start_row=down, mode="matching"), seeds, 30)
    assert r["fallen"] >= 1 and r["lowest_hips"] < 0.5 and r["characters"] == 4 and r["finite"]
    r = run_crowd(RetrievalCrowd(MODEL, db, 4, start_row=rows, mode="matching", search_mask=upright_mask(db)),
                  seeds, 240)
    assert r["fallen"] == 0 and r["sunk"] == 0 and r["lowest_hips"] > SUNK and r["head_above_hips"]
    assert r["airborne"] == 0 and r["longest_flight_s"] < 0.1
    assert 0.5 * database_stride_ratio(db) < r["stride_ratio"] < 1.5 * database_stride_ratio(db), r
    stepping = r["foot_skate_cm_s"]
    assert 0.0 < stepping < 100.0 and np.isfinite(r["foot_skate_p90_cm_s"])
    # without the runtime's pull toward the springs the roots go where the playback puts them
    ends = []
    for adjust in (True, False):
        crowd = RetrievalCrowd(MODEL, db, 4, start_row=rows, mode="matching", search_mask=upright_mask(db))
        r = run_crowd(crowd, seeds, 60, adjust=adjust)
        assert r["fallen"] == 0 and r["finite"], (adjust, r)
        ends.append(crowd.root_pos.copy())
    assert np.abs(ends[0] - ends[1]).max() > 1e-3

    class Lifted:
        """The same crowd, its character 2 drawn ``lift`` m above where it stands."""

        def __init__(self, crowd, lift: float):
            self.crowd, self.db, self.lift = crowd, crowd.db, lift

        def drive(self, sticks, dt, adjust=True):
            self.crowd.drive(sticks, dt, adjust=adjust)

        @property
        def root(self):
            return self.crowd.root

        def joint_positions(self):
            pos = self.crowd.joint_positions().copy()
            pos[2, :, 1] += self.lift
            return pos

    class Frozen(Lifted):
        """The same crowd, every character drawn in its first pose, carried by its root."""

        def joint_positions(self):
            root, facing = self.crowd.root
            if not hasattr(self, "local"):
                self.local = yaw_rotate(facing[:, None], self.crowd.joint_positions() - root[:, None], inverse=True)
            return yaw_rotate(facing[:, None], self.local) + root[:, None]

    for lift, airborne in ((AIRBORNE_M + 0.1, 1), (AIRBORNE_M - 0.1, 0)):
        crowd = RetrievalCrowd(MODEL, db, 4, start_row=rows, mode="matching", search_mask=upright_mask(db))
        r = run_crowd(Lifted(crowd, lift), seeds, 60)
        assert r["airborne"] == airborne and r["fallen"] == 0, (lift, r)
        assert (r["longest_flight_s"] == 1.0) == bool(airborne)
    crowd = RetrievalCrowd(MODEL, db, 4, start_row=rows, mode="matching", search_mask=upright_mask(db))
    r = run_crowd(Frozen(crowd, 0.0), seeds, 240)
    assert r["stride_ratio"] < 0.1 and r["foot_skate_cm_s"] > stepping, (r, stepping)
