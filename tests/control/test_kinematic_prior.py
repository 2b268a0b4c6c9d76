"""The kinematic one-step prior of the retrieval controller, on the bundled GAMES-105 clips."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from kinema.control.retrieval.metrics import joint_positions
from kinema.control.retrieval.training import make_model
from kinema.errors import KinemaError
from kinema.nn.checkpoint import load_checkpoint, save_checkpoint
from kinema.nn.kinematic import KinematicPrior

SMALL = {"d_model": 16, "n_layers": 1, "d_state": 4, "d_conv": 3, "retrieval_dim": 8, "gates": "state"}


def position_error_cm(db, predicted: np.ndarray) -> float:
    """Mean per-joint distance (cm) of predicted next poses (N-1, P) to the database's, over
    the row pairs inside one clip."""
    ok = np.ones(db.rows - 1, bool)
    ok[db.ranges[:, 1][:-1] - 1] = False
    d = joint_positions(db, predicted[ok]) - joint_positions(db, db.pose[1:][ok])
    return float(np.linalg.norm(d, axis=-1).mean() * 100)


def test_prior_predicts_the_next_frame_far_better_than_copying(games105_db, games105_retriever):
    db, retriever = games105_db, games105_retriever
    prior = KinematicPrior.from_layout(db.pose_layout, db.fps)
    prior.set_normaliser(retriever.norm.mean, retriever.norm.std)
    pose_n = torch.as_tensor(retriever.poses_n[:-1])
    with torch.no_grad():
        nxt = retriever.norm.denormalise((pose_n + prior(pose_n)).numpy())
    copy, kin = position_error_cm(db, db.pose[:-1]), position_error_cm(db, nxt)
    assert copy > 0.3                     # the clips move: copying is off by millimetres per frame
    assert kin < 0.2 * copy, (kin, copy)  # integrating the pose's own velocities is not
    # only the joint-position columns move
    with torch.no_grad():
        step = prior(pose_n).numpy()
    assert np.all(step[:, 3 * db.num_joints:] == 0) and np.abs(step[:, :3 * db.num_joints]).max() > 0


def test_prior_jacobian_in_velocity_is_one_frame(games105_db, games105_retriever):
    db, retriever = games105_db, games105_retriever
    """d(step)/d(velocity) = 1/fps in raw units: std_v / (fps std_p) in normalised units."""
    prior = KinematicPrior.from_layout(db.pose_layout, db.fps).double()
    prior.set_normaliser(retriever.norm.mean, retriever.norm.std)
    pose = torch.as_tensor(retriever.poses_n[100], dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(prior, pose)
    (pa, pb), (va, vb) = prior.positions, prior.velocities
    std = prior.std.double()
    torch.testing.assert_close(torch.diagonal(jac[pa:pb, va:vb]), std[va:vb] / (db.fps * std[pa:pb]))


def test_kinematic_model_adds_exactly_the_prior_and_survives_a_checkpoint(games105_db, games105_retriever, tmp_path):
    db, retriever = games105_db, games105_retriever
    cfg = {"model": dict(SMALL)}
    torch.manual_seed(0)
    plain = make_model(cfg, db, retriever)
    torch.manual_seed(0)
    kin = make_model({"model": {**SMALL, "kinematic": True}}, db, retriever)
    state = {k: v for k, v in kin.state_dict().items() if not k.startswith("kinematic.")}
    plain.load_state_dict(state)   # the same weights and normalisers: only the prior differs
    rows = db.ranges[0, 0] + np.arange(12)
    pose = torch.as_tensor(retriever.poses_n[rows])[None]
    control = torch.as_tensor(db.trajectory[rows])[None]
    with torch.no_grad():
        a, _ = kin(control, pose)
        b, _ = plain(control, pose)
        torch.testing.assert_close(a["pose"] - b["pose"], kin.kinematic(pose), rtol=0, atol=1e-5)
    save_checkpoint(tmp_path / "kin.safetensors", kin)
    loaded, _ = load_checkpoint(tmp_path / "kin.safetensors")
    assert loaded.hparams["kinematic"] == kin.hparams["kinematic"] and "kinematic" not in plain.hparams
    with torch.no_grad():
        c, _ = loaded(control, pose)
    torch.testing.assert_close(c["pose"], a["pose"], rtol=0, atol=0)


def test_bad_layouts_and_the_concat_model_are_refused(games105_db, games105_retriever):
    db, retriever = games105_db, games105_retriever
    with pytest.raises(ValueError, match="3J columns"):
        KinematicPrior(20, 60.0, (0, 9), (9, 15), 15, 18)
    with pytest.raises(ValueError, match="fps"):
        KinematicPrior(20, 0.0, (0, 6), (6, 12), 12, 15)
    with pytest.raises(KinemaError, match="concat"):
        make_model({"model": {"kinematic": True, "fusion": "concat", "d_model": 16, "n_layers": 1}}, db, retriever)
