"""Options of the retrieval model (kinema.nn.retrieval): state-dependent gates."""
import pytest

torch = pytest.importorskip("torch")

from kinema.nn.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from kinema.nn.retrieval import RetrievalMamba  # noqa: E402

P, C, K = 10, 4, 3
SMALL = dict(pose_dim=P, control_dim=C, contact_dim=2, k=K, retrieval_dim=8,
             d_model=16, n_layers=2, d_state=4, d_conv=3)


def inputs(b=2, length=7, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    control = torch.randn(b, length, C, generator=g, dtype=dtype)
    pose = torch.randn(b, length, P, generator=g, dtype=dtype)
    cands = torch.randn(b, length, K, 2 * P + 3, generator=g, dtype=dtype)
    return control, pose, cands


def twin(gates: str) -> RetrievalMamba:
    """A model with ``gates`` holding the weights of a seed-0 static-gate model."""
    torch.manual_seed(0)
    static = RetrievalMamba(**SMALL).double()
    other = RetrievalMamba(**SMALL, gates=gates).double()
    missing, unexpected = other.load_state_dict(static.state_dict(), strict=False)
    assert not unexpected and all(m.startswith("gate_head.") for m in missing)
    return static, other


def test_default_hparams_unchanged_so_old_checkpoints_rebuild_the_same_model():
    model = RetrievalMamba(**SMALL)
    assert "gates" not in model.hparams and model.gates == "static"
    assert not hasattr(model, "gate_head")
    assert RetrievalMamba(**SMALL, gates="state").hparams["gates"] == "state"
    with pytest.raises(ValueError, match="unknown gates"):
        RetrievalMamba(**SMALL, gates="learned")


def test_fresh_state_gates_compute_exactly_the_static_model():
    static, state = twin("state")
    with torch.no_grad():   # non-zero static gates: the state head adds exactly zero
        for m in (static, state):
            m.copy_gate.fill_(0.3)
            m.pull_gate.fill_(-0.2)
    control, pose, cands = inputs()
    a, sa = static(control, pose, cands)
    b, sb = state(control, pose, cands)
    for key in ("pose", "delta", "contact_logits", "candidate_weights"):
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    torch.testing.assert_close(sa.h[-1], sb.h[-1], rtol=0, atol=0)


def test_fresh_state_gates_equal_the_no_retrieval_backbone():
    _, model = twin("state")
    without = RetrievalMamba(**SMALL, use_retrieval=False).double()
    sd = dict(model.backbone.state_dict())
    for name in ("in_head.weight", "input_norm.mean", "input_norm.std"):
        sd[name] = sd[name][..., :C + P]
    without.backbone.load_state_dict(sd)
    control, pose, cands = inputs()
    a, _ = model(control, pose, cands)
    b, _ = without(control, pose)
    torch.testing.assert_close(a["pose"], b["pose"], rtol=0, atol=1e-12)


def test_state_gates_step_matches_forward():
    _, model = twin("state")
    with torch.no_grad():
        model.pull_gate.fill_(0.3)
        model.copy_gate.fill_(0.2)
        model.gate_head.weight.normal_(0, 0.3)
        model.gate_head.bias.normal_(0, 0.3)
    control, pose, cands = inputs(length=5)
    whole, _ = model(control, pose, cands)
    state = model.initial_state(2)
    for t in range(5):
        out, state = model.step(state, control[:, t], pose[:, t], cands[:, t])
        torch.testing.assert_close(out["pose"], whole["pose"][:, t], rtol=1e-9, atol=1e-9)


def test_state_gates_depend_on_history_and_reach_candidates():
    """Same last frame, different earlier frames -> different gates; the gate head gets a
    gradient at zero init, and the output's gradient reaches the candidates."""
    _, model = twin("state")
    with torch.no_grad():
        model.gate_head.weight.normal_(0, 0.3)
        model.copy_gate.fill_(0.2)
        model.pull_gate.fill_(0.3)
    control, pose, cands = inputs(b=1, length=6)
    other = pose.clone()
    other[:, :-1] += 1.0
    y1 = model.backbone(torch.cat([control, pose, model.retrieve(control, pose, cands, None)[0]], -1))
    y2 = model.backbone(torch.cat([control, other, model.retrieve(control, other, cands, None)[0]], -1))
    g1, g2 = model.gate_values(y1[:, -1]), model.gate_values(y2[:, -1])
    assert (g1[1] - g2[1]).abs().max() > 1e-3

    _, fresh = twin("state")
    with torch.no_grad():
        fresh.pull_gate.fill_(0.3)
    target = pose + cands[..., 0, P:2 * P]
    loss = (fresh(control, pose, cands)[0]["pose"] - target).pow(2).mean()
    loss.backward()
    assert fresh.gate_head.weight.grad.abs().sum() > 0     # zero-init, but it learns

    cands = cands.clone().requires_grad_()
    loss = (model(control, pose, cands)[0]["pose"] - target).pow(2).mean()
    (grad,) = torch.autograd.grad(loss, cands)
    assert grad[..., :2 * P].abs().sum() > 0


def test_state_gates_learn_to_pull_only_when_the_pose_has_drifted():
    """Target: the candidate successor when the input pose was corrupted (flag in the
    control), the input pose + its own delta otherwise. Static gates must compromise;
    state gates can switch, and fit clearly better."""
    def batch(seed):
        g = torch.Generator().manual_seed(seed)
        control, pose, cands = inputs(b=8, length=6, seed=seed, dtype=torch.float32)
        drift = (torch.rand(8, 1, 1, generator=g) < 0.5).float()
        control = control.clone()
        control[..., 0] = drift[..., 0] * 3.0
        succ = cands[..., 0, :P] + cands[..., 0, P:2 * P]
        cands = cands.clone()
        cands[..., 1:, :] = cands[..., :1, :]   # every candidate is the same row
        target = drift * succ + (1 - drift) * pose
        return control, pose, cands, target

    def fit(model):
        torch.manual_seed(3)
        opt = torch.optim.Adam(model.parameters(), lr=2e-2)
        for i in range(150):
            control, pose, cands, target = batch(i)
            out, _ = model(control, pose, cands)
            loss = (out["pose"] - target).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            control, pose, cands, target = batch(10_000)
            return float((model(control, pose, cands)[0]["pose"] - target).pow(2).mean())

    torch.manual_seed(0)
    static = fit(RetrievalMamba(**SMALL))
    torch.manual_seed(0)
    state = fit(RetrievalMamba(**SMALL, gates="state"))
    assert state < 0.5 * static


def test_state_gates_round_trip_through_a_checkpoint(tmp_path):
    _, model = twin("state")
    model = model.float()
    with torch.no_grad():
        model.gate_head.bias.fill_(0.1)
    save_checkpoint(tmp_path / "m.safetensors", model)
    loaded, _ = load_checkpoint(tmp_path / "m.safetensors")
    assert loaded.gates == "state"
    control, pose, cands = inputs(dtype=torch.float32)
    torch.testing.assert_close(loaded(control, pose, cands)[0]["pose"], model(control, pose, cands)[0]["pose"])


def test_state_gates_stay_between_zero_and_twice_the_static_gate():
    """However far the state drives the head, a gate stays in [0, 2 * static gate]: a
    state never seen in training cannot turn the pull toward the candidates into a push."""
    _, model = twin("state")
    with torch.no_grad():
        model.copy_gate.copy_(torch.linspace(-0.5, 0.5, P))
        model.pull_gate.copy_(torch.linspace(0.0, 0.6, P))
        model.gate_head.weight.normal_(0, 50.0)
    y = torch.randn(64, P + 2, dtype=torch.float64) * 10
    copy, pull = model.gate_values(y)
    for gate, static in ((copy, model.copy_gate), (pull, model.pull_gate)):
        lo, hi = torch.minimum(0 * static, 2 * static), torch.maximum(0 * static, 2 * static)
        assert ((gate >= lo - 1e-12) & (gate <= hi + 1e-12)).all()
        assert (gate - static).abs().max() > 0.1 * static.abs().max()   # and it does move


def test_copy_init_plays_that_share_of_the_candidates_motion_from_the_start(tmp_path):
    torch.manual_seed(0)
    base = RetrievalMamba(**SMALL).double()
    torch.manual_seed(0)
    half = RetrievalMamba(**SMALL, copy_init=0.5).double()
    assert "copy_init" not in base.hparams and half.hparams["copy_init"] == 0.5
    assert "copy_init" not in RetrievalMamba(**SMALL, copy_init=0.5, use_retrieval=False).hparams
    control, pose, cands = inputs()
    a, _ = base(control, pose, cands)
    b, _ = half(control, pose, cands)
    _, w, copy_term, _ = base._attend(control, pose, cands, None)
    torch.testing.assert_close(b["delta"] - a["delta"], 0.5 * copy_term)   # the only difference
    assert copy_term.abs().max() > 0.1 and w.sum(-1).max() < 1   # candidates move; the null token keeps a share
    path = save_checkpoint(tmp_path / "half.safetensors", half)
    loaded, _ = load_checkpoint(path)
    assert loaded.hparams["copy_init"] == 0.5
    torch.testing.assert_close(loaded.copy_gate.double(), half.copy_gate)
