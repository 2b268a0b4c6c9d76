"""Guards of the trained retrieval controller (NOTES.md 3.1): the candidates reach the
output, their width is part of the input, the gain is never exactly 0.0; plus the
checkpoint metadata, the fingerprint refusal, `kinema eval` and `kinema card`."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from kinema.cli.main import main
from kinema.control.retrieval.card import model_card
from kinema.control.retrieval.evaluate import evaluate, oracle_summary
from kinema.control.retrieval.rollout import teacher_forced_candidates
from kinema.control.retrieval.sequences import Retriever
from kinema.control.retrieval.training import build_databases, load_config, train
from kinema.errors import KinemaError
from kinema.features.normalisation import Normaliser
from kinema.nn.checkpoint import load_checkpoint

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "retrieval_tiny.toml"
EVAL = dict(frames=30, context=8, stride=40, max_windows=4, mirror=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, sample_data):
    out = tmp_path_factory.mktemp("retrieval") / "tiny.safetensors"
    cfg = load_config(CONFIG)
    path, meta = train(cfg, out, log=lambda *_: None)
    db, val = build_databases(cfg)
    return path, meta, db, val


@pytest.fixture(scope="module")
def result(trained):
    path, meta, db, val = trained
    clips = [str(p) for p in sorted((Path(__file__).resolve().parents[2] / "src/kinema/assets/sample/games105").glob("walk60.bvh"))]
    return evaluate(path, db, clips, **EVAL)


def test_checkpoint_metadata_holds_everything_the_card_needs(trained):
    path, meta, db, _ = trained
    model, m = load_checkpoint(path)
    assert m["fingerprint"] == db.fingerprint == m["database"]["fingerprint"]
    assert m["architecture"]["class"] == "RetrievalMamba" and m["architecture"]["hparams"]["use_retrieval"]
    assert set(m["history"]) >= {"epochs", "first", "best", "last"}
    assert m["history"]["first"]["epoch"] == 1 and m["history"]["last"]["epoch"] == len(m["history"]["epochs"])
    assert len(m["normalisation"]["pose"]["mean"]) == db.pose_width
    assert m["loss_weights"]["contact_bce"] > 0 and m["config"]["train"]["warmup"] > 0
    assert m["parameters"]["total"] == sum(p.numel() for p in model.parameters())


def test_the_cards_reproduce_command_rebuilds_the_recorded_config(trained, tmp_path):
    """The card's ``kinema train`` line is the config file plus a --set for every recorded
    value the file does not hold: applied to the file, those overrides give back the recorded
    config exactly; a run trained from the file unchanged needs none, and a config file that
    is gone is said to be gone."""
    from kinema.control.retrieval.card import reproduce_command
    from kinema.control.retrieval.training import apply_overrides

    cfg = load_checkpoint(trained[0])[1]["config"]
    assert reproduce_command(cfg) == f"kinema train {cfg['source']}"
    changed = json.loads(json.dumps(cfg))
    changed["train"].update(lr=1e-3, init=str(tmp_path / "first stage.safetensors"), stick_posture=5)
    changed["model"]["use_retrieval"] = False
    command = reproduce_command(changed)
    words = shlex.split(command)
    assert words[:3] == ["kinema", "train", cfg["source"]] and words[3::2] == ["--set"] * 4
    items = words[4::2]
    rebuilt = apply_overrides(load_config(CONFIG), items)
    for section in ("model", "train", "retrieval"):
        assert rebuilt[section] == changed[section], section
    assert f"train.init={tmp_path / 'first stage.safetensors'}" in shlex.split(command)
    assert reproduce_command(changed, "models/second stage.safetensors") == f"{command} -o 'models/second stage.safetensors'"
    gone = dict(changed, source=str(tmp_path / "missing.toml"))
    assert reproduce_command(gone).endswith("(not found here: every setting is in the Training table)")


def test_a_run_that_would_overwrite_its_init_is_refused_before_it_starts(tmp_path):
    """``train.init`` naming the output itself (a second stage run without -o, whose config's
    ``out`` is the first stage) would overwrite the weights it starts from: refused at once."""
    cfg = load_config(CONFIG)
    out = tmp_path / "stage.safetensors"
    cfg["train"]["init"] = str(out)
    with pytest.raises(KinemaError, match="overwrite the weights it starts from"):
        train(cfg, out, log=lambda *_: None)


def test_candidate_width_is_part_of_the_input(trained):
    path, meta, db, _ = trained
    model, _ = load_checkpoint(path)
    width = 2 * db.pose_width + 3
    assert model.candidate_dim == width == model.encoder[0].in_features
    assert model.backbone.hparams["input_dim"] == 12 + db.pose_width + model.hparams["retrieval_dim"]
    with pytest.raises(ValueError, match="candidates must be"):
        model(torch.zeros(1, 2, 12), torch.zeros(1, 2, db.pose_width), torch.zeros(1, 2, 4, width - 1))


def test_output_depends_on_candidates_after_training(trained):
    path, meta, db, val = trained
    model, m = load_checkpoint(path)
    norm = Normaliser.from_json(m["normalisation"]["pose"])
    r = Retriever(db, norm, tau=0.0)
    rows = val.ranges[:2, :1] + np.arange(20)[None]
    cands = torch.as_tensor(teacher_forced_candidates(r, val, rows, None, None)).requires_grad_(True)
    out, _ = model(torch.as_tensor(val.trajectory[rows]), torch.as_tensor(norm.normalise(val.pose[rows])), cands)
    (grad,) = torch.autograd.grad(out["pose"].square().sum() + out["contact_logits"].square().sum(), cands)
    assert torch.isfinite(grad).all() and grad.norm() > 1e-6
    # the pose part (not only the cost column) is read
    assert grad[..., :db.pose_width].abs().sum() > 0


def test_retrieval_gain_is_measured_and_never_exactly_zero(result):
    for regime in ("teacher_forced", "free_running"):
        r = result[regime]
        assert set(r) >= {"with", "without", "gain", "gain_ci95", "baselines"}
        assert r["gain"] != 0.0
        assert r["gain"] == pytest.approx(r["without"]["loss"] - r["with"]["loss"], rel=1e-4, abs=1e-7)
        lo, hi = r["gain_ci95"]
        assert lo <= r["gain"] <= hi
        assert set(r["baselines"]) >= {"copy_previous", "nearest_candidate", "motion_matching_playback",
                                       "random_candidates"}
        assert "frechet_split_half" in r["ground_truth"]
        assert {"accel_ratio", "energy_window_fraction", "frechet"} <= set(r["with"])
        assert np.isfinite(r["with"]["loss"]) and r["with"]["joint_error_cm"] > 0
    assert "motion_matching" in result["free_running"]["baselines"]   # the runtime controller, inertialized
    assert result["free_running"]["ground_truth"]["foot_skate_cm_s"] > 0
    fr = result["free_running"]["with"]
    assert {"root_error_m", "heading_error_deg", "foot_skate_cm_s", "npss", "world_joint_error_cm"} <= set(fr)
    assert set(result["free_running"]["per_clip"]) <= {Path(c).stem for c in result["clips"]}
    for clip in result["free_running"]["per_clip"].values():
        assert clip["windows"] > 0 and {"with", "without", "ground_truth", "motion_matching"} <= set(clip)
    # copying the previous pose is exact in teacher forcing only up to one frame of motion
    assert 0 < result["teacher_forced"]["baselines"]["copy_previous"]["joint_error_cm"] < 5


def test_the_oracle_database_holds_the_evaluated_future(trained):
    path, meta, db, val = trained
    clips = [str(Path(__file__).resolve().parents[2] / "src/kinema/assets/sample/games105/walk60.bvh")]
    result = evaluate(path, db, clips, **EVAL, oracle=True)
    fr = result["free_running"]
    o = fr["oracle"]
    # motion matching finds the exact rows in it (near 0 cm), and not in the training database
    assert max(o["joint_error_cm"]["motion_matching"]) < 0.5
    assert min(fr["horizons"]["joint_error_cm"]["motion_matching"]) > 1.0
    assert o["joint_error_cm"]["with"] == fr["horizons"]["joint_error_cm"]["with"]
    assert len(o["uptake"]) == len(o["frames"]) == len(o["drop_ci95"])
    # defined at every horizon: motion matching's oracle error is far below the model's
    assert all(u is not None and np.isfinite(u) for u in o["uptake"])
    # the card shows the table, its uptake row from the result
    card = model_card(load_checkpoint(path)[1], result, "tiny")
    assert "an oracle database" in card and "| uptake | " + " | ".join(f"{u:.2f}" for u in o["uptake"]) in card


def test_uptake_is_undefined_where_motion_matchings_oracle_is_no_better():
    err = np.ones((4, 30))
    with_m = {"_frame_joint_error_cm": 3.0 * err}
    oracle_m = {"_frame_joint_error_cm": 2.0 * err}
    near = {"_frame_joint_error_cm": np.concatenate([0.0 * err[:, :15], 30.0 * err[:, 15:]], 1)}
    o = oracle_summary(with_m, oracle_m, near, 30, np.arange(4))
    assert o["frames"] == [15, 30] and o["uptake"][0] == pytest.approx(1 / 3) and o["uptake"][1] is None


def test_eval_cli_fails_on_a_gain_of_exactly_zero(trained, tmp_path, sample_data, capsys):
    """A model that cannot read candidates (use_retrieval off) gives gain == 0.0: refused."""
    cfg = load_config(CONFIG)
    cfg["model"]["use_retrieval"] = False
    cfg["train"].update(warmup=2, scheduled=0, free=0, eval_every=2)
    path, _ = train(cfg, tmp_path / "noret.safetensors", log=lambda *_: None)
    clip = str(sample_data / "games105" / "walk60.bvh")
    code = main(["eval", str(path), "--clips", clip, "--frames", "20", "--context", "8", "--stride", "60",
                 "--max-windows", "2", "--json"])
    captured = capsys.readouterr()
    assert code == 3 and "exactly 0.0" in captured.err
    assert json.loads(captured.out)["free_running"]["gain"] == 0.0


def test_eval_refuses_a_database_with_another_fingerprint(trained, sample_data):
    path, meta, db, _ = trained
    cfg = load_config(CONFIG)
    cfg["data"]["database"] = {"base": "games105", "contact_speed": 0.3}
    other = build_databases(cfg)[0]
    assert other.fingerprint != db.fingerprint
    with pytest.raises(KinemaError, match="fingerprint"):
        evaluate(path, other, [sample_data / "games105" / "walk60.bvh"], **EVAL)


def test_card_values_come_from_metadata_and_evaluation(trained, result, tmp_path, capsys):
    path, meta, db, _ = trained
    (tmp_path / "eval.json").write_text(json.dumps(result))
    assert main(["card", str(path), "--eval", str(tmp_path / "eval.json"), "-o", str(tmp_path / "card.md")]) == 0
    card = (tmp_path / "card.md").read_text()
    for section in ("## Database", "## Architecture", "## Training", "## Retrieval gain", "## Provenance"):
        assert section in card
    assert f"| fingerprint | {db.fingerprint} |" in card
    assert f"| rows | {db.rows:,} |" in card
    assert f"| pose width | {db.pose_width} |" in card
    best = meta["history"]["best"]
    assert f"| best | {best['epoch']} | {best['step']} |" in card
    assert f"{result['free_running']['gain']:+.4f}" in card and f"{result['teacher_forced']['gain']:+.4f}" in card


def test_interrupted_training_resumes_to_the_same_weights(trained, tmp_path):
    """An interrupted run continued with resume=True ends with the weights of the
    uninterrupted run; the partial state file is removed at the end."""
    from kinema.control.retrieval.training import partial_path

    path, meta, _, _ = trained
    cfg = load_config(CONFIG)
    out = tmp_path / "resumed.safetensors"
    part, nothing = train(cfg, out, log=lambda *_: None, stop_after=9)
    assert part == partial_path(out) and part.is_file() and nothing == {} and not out.exists()
    done, _ = train(cfg, out, log=lambda *_: None, resume=True)
    assert done == out and not part.exists()
    a, _ = load_checkpoint(path)
    b, _ = load_checkpoint(out)
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name
    # a partial run of another config is refused
    train(cfg, out, log=lambda *_: None, stop_after=9)
    cfg["train"]["lr"] = 1e-4
    with pytest.raises(KinemaError, match="another config"):
        train(cfg, out, log=lambda *_: None, resume=True)


def test_stability_and_horizon_reports(trained, result, sample_data):
    """Long rollouts report finiteness and error growth beside the frozen pose's; the
    horizon table covers the model and every baseline with paired intervals."""
    path, meta, db, _ = trained
    res = evaluate(path, db, [sample_data / "games105" / "walk60.bvh"], frames=20, context=8, stride=60,
                   max_windows=2, stability_frames=120)
    st = res["stability"]
    assert st["windows"] >= 1 and st["frames"] == 120 and st["finite"]
    assert st["max_frame_joint_error_cm"] >= st["first_joint_error_cm"] > 0
    assert st["copy_previous_max_frame_joint_error_cm"] > 0
    h = result["free_running"]["horizons"]
    assert h["frames"] == [15, 30] and set(h["joint_error_cm"]) >= {"with", "without", "copy_previous", "motion_matching"}
    for name, cis in h["other_minus_model_ci95"].items():
        assert len(cis) == 2 and all(lo <= hi for lo, hi in cis), name


def test_frame_curves_match_the_horizon_table_and_plot(trained, result, tmp_path):
    """Per-frame curves average to the horizon table; the plot draws every method."""
    from kinema.control.retrieval.plot import STYLES, plot_frame_errors

    fr = result["free_running"]
    curves, h = fr["frame_joint_error_cm"], fr["horizons"]
    assert set(curves) == set(h["joint_error_cm"]) and result["fps"] == 60.0
    for name, values in curves.items():
        for n, expected in zip(h["frames"], h["joint_error_cm"][name]):
            assert np.mean(values[:n]) == pytest.approx(expected, rel=1e-5), name
    png = plot_frame_errors(result, tmp_path / "curves.png")
    from matplotlib.image import imread
    img = imread(png)
    assert img.shape[:2] == (500, 800)
    colours = {tuple(np.round(c[:3], 2)) for c in img.reshape(-1, img.shape[-1])}
    assert len(colours) > 20          # lines in several colours, not a blank canvas
    assert set(curves) <= set(STYLES)  # every method has its label and style


def test_a_checkpoint_trained_planted_runs_and_is_evaluated_planted(trained, tmp_path):
    """A model whose rollouts were trained with planted-foot roots (``train.planted``) gets
    them by default from its runtime controller and from ``kinema eval`` (which then moves
    every compared method the same way); an explicit False still turns them off, and a
    model trained without them runs without them."""
    from kinema.control.retrieval.controller import RetrievalController
    from kinema.control.retrieval.metrics import floor_height
    from kinema.nn.checkpoint import save_checkpoint

    path, meta, db, _ = trained
    model, m = load_checkpoint(path)
    cfg = json.loads(json.dumps(m["config"]))
    cfg["train"]["planted"] = True
    planted = save_checkpoint(tmp_path / "planted.safetensors", model, **{**m, "config": cfg})
    assert RetrievalController(planted, db).planted == pytest.approx(floor_height(db))
    assert RetrievalController(planted, db, planted=False).planted is None
    assert RetrievalController(path, db).planted is None
    clips = [str(Path(__file__).resolve().parents[2] / "src/kinema/assets/sample/games105/walk60.bvh")]
    quick = {**EVAL, "max_windows": 1}
    on = evaluate(planted, db, clips, **quick)
    off = evaluate(path, db, clips, **quick)
    assert on["planted"] is True and off["planted"] is False
    # the same weights, moved by another root rule: the root paths differ
    assert on["free_running"]["with"]["root_error_m"] != off["free_running"]["with"]["root_error_m"]


def test_a_checkpoint_trained_with_unit_6d_is_fed_back_unit_rotations(trained, tmp_path):
    """A model trained with ``train.unit_6d`` has its 6D rotations fed back as unit,
    orthogonal columns (the data's form) by its runtime controller and by the evaluation's
    rollouts, whatever scale its raw outputs drift to; a model trained without it keeps its
    raw 6D (what it was trained on)."""
    from kinema.control.retrieval.controller import RetrievalController
    from kinema.control.retrieval.metrics import pose_slice
    from kinema.control.retrieval.rollout import rollout
    from kinema.nn.checkpoint import save_checkpoint

    path, meta, db, _ = trained
    model, m = load_checkpoint(path)
    cfg = json.loads(json.dumps(m["config"]))
    cfg["train"]["unit_6d"] = True
    unit = save_checkpoint(tmp_path / "unit.safetensors", model, **{**m, "config": cfg})
    sl = pose_slice(db, "joint_rotations_6d")

    def off_unit(poses: np.ndarray) -> float:
        c = poses[..., sl].reshape(poses.shape[:-1] + (db.num_joints, 2, 3))
        gram = np.einsum("...ik,...jk->...ij", c, c)
        return float(np.abs(gram - np.eye(2)).max())

    poses = {}
    for name, ck in (("unit", unit), ("raw", path)):
        ctl = RetrievalController(ck, db)
        assert ctl.unit == (name == "unit")
        poses[name] = np.stack([ctl.step(np.zeros(12, np.float32)) for _ in range(120)])
    assert off_unit(poses["unit"]) < 1e-5
    assert off_unit(poses["raw"]) > 1e-3    # the tiny model's raw 6D are not unit: the flag is what made them so
    retriever = Retriever.for_checkpoint(db, Normaliser.from_json(m["normalisation"]["pose"]), m)
    starts = np.array([0, 40])
    with torch.no_grad():
        r = rollout(model, retriever, db, starts, 8, 60, rigid=True, unit=True)
    assert off_unit(retriever.norm.denormalise(r.pose.numpy()).astype(np.float64)) < 1e-4


def test_a_checkpoint_trained_with_rebuilt_velocities_is_fed_back_its_joints_motion(trained, tmp_path):
    """A model trained with ``train.rebuilt_velocities`` has every drawn pose's joint
    velocities rebuilt from its joints' motion since the pose before, by its runtime
    controller and by the evaluation's rollouts; a model trained without it keeps the
    velocities it predicts (which then differ from its motion)."""
    from kinema.control.retrieval.controller import RetrievalController
    from kinema.control.retrieval.metrics import pose_slice
    from kinema.control.retrieval.pose import joint_steps
    from kinema.control.retrieval.rollout import rollout
    from kinema.nn.checkpoint import save_checkpoint

    path, meta, db, _ = trained
    model, m = load_checkpoint(path)
    cfg = json.loads(json.dumps(m["config"]))
    cfg["train"]["rebuilt_velocities"] = True
    rebuilt = save_checkpoint(tmp_path / "rebuilt.safetensors", model, **{**m, "config": cfg})
    sl = pose_slice(db, "joint_velocities")

    def off_motion(poses: np.ndarray) -> float:
        """Largest gap (m/s) between each pose's velocities and its joints' motion."""
        motion = joint_steps(db, poses[:-1], poses[1:]) * db.fps
        return float(np.abs(poses[1:, ..., sl] - motion.reshape(motion.shape[:-2] + (-1,))).max())

    poses = {}
    for name, ck in (("rebuilt", rebuilt), ("raw", path)):
        ctl = RetrievalController(ck, db)
        assert ctl.velocities == (name == "rebuilt")
        poses[name] = np.stack([ctl.step(np.zeros(12, np.float32)) for _ in range(120)]).astype(np.float64)
    assert off_motion(poses["rebuilt"]) < 1e-3
    assert off_motion(poses["raw"]) > 0.05
    retriever = Retriever.for_checkpoint(db, Normaliser.from_json(m["normalisation"]["pose"]), m)
    with torch.no_grad():
        r = rollout(model, retriever, db, np.array([0, 40]), 8, 60, rigid=True, velocities=True)
    pred = retriever.norm.denormalise(r.pose.numpy()).astype(np.float64)
    assert off_motion(np.swapaxes(pred, 0, 1)) < 1e-3


def test_a_diverging_run_stops_with_the_step_and_what_to_change(tmp_path):
    """A learning rate of 1e6 blows the tiny model up within a few steps: training stops
    with an error naming the step, the stage and the settings to change, not with a search
    error from deep inside a rollout; no checkpoint is written."""
    cfg = load_config(CONFIG)
    cfg["train"]["lr"] = 1e6
    out = tmp_path / "diverged.safetensors"
    with pytest.raises(KinemaError, match=r"training diverged at step \d+ \(warmup stage.*train\.lr") as err:
        train(cfg, out, log=lambda *_: None)
    assert "NaN or infinity" in str(err.value) and not out.exists()


def test_chained_free_rollouts_train_and_resume_to_the_same_weights(trained, tmp_path):
    """``train.free_chain = 3``: the free stage continues the same rollouts for 3 steps;
    its weights differ from the unchained run's, and a run interrupted at a validation and
    resumed ends with the uninterrupted chained run's weights (a chain ends at every
    validation). A chain of 0 is refused."""
    cfg = load_config(CONFIG)
    cfg["train"].update(free=10, free_chain=3)
    a_path, _ = train(cfg, tmp_path / "chain.safetensors", log=lambda *_: None)
    _assert_resumes_to_the_same_weights(cfg, a_path, tmp_path / "chain_resumed.safetensors")
    _assert_differs_from_the_plain_run(a_path, tmp_path)
    cfg["train"]["free_chain"] = 0
    with pytest.raises(KinemaError, match="free_chain"):
        train(cfg, tmp_path / "bad.safetensors", log=lambda *_: None)


def test_stick_driven_free_steps_train_select_and_resume(trained, tmp_path):
    """``train.stick_weight``: each free step adds stick-driven rollouts (continued over 3
    steps, ``stick_chain``); every free-stage validation records their objective with and
    without candidates, the selection adds stick_weight x its value, the checkpoint lists
    the term, the weights differ from the run without it, and an interrupted run resumes
    to the same weights (a chain ends at every validation). With ``stick_adjust`` (roots
    pulled toward the springs as at runtime) the run trains to finite, other weights."""
    from kinema.control.retrieval.training import selection_key, settings

    cfg = load_config(CONFIG)
    cfg["train"].update(free=10, stick_weight=0.5, stick_batch=2, stick_chain=3)
    a_path, meta = train(cfg, tmp_path / "stick.safetensors", log=lambda *_: None)
    recs = meta["history"]["epochs"]
    assert all(np.isfinite(h["stick_with"]) and np.isfinite(h["stick_without"]) and h["stick_with"] > 0 for h in recs)
    s = settings(cfg)
    best = meta["history"]["best"]
    assert selection_key(best, s) == pytest.approx(best["fr_with"] + 0.5 * best["stick_with"])
    assert meta["loss_weights"]["stick"] == 0.5
    _assert_resumes_to_the_same_weights(cfg, a_path, tmp_path / "stick_resumed.safetensors")
    _assert_differs_from_the_plain_run(a_path, tmp_path)
    cfg["train"]["stick_adjust"] = True
    b_path, meta = train(cfg, tmp_path / "adjusted.safetensors", log=lambda *_: None)
    assert all(np.isfinite(h["stick_with"]) for h in meta["history"]["epochs"])
    a, _ = load_checkpoint(a_path)
    b, _ = load_checkpoint(b_path)
    assert any(not torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def _assert_resumes_to_the_same_weights(cfg: dict, whole: Path, out: Path) -> None:
    """``cfg`` trained to ``out`` with a stop after step 14 and a resume ends with the weights
    of the uninterrupted run ``whole``."""
    train(cfg, out, log=lambda *_: None, stop_after=14)
    train(cfg, out, log=lambda *_: None, resume=True)
    a, _ = load_checkpoint(whole)
    b, _ = load_checkpoint(out)
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name


def _assert_differs_from_the_plain_run(path: Path, tmp_path: Path) -> None:
    """The weights of ``path`` differ from the tiny config's with 10 free steps and nothing else."""
    cfg = load_config(CONFIG)
    cfg["train"].update(free=10)
    a, _ = load_checkpoint(path)
    c, _ = load_checkpoint(train(cfg, tmp_path / "plain.safetensors", log=lambda *_: None)[0])
    assert any(not torch.equal(x, y) for x, y in zip(a.state_dict().values(), c.state_dict().values()))


def test_a_blown_up_validation_rollout_scores_infinity_instead_of_ending_the_run(trained):
    """An early model's 300-frame rollout can reach NaN poses (session 18: a run stopped at
    its fourth validation with "queries contain NaN or infinity"); the validation records
    infinity, which selection never picks, and the null path is still scored."""
    from kinema.control.retrieval.metrics import floor_height
    from kinema.control.retrieval.training import make_retriever, selection_key, settings, validate

    path, meta, db, val = trained
    cfg = load_config(CONFIG)
    s = settings(cfg)
    model, m = load_checkpoint(path)
    retriever = make_retriever(cfg, db, Normaliser.from_json(m["normalisation"]["pose"]))
    healthy = validate(model, retriever, val, s, floor_height(db))
    with torch.no_grad():
        model.copy_gate.fill_(1e38)   # the candidates' motion times 1e38: inf, then NaN queries
    blown = validate(model, retriever, val, s, floor_height(db))
    assert np.isfinite(healthy["fr_with"]) and blown["fr_with"] == np.inf
    assert selection_key(blown, s) == np.inf and np.isfinite(selection_key(healthy, s))
    assert blown["fr_without"] == healthy["fr_without"]   # the null path reads no candidates


def test_a_run_started_from_a_checkpoint_begins_at_its_weights(trained, tmp_path):
    """``train.init``: a run with no step that can change a weight (learning rate 0, no
    weight decay) ends with exactly the weights it started from, which are those of the
    checkpoint, not fresh ones; a checkpoint of another architecture or database, or a
    missing one, is refused with the setting's name."""
    path, _, _, _ = trained
    cfg = load_config(CONFIG)
    cfg["train"].update(init=str(path), warmup=0, scheduled=0, free=4, eval_every=2, lr=0.0, weight_decay=0.0)
    out, _ = train(cfg, tmp_path / "continued.safetensors", log=lambda *_: None)
    a, _ = load_checkpoint(path)
    b, _ = load_checkpoint(out)
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name
    fresh_cfg = load_config(CONFIG)
    fresh_cfg["train"].update(warmup=0, scheduled=0, free=4, eval_every=2, lr=0.0, weight_decay=0.0)
    fresh, _ = train(fresh_cfg, tmp_path / "fresh.safetensors", log=lambda *_: None)
    c, _ = load_checkpoint(fresh)
    assert any(not torch.equal(x, y) for x, y in zip(a.state_dict().values(), c.state_dict().values()))
    cfg["model"]["d_model"] = cfg["model"].get("d_model", 32) * 2
    with pytest.raises(KinemaError, match="train.init.*does not fit"):
        train(cfg, tmp_path / "bad.safetensors", log=lambda *_: None)
    cfg = load_config(CONFIG)
    cfg["train"]["init"] = str(tmp_path / "nowhere.safetensors")
    with pytest.raises(KinemaError, match="train.init.*not found"):
        train(cfg, tmp_path / "bad.safetensors", log=lambda *_: None)
    cfg["train"]["init"] = str(path)
    cfg["data"]["clips"] = [c for c in cfg["data"]["clips"] if "idle" not in c]   # another database
    with pytest.raises(KinemaError, match="train.init: .*trained on database"):
        train(cfg, tmp_path / "bad.safetensors", log=lambda *_: None)
