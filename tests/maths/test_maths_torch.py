"""The torch path of kinema.maths: same numbers as NumPy, dtype/device kept, gradients
correct (torch.autograd.gradcheck in float64) and free of NaN at identity and other
singular-looking points."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

torch = pytest.importorskip("torch")

from kinema.maths import mirror, quat, sixd, transform  # noqa: E402

ORDERS = ("xyz", "xzy", "yxz", "yzx", "zxy", "zyx")


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _funcs():
    """name -> (function, builder of NumPy inputs from (quaternions, vectors, t))."""
    f = {
        "mul": (quat.mul, lambda q, v, t: (q, q[::-1].copy())),
        "inv": (quat.inv, lambda q, v, t: (q,)),
        "rotate": (quat.rotate, lambda q, v, t: (q, v)),
        "inv_rotate": (quat.inv_rotate, lambda q, v, t: (q, v)),
        "normalize": (quat.normalize, lambda q, v, t: (2.0 * q,)),
        "slerp": (quat.slerp, lambda q, v, t: (q, q[::-1].copy(), t)),
        "nlerp": (quat.nlerp, lambda q, v, t: (q, q[::-1].copy(), t)),
        "log": (quat.log, lambda q, v, t: (q,)),
        "exp": (quat.exp, lambda q, v, t: (v,)),
        "to_axis_angle": (lambda q: quat.to_axis_angle(q)[0] * quat.to_axis_angle(q)[1][..., None],
                          lambda q, v, t: (q,)),
        "from_axis_angle": (quat.from_axis_angle,
                            lambda q, v, t: (_unit(v + [1e-3, 2e-3, 3e-3]), t * 7)),
        "between": (quat.between, lambda q, v, t: (v, v[::-1].copy())),
        "to_matrix": (quat.to_matrix, lambda q, v, t: (q,)),
        "from_matrix": (quat.from_matrix, lambda q, v, t: (Rotation.from_quat(q, scalar_first=True).as_matrix(),)),
        "to_6d": (quat.to_6d, lambda q, v, t: (q,)),
        "from_6d": (quat.from_6d, lambda q, v, t: (np.concatenate([v, v[::-1]], -1),)),
        "sixd_to_matrix": (sixd.to_matrix, lambda q, v, t: (np.concatenate([v, v[::-1]], -1),)),
        "unroll": (quat.unroll, lambda q, v, t: (q,)),
        "abs": (quat.abs, lambda q, v, t: (q,)),
        "angle": (quat.angle, lambda q, v, t: (q, q[::-1].copy())),
        "transform_apply": (lambda q, p: transform.apply(transform.from_rotation_translation(q, p), p),
                            lambda q, v, t: (q, v)),
        "transform_inverse": (lambda q, p: transform.inverse(transform.from_rotation_translation(q, p)),
                              lambda q, v, t: (q, v)),
        "mirror_rotations": (lambda q: mirror.rotations(q, 1), lambda q, v, t: (q,)),
        "mirror_positions": (lambda p: mirror.positions(p, 2), lambda q, v, t: (v,)),
    }
    for order in ORDERS:
        f[f"to_euler_{order}"] = (lambda q, o=order: quat.to_euler(q, o), lambda q, v, t: (q,))
        f[f"from_euler_{order}"] = (lambda e, o=order: quat.from_euler(e, o), lambda q, v, t: (v,))
    return f


FUNCS = _funcs()


def _inputs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    q = Rotation.random(n, random_state=seed).as_quat(scalar_first=True)
    q[::3] *= -1
    v = rng.normal(size=(n, 3))
    t = rng.uniform(size=n)
    return q, v, t


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_torch_matches_numpy(name, edges):
    fn, build = FUNCS[name]
    q, v, t = _inputs(len(edges), 0)
    qs = np.concatenate([edges, q])
    vs = np.concatenate([quat.log(edges), v])
    ts = np.concatenate([np.linspace(0, 1, len(edges)), t])
    args = build(qs, vs, ts)
    expected = fn(*args)
    got = fn(*[torch.from_numpy(np.ascontiguousarray(a)) for a in args])
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12, rtol=0)
    got32 = fn(*[torch.from_numpy(np.ascontiguousarray(a)).float() for a in args])
    assert got32.dtype == torch.float32 and got32.device == got.device


GRAD_FUNCS = [n for n in sorted(FUNCS) if n not in ("unroll", "abs", "mirror_positions")]


@pytest.mark.parametrize("name", GRAD_FUNCS)
def test_gradcheck(name):
    fn, build = FUNCS[name]
    args = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in build(*_inputs(4, 1))]
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-6)


def test_gradcheck_near_identity():
    # the series branches of log and exp, and slerp between nearly equal rotations
    tiny = torch.tensor([[1e-6, -2e-6, 5e-7], [0.0, 3e-5, 0.0]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(quat.exp, (tiny,), eps=1e-7, atol=1e-6)
    q = quat.exp(tiny.detach()).requires_grad_(True)
    assert torch.autograd.gradcheck(quat.log, (q,), eps=1e-7, atol=1e-6)
    a = torch.tensor(Rotation.random(2, random_state=5).as_quat(scalar_first=True), requires_grad=True)
    b = quat.mul(a.detach(), quat.exp(tiny.detach())).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x, y: quat.slerp(x, y, 0.3), (a, b), eps=1e-7, atol=1e-6)


def _grad(fn, *xs):
    """Gradients of sum(fn(*xs)) with respect to each input."""
    xs = [torch.tensor(np.asarray(x, dtype=np.float64), requires_grad=True) for x in xs]
    fn(*xs).sum().backward()
    return [x.grad for x in xs]


def test_no_nan_gradients_at_singular_points():
    ident = [1.0, 0.0, 0.0, 0.0]
    ux = [1.0, 0.0, 0.0]
    cases = {
        "log identity": (quat.log, ident),
        "exp zero": (quat.exp, [0.0, 0.0, 0.0]),
        "axis-angle identity": (lambda q: quat.to_axis_angle(q)[1], ident),
        "slerp equal": (lambda a, b: quat.slerp(a, b, 0.5), ident, ident),
        "nlerp equal": (lambda a, b: quat.nlerp(a, b, 0.5), ident, ident),
        "angle equal": (quat.angle, [0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]),
        "from_matrix identity": (quat.from_matrix, np.eye(3)),
        "from_matrix 180": (quat.from_matrix, np.diag([1.0, -1.0, -1.0])),
        "between parallel": (quat.between, ux, [2.0, 0.0, 0.0]),
        "between antiparallel": (quat.between, ux, [-2.0, 0.0, 0.0]),
        "log 180": (quat.log, [0.0, 0.0, 1.0, 0.0]),
        "log full turn": (quat.log, [-1.0, 0.0, 0.0, 0.0]),
    }
    for order in ORDERS:
        cases[f"to_euler identity {order}"] = (lambda q, o=order: quat.to_euler(q, o), ident)
        for mid in (np.pi / 2, -np.pi / 2):
            locked = quat.from_euler(np.array([0.4, mid, -0.3]), order)
            cases[f"to_euler lock {order} {mid:+.2f}"] = (lambda q, o=order: quat.to_euler(q, o), locked)
        # an exactly representable lock: 90 degrees about the middle axis, w == component
        exact = np.zeros(4)
        exact[0] = exact[1 + "xyz".index(order[1])] = np.sqrt(0.5)
        cases[f"to_euler exact lock {order}"] = (lambda q, o=order: quat.to_euler(q, o), exact)
    for name, (fn, *xs) in cases.items():
        grads = _grad(fn, *xs)
        for g in grads:
            assert g is not None and torch.isfinite(g).all(), name


def test_gradient_values_at_identity():
    # d exp(v) / dv at 0: (w, xyz) = (1, v / 2) to first order
    (g,) = _grad(lambda v: quat.exp(v)[..., 1], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(g.numpy(), [0.5, 0.0, 0.0])
    # d log(q) / dq at identity: 2 on the matching vector component, 0 on w
    (g,) = _grad(lambda q: quat.log(q)[..., 2], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(g.numpy(), [0.0, 0.0, 0.0, 2.0])  # v_z = f(q) * q_z


def test_training_step_decreases_geodesic_loss():
    # a real use: fit 6D outputs to target rotations through from_6d + angle
    torch.manual_seed(0)
    target = torch.tensor(Rotation.random(64, random_state=2).as_quat(scalar_first=True), dtype=torch.float32)
    d = torch.randn(64, 6, requires_grad=True)
    opt = torch.optim.Adam([d], lr=0.05)
    losses = []
    for _ in range(150):
        loss = quat.angle(quat.from_6d(d), target).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.05 * losses[0]


def test_mixed_numpy_and_torch_arguments():
    q = torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    out = quat.rotate(q, np.array([[1.0, 0.0, 0.0]]))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), [[-1.0, 0.0, 0.0]], atol=1e-15)
    out = quat.slerp(q, quat.identity((1,)), 0.5)
    assert isinstance(out, torch.Tensor)
