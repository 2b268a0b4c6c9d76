"""Guards of the retrieval-augmented controller: the candidates are really read."""
import pytest

torch = pytest.importorskip("torch")

from kinema.nn.retrieval import RetrievalMamba  # noqa: E402

SMALL = dict(pose_dim=10, control_dim=4, contact_dim=2, k=3, retrieval_dim=8,
             d_model=16, n_layers=2, d_state=4, d_conv=3)


def inputs(b=2, length=7, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    control = torch.randn(b, length, 4, generator=g, dtype=dtype)
    pose = torch.randn(b, length, 10, generator=g, dtype=dtype)
    cands = torch.randn(b, length, 3, 2 * 10 + 3, generator=g, dtype=dtype)
    return control, pose, cands


def test_reference_size_without_retrieval_is_the_published_backbone():
    model = RetrievalMamba(use_retrieval=False)
    assert sum(p.numel() for p in model.parameters()) == 1_833_625
    with pytest.raises(ValueError, match="use_retrieval=False"):
        model(torch.zeros(1, 2, 12), torch.zeros(1, 2, 151), torch.zeros(1, 2, 4, 305))


def test_reference_size_with_retrieval_says_where_extra_parameters_are():
    model = RetrievalMamba(use_retrieval=True)
    groups = model.parameter_groups()
    assert groups["backbone (reference part)"] == 1_833_625
    assert groups["total"] > 1_833_625
    extra = sum(v for k, v in groups.items() if k not in ("backbone", "backbone (reference part)", "total"))
    assert groups["total"] == 1_833_625 + extra


def test_fresh_retrieval_model_equals_its_no_retrieval_backbone():
    torch.manual_seed(0)
    with_r = RetrievalMamba(**SMALL).double()
    without = RetrievalMamba(**SMALL, use_retrieval=False).double()
    state = dict(with_r.backbone.state_dict())
    state["in_head.weight"] = state["in_head.weight"][:, :14]
    state["input_norm.mean"] = state["input_norm.mean"][:14]
    state["input_norm.std"] = state["input_norm.std"][:14]
    without.backbone.load_state_dict(state)
    control, pose, cands = inputs()
    a, _ = with_r(control, pose, cands)
    b, _ = without(control, pose)
    torch.testing.assert_close(a["pose"], b["pose"], rtol=0, atol=1e-12)


def train_copy_task(model, steps=60):
    """The next pose is pose + the successor delta of candidate 0: only candidates tell it."""
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    for i in range(steps):
        control, pose, cands = inputs(seed=i, dtype=torch.float32)
        target = pose + cands[..., 0, 10:20]
        out, _ = model(control, pose, cands)
        loss = (out["pose"] - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def test_gradient_reaches_candidates_and_gain_is_positive():
    torch.manual_seed(1)
    model = train_copy_task(RetrievalMamba(**SMALL))
    control, pose, cands = inputs(seed=999, dtype=torch.float32)
    cands = cands.requires_grad_()
    target = pose + cands[..., 0, 10:20].detach()
    out, _ = model(control, pose, cands)
    loss_with = (out["pose"] - target).pow(2).mean()
    (grad,) = torch.autograd.grad(loss_with, cands)
    assert grad.abs().sum() > 0
    with torch.no_grad():
        out_null, _ = model(control, pose, None)
        loss_without = (out_null["pose"] - target).pow(2).mean()
    gain = float(loss_without - loss_with.detach())
    assert gain != 0.0
    assert gain > 0.1 * float(loss_without)


def test_all_dropped_mask_equals_null_candidates():
    torch.manual_seed(2)
    model = train_copy_task(RetrievalMamba(**SMALL), steps=5).double()
    control, pose, cands = inputs()
    mask = torch.zeros(cands.shape[:-1], dtype=torch.bool)
    a, _ = model(control, pose, cands, mask)
    b, _ = model(control, pose, None)
    torch.testing.assert_close(a["pose"], b["pose"], rtol=0, atol=1e-12)


def test_candidate_order_does_not_matter():
    torch.manual_seed(3)
    model = train_copy_task(RetrievalMamba(**SMALL), steps=5).double()
    control, pose, cands = inputs()
    a, _ = model(control, pose, cands)
    b, _ = model(control, pose, cands[..., [2, 0, 1], :])
    torch.testing.assert_close(a["pose"], b["pose"], rtol=0, atol=1e-12)


def test_step_matches_sequence_forward():
    torch.manual_seed(4)
    model = train_copy_task(RetrievalMamba(**SMALL), steps=5).double()
    control, pose, cands = inputs()
    seq, _ = model(control, pose, cands)
    state = model.initial_state(2)
    steps = []
    for t in range(control.shape[1]):
        out, state = model.step(state, control[:, t], pose[:, t], cands[:, t])
        steps.append(out["pose"])
    torch.testing.assert_close(torch.stack(steps, 1), seq["pose"], rtol=0, atol=1e-10)


def test_wrong_candidate_width_is_an_error():
    model = RetrievalMamba(**SMALL)
    control, pose, cands = inputs(dtype=torch.float32)
    with pytest.raises(ValueError, match="candidates must be"):
        model(control, pose, cands[..., :-1])


def test_gates_add_the_weighted_successor_delta_and_pull():
    """copy gate c and pull gate g: delta = backbone delta + c * sum w_i d_i
    + g * sum w_i (pose_i + d_i - pose); the null token's weight adds nothing."""
    torch.manual_seed(5)
    model = RetrievalMamba(**SMALL).double()
    control, pose, cands = inputs()
    base, _ = model(control, pose, cands)
    with torch.no_grad():
        model.copy_gate.fill_(0.5)
        model.pull_gate.fill_(0.25)
    out, _ = model(control, pose, cands)
    w = out["candidate_weights"].unsqueeze(-1)
    d = cands[..., 10:20]
    succ = cands[..., :10] + d
    expected = base["pose"] + 0.5 * (w * d).sum(-2) + 0.25 * ((w * succ).sum(-2) - w.sum(-2) * pose)
    torch.testing.assert_close(out["pose"], expected, rtol=0, atol=1e-12)
    assert float(w.detach().sum(-2).max()) < 1.0                     # the null token keeps some weight
    # pull gate 1 with all weight on one candidate plays that candidate's successor
    with torch.no_grad():
        model.copy_gate.zero_()
        model.pull_gate.fill_(1.0)
        model.backbone.out_head.weight.zero_()
        model.backbone.out_head.bias.zero_()
    one = torch.zeros(cands.shape[:-1], dtype=torch.bool)
    one[..., 1] = True
    out, _ = model(control, pose, cands, one)
    w1 = out["candidate_weights"][..., 1:2]
    torch.testing.assert_close(out["pose"], pose + w1 * (succ[..., 1, :] - pose), rtol=0, atol=1e-12)
