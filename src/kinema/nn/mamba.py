"""Mamba (selective state-space) backbone in pure PyTorch (Gu & Dao 2023).

Shapes: B batch, L time, D d_model, Di d_inner, N d_state, R dt_rank, K d_conv.

Model: ``y = out_head(norm_f(blocks(in_head(normalise(x)))))`` then denormalised, where each
block is ``u <- u + Mixer(RMSNorm(u))`` and the mixer is::

    x~, z = split(in_proj u)                      # no bias
    xc    = SiLU(causal depthwise conv_K(x~))     # conv has a bias
    dt~, B, C = split(x_proj xc)                  # no bias
    dt    = softplus(dt_proj dt~)                 # (Di,) per step
    h_t   = exp(dt A) h_{t-1} + dt B xc           # A = -exp(A_log), (Di, N)
    y_t   = C h_t + D xc
    out   = out_proj(y * SiLU(z))                 # no bias

Training uses a selective scan over the whole sequence (``scan="sequential"``: a loop over
``torch.unbind`` - the fastest on CPU; ``scan="parallel"``: Hillis-Steele doubling inside
chunks with a sequential carry across chunks, for GPUs). Inference uses the O(1)-per-frame
recurrence :meth:`Mamba.step` with a :class:`MambaState`. All three agree to rounding.

Inference speed (see ``benchmarks/bench_nn.py``): under ``torch.no_grad()``/``inference_mode``
the step reuses a scratch buffer for ``exp(dt A)`` (a fresh multi-megabyte temporary per
frame costs page faults that dominated the batched step), ``step(..., inplace=True)``
overwrites the state instead of allocating a new one (game loops), and
:meth:`Mamba.compile_step` opts in to an inductor-compiled step that fuses the state update,
the C readout and the conv into single C++ loops (falls back to eager with a warning when
compilation fails). With grad enabled the plain out-of-place step runs (training rollouts).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from kinema.nn.layers import Normaliser, RMSNorm

SCANS = ("sequential", "parallel")


@dataclass
class MambaState:
    """Recurrent state of a :class:`Mamba` model, one entry per layer.

    conv: pre-convolution inputs of the last K-1 frames, each (B, Di, K-1) (from
        :meth:`Mamba.initial_state` and :meth:`Mamba.step` stored frame-major, i.e. the
        transpose of a contiguous (B, K-1, Di), so each frame is a contiguous slice).
    h: SSM state, each (B, Di, N).
    """

    conv: list[torch.Tensor]
    h: list[torch.Tensor]

    def detach(self) -> MambaState:
        """The same state cut from the autograd graph (truncated BPTT)."""
        return MambaState([c.detach() for c in self.conv], [h.detach() for h in self.h])

    def reset(self, mask: torch.Tensor) -> MambaState:
        """A new state with the sequences where ``mask`` (B,) bool is True set to zero
        (e.g. characters that respawn); the others are kept."""
        keep = (~mask.to(torch.bool)).to(self.h[0].dtype)[:, None, None]
        return MambaState([c * keep for c in self.conv], [h * keep for h in self.h])

    def select(self, index: torch.Tensor | slice) -> MambaState:
        """The state of a subset of the batch (e.g. characters still alive)."""
        return MambaState([c[index] for c in self.conv], [h[index] for h in self.h])


def scan_sequential(dA: torch.Tensor, dBu: torch.Tensor, C: torch.Tensor,
                    h0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequential selective scan ``h_t = dA_t h_{t-1} + dBu_t``, ``y_t = h_t C_t``.

    Args:
        dA, dBu: (B, L, Di, N). C: (B, L, N). h0: (B, Di, N) or None (zeros).
    Returns:
        y (B, L, Di) without the D skip term, and the last state h_L (B, Di, N).

    Loops over ``torch.unbind`` views: per-step ``x[:, t]`` indexing would make autograd
    allocate a full-size gradient per step (O(L^2) memory traffic).
    """
    h = torch.zeros_like(dBu[:, 0]) if h0 is None else h0
    ys = []
    for a, b, c in zip(dA.unbind(1), dBu.unbind(1), C.unbind(1)):
        h = torch.addcmul(b, a, h)
        ys.append(torch.bmm(h, c.unsqueeze(-1)))
    return torch.stack(ys, 1).squeeze(-1), h


def _doubling(a: torch.Tensor, b: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inclusive Hillis-Steele scan of affine maps along ``dim`` (out of place, autograd-safe).

    Returns (prod of a up to t, h_t with zero initial state)."""
    n = a.shape[dim]
    k = 1
    while k < n:
        a_prev, b_prev = a.narrow(dim, 0, n - k), b.narrow(dim, 0, n - k)
        a_cur, b_cur = a.narrow(dim, k, n - k), b.narrow(dim, k, n - k)
        b = torch.cat([b.narrow(dim, 0, k), a_cur * b_prev + b_cur], dim)
        a = torch.cat([a.narrow(dim, 0, k), a_cur * a_prev], dim)
        k *= 2
    return a, b


def scan_parallel(dA: torch.Tensor, dBu: torch.Tensor, C: torch.Tensor,
                  h0: torch.Tensor | None = None, chunk: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Parallel selective scan: doubling inside chunks of ``chunk`` frames (all chunks at once,
    log2(chunk) steps), then a sequential carry across the L/chunk chunks.

    Same arguments and results as :func:`scan_sequential`; any L (padded internally).
    """
    bsz, length, di, n = dBu.shape
    t = max(1, min(chunk, length))
    pad = (-length) % t
    if pad:
        dA = torch.cat([dA, dA.new_ones(bsz, pad, di, n)], 1)
        dBu = torch.cat([dBu, dBu.new_zeros(bsz, pad, di, n)], 1)
    nc = dA.shape[1] // t
    a_cum, h_loc = _doubling(dA.reshape(bsz, nc, t, di, n), dBu.reshape(bsz, nc, t, di, n), 2)
    carry = torch.zeros_like(dBu[:, 0]) if h0 is None else h0
    if nc == 1:
        h = h_loc[:, 0] + a_cum[:, 0] * carry.unsqueeze(1)
        hs = h.unsqueeze(1)
    else:
        parts = []
        for ac, hl in zip(a_cum.unbind(1), h_loc.unbind(1)):
            h = hl + ac * carry.unsqueeze(1)
            parts.append(h)
            carry = h[:, -1]
        hs = torch.stack(parts, 1)
    hs = hs.reshape(bsz, nc * t, di, n)[:, :length]
    y = torch.einsum("bldn,bln->bld", hs, C)
    return y, hs[:, -1]


def _wide(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32 when it is half or bfloat16 (autocast), else unchanged."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


class MambaMixer(nn.Module):
    """One selective-SSM mixer (no norm, no residual); see the module docstring."""

    def __init__(self, d_model: int, d_inner: int, d_state: int, d_conv: int, dt_rank: int,
                 dt_min: float = 1e-3, dt_max: float = 0.1, dt_floor: float = 1e-4):
        super().__init__()
        self.d_inner, self.d_state, self.d_conv, self.dt_rank = d_inner, d_state, d_conv, dt_rank
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, bias=True)
        self.x_proj = nn.Linear(d_inner, dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(dt_rank, d_inner, bias=True)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(d_inner, 1))
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)
        self.A_log._no_weight_decay = True
        self.D._no_weight_decay = True
        with torch.no_grad():
            bound = dt_rank ** -0.5
            nn.init.uniform_(self.dt_proj.weight, -bound, bound)
            dt = torch.exp(torch.rand(d_inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
            dt = dt.clamp_min(dt_floor)
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus

    def _A(self) -> torch.Tensor:
        """A = -exp(A_log) (Di, N). Without grad it is cached until A_log changes (its
        version counter moves on every in-place update, e.g. an optimizer step)."""
        if torch.is_grad_enabled() or torch.compiler.is_compiling() or self.A_log.is_inference():
            # (inference tensors have no version counter; compiled graphs fold it themselves)
            return -torch.exp(self.A_log)
        key = (self.A_log._version, self.A_log.data_ptr(), self.A_log.dtype, self.A_log.device)
        cache = getattr(self, "_A_cache", None)
        if cache is None or cache[0] != key:
            with torch.inference_mode(False), torch.no_grad():
                cache = (key, -torch.exp(self.A_log))
            self._A_cache = cache
        return cache[1]

    def _ssm_inputs(self, xc: torch.Tensor):
        """dt (..., Di), B (..., N), C (..., N) and xc from the conv output xc (..., Di).

        Under mixed precision (autocast to bf16/fp16) the projections run in low precision
        but everything fed to the recurrence is widened to float32, as in the reference
        implementation: the state accumulates over the whole sequence."""
        dt_low, b, c = self.x_proj(xc).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.softplus(self.dt_proj(dt_low))
        return _wide(dt), _wide(b), _wide(c), _wide(xc)

    def forward(self, u: torch.Tensor, conv: torch.Tensor | None = None, h: torch.Tensor | None = None,
                scan: str = "sequential", chunk: int = 64):
        """u (B, L, D) -> (out (B, L, D), conv state (B, Di, K-1), h (B, Di, N))."""
        bsz, length, _ = u.shape
        xi, z = self.in_proj(u).chunk(2, dim=-1)
        xi = xi.transpose(1, 2)  # (B, Di, L)
        if conv is None:
            conv = xi.new_zeros(bsz, self.d_inner, self.d_conv - 1)
        xcat = torch.cat([conv, xi], dim=2)
        new_conv = xcat[:, :, xcat.shape[2] - (self.d_conv - 1):]
        xc = F.silu(F.conv1d(xcat, self.conv1d.weight, self.conv1d.bias, groups=self.d_inner)).transpose(1, 2)
        dt, b, c, xc = self._ssm_inputs(xc)
        A = -torch.exp(self.A_log)
        dA = torch.exp(dt.unsqueeze(-1) * A)  # (B, L, Di, N)
        dBu = (dt * xc).unsqueeze(-1) * b.unsqueeze(2)
        if scan == "sequential":
            y, h = scan_sequential(dA, dBu, c, h)
        elif scan == "parallel":
            y, h = scan_parallel(dA, dBu, c, h, chunk)
        else:
            raise ValueError(f"unknown scan {scan!r}; expected one of {SCANS}")
        y = y + self.D * xc
        return self.out_proj(y * F.silu(z)), new_conv, h

    def step(self, u: torch.Tensor, conv: torch.Tensor, h: torch.Tensor, inplace: bool = False):
        """One frame: u (B, D), conv (B, Di, K-1), h (B, Di, N) -> (out (B, D), conv, h).

        Without grad (and without autocast) this runs :meth:`_step_inference`, which
        computes the same recurrence with fewer passes over the (B, Di, N) state; with
        ``inplace`` (no grad only) ``conv`` and ``h`` are overwritten and returned."""
        if not torch.is_grad_enabled() and not _autocasting(u):
            return self._step_inference(u, conv, h, inplace)
        if inplace:
            raise ValueError("Mamba step: inplace=True needs torch.no_grad() or inference_mode "
                             "(an in-place state update would break backpropagation)")
        return self.step_functional(u, conv, h)

    def conv_taps(self) -> torch.Tensor:
        """Depthwise conv weight as (K, Di), contiguous: one unit-stride row per tap."""
        return self.conv1d.weight[:, 0].t().contiguous()

    def step_functional(self, u: torch.Tensor, conv: torch.Tensor, h: torch.Tensor,
                        taps: torch.Tensor | None = None):
        """:meth:`step` as plain out-of-place operations (autograd and ``torch.compile``).
        ``taps``: :meth:`conv_taps`, passed in by the compiled step (a graph input keeps
        inductor's loops vectorised; computed here when None)."""
        xi, z = self.in_proj(u).chunk(2, dim=-1)
        k = self.d_conv
        w = self.conv_taps() if taps is None else taps  # (K, Di)
        xc = xi * w[k - 1] + self.conv1d.bias
        for j in range(k - 1):  # taps on (B, Di) slices: contiguous in the frame-major layout
            xc = xc + conv[:, :, j] * w[j]
        new_conv = _shift_window(conv, xi)
        xc = F.silu(xc)
        dt, b, c, xc = self._ssm_inputs(xc)
        dA = dt.unsqueeze(-1) * self._A()  # (B, Di, N), before exp
        h = torch.addcmul((dt * xc).unsqueeze(-1) * b.unsqueeze(1), dA.exp(), h)
        y = torch.bmm(h, c.unsqueeze(-1)).squeeze(-1) + self.D * xc
        return self.out_proj(y * F.silu(z)), new_conv, h

    def _conv_taps(self) -> torch.Tensor:
        """:meth:`conv_taps` without grad, cached until the conv weight changes (as :meth:`_A`)."""
        wt = self.conv1d.weight
        if torch.compiler.is_compiling() or wt.is_inference():
            return self.conv_taps()
        key = (wt._version, wt.data_ptr(), wt.dtype, wt.device)
        cache = getattr(self, "_taps_cache", None)
        if cache is None or cache[0] != key:
            with torch.inference_mode(False), torch.no_grad():
                cache = (key, self.conv_taps())
            self._taps_cache = cache
        return cache[1]

    def _workspace(self, name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """A scratch tensor kept between frames and never returned to the caller: a fresh
        multi-megabyte allocation per frame costs page faults on first touch, which dominate
        the batched step. Keyed on shape, dtype, device and inference mode."""
        key = (shape, like.dtype, like.device, torch.is_inference_mode_enabled())
        spaces = self.__dict__.setdefault("_workspaces", {})
        ws = spaces.get(name)
        if ws is None or ws[0] != key:
            ws = spaces[name] = (key, torch.empty(shape, dtype=like.dtype, device=like.device))
        return ws[1]

    def _step_inference(self, u: torch.Tensor, conv: torch.Tensor, h: torch.Tensor, inplace: bool):
        """:meth:`step` without autograd: the same operations up to the summation order of
        the conv taps and the C readout, fused in place on scratch buffers. Unless
        ``inplace``, the caller's ``conv`` and ``h`` are left untouched."""
        di, r, n, k = self.d_inner, self.dt_rank, self.d_state, self.d_conv
        bsz = u.shape[0]
        xz = self.in_proj(u)
        xi, z = xz[:, :di], xz[:, di:]
        w = self.conv1d.weight[:, 0]  # (Di, K)
        if k > 1:  # the taps on contiguous (B, Di) frames, summed in vecdot's order
            taps = self._conv_taps()
            xc = torch.mul(conv[:, :, 0], taps[0])
            for j in range(1, k - 1):
                xc.add_(torch.mul(conv[:, :, j], taps[j]))
            xc.add_(self.conv1d.bias)
        else:
            xc = self.conv1d.bias.expand(bsz, di).clone()
        xc.addcmul_(xi, w[:, k - 1])
        if not inplace:
            conv = _shift_window(conv, xi)
        elif k > 1:  # shift the window left by one frame, in place
            if k > 2:
                conv[:, :, :k - 2] = conv[:, :, 1:].clone()
            conv[:, :, k - 2].copy_(xi)
        xc = F.silu(xc, inplace=True)
        dbc = self.x_proj(xc)
        dt = F.softplus(self.dt_proj(dbc[:, :r]))
        b, c = dbc[:, r:r + n], dbc[:, r + n:]
        a = self._A()
        dtx = (dt * xc).unsqueeze(-1)
        b, c = b.unsqueeze(1), c.unsqueeze(1)
        h_new = h if inplace else torch.empty_like(h)  # the only (B, Di, N) allocation
        y = xc.new_empty(bsz, di)
        # The (B, Di, N) work in blocks of rows whose temporaries stay in cache: at B = 256
        # a whole-batch pass streams 8 MB per operation through memory (most of the step).
        rows = max(1, _STATE_BLOCK_BYTES // (di * n * h.element_size()))
        space = self._workspace("state", (min(rows, bsz), di, n), h)
        for s in range(0, bsz, rows):
            e = min(bsz, s + rows)
            da = space[:e - s]
            torch.mul(dt[s:e].unsqueeze(-1), a, out=da).exp_()
            hb = h_new[s:e]
            torch.mul(da, h[s:e], out=hb)
            hb.addcmul_(dtx[s:e], b[s:e])
            torch.sum(torch.mul(hb, c[s:e], out=da), -1, out=y[s:e])
        y.addcmul_(self.D, xc)
        return self.out_proj(y.mul_(F.silu(z))), conv, h_new


# Bytes of (rows, Di, N) state per block of the inference step: with its scratch copy a
# block stays within a 2 MB L2 cache.
_STATE_BLOCK_BYTES = 1 << 19


def _shift_window(conv: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
    """The conv window one frame on: conv (B, Di, K-1) without its oldest frame, plus xi
    (B, Di). Stored frame-major ((B, K-1, Di) in memory, seen as (B, Di, K-1)) so that each
    frame's (B, Di) slice is contiguous for the taps and the shift."""
    if conv.shape[2] == 0:
        return conv
    frames = [conv[:, :, j] for j in range(1, conv.shape[2])] + [xi]
    return torch.stack(frames, dim=1).transpose(1, 2)


def _autocasting(t: torch.Tensor) -> bool:
    """Whether autocast is on for ``t``'s device type."""
    return torch.is_autocast_enabled(t.device.type)


class MambaLayer(nn.Module):
    """Pre-norm residual block ``u + mixer(RMSNorm(u))``."""

    def __init__(self, d_model: int, **mixer_args):
        super().__init__()
        self.norm = RMSNorm(d_model)
        self.mixer = MambaMixer(d_model, **mixer_args)


class Mamba(nn.Module):
    """Mamba sequence model with linear input/output heads and normalisation buffers.

    Args:
        input_dim, output_dim: features per frame of the input and output.
        d_model (D), n_layers, d_state (N), d_conv (K), d_inner (Di, default 2 D),
        dt_rank (R, default ceil(D / 16)).
        scan: "sequential" (CPU) or "parallel" (GPU) for :meth:`forward`; chunk: parallel chunk.

    ``forward(x)`` maps raw inputs (B, L, input_dim) to raw outputs (B, L, output_dim): the
    input is normalised and the output denormalised with the ``input_norm``/``output_norm``
    buffers. :meth:`step` does the same for one frame (B, input_dim) in O(1).
    """

    def __init__(self, input_dim: int, output_dim: int, d_model: int = 256, n_layers: int = 4,
                 d_state: int = 16, d_conv: int = 4, d_inner: int | None = None,
                 dt_rank: int | None = None, scan: str = "sequential", chunk: int = 64):
        super().__init__()
        d_inner = 2 * d_model if d_inner is None else d_inner
        dt_rank = math.ceil(d_model / 16) if dt_rank is None else dt_rank
        if scan not in SCANS:
            raise ValueError(f"unknown scan {scan!r}; expected one of {SCANS}")
        self.hparams = dict(input_dim=input_dim, output_dim=output_dim, d_model=d_model,
                            n_layers=n_layers, d_state=d_state, d_conv=d_conv, d_inner=d_inner,
                            dt_rank=dt_rank, scan=scan, chunk=chunk)
        self.scan, self.chunk = scan, chunk
        self._compiled_step = None  # see compile_step
        self.input_norm = Normaliser(input_dim)
        self.output_norm = Normaliser(output_dim)
        self.in_head = nn.Linear(input_dim, d_model)
        self.layers = nn.ModuleList(
            MambaLayer(d_model, d_inner=d_inner, d_state=d_state, d_conv=d_conv, dt_rank=dt_rank)
            for _ in range(n_layers))
        self.norm_f = RMSNorm(d_model)
        self.out_head = nn.Linear(d_model, output_dim)
        with torch.no_grad():
            for layer in self.layers:
                layer.mixer.out_proj.weight.div_(math.sqrt(n_layers))

    def compile_step(self, enabled: bool = True, **options) -> None:
        """Opt in (or out) to a ``torch.compile``'d :meth:`step` for inference (no grad).

        Inductor fuses the per-layer elementwise work into a few C++ loops (it needs a C++
        compiler at the first call of each batch size). If compilation fails, :meth:`step`
        warns once and falls back to the eager step for good. ``options`` go to
        ``torch.compile`` (e.g. ``mode="max-autotune-no-cudagraphs"``)."""
        if not enabled:
            self._compiled_step = None
            return
        self._compiled_step = tuple(
            torch.compile(fn, dynamic=False, fullgraph=True, **options)
            for fn in (self._step_graph, self._step_graph_inplace))

    def _step_graph(self, x: torch.Tensor, convs: list[torch.Tensor], hs: list[torch.Tensor],
                    taps: list[torch.Tensor]):
        """Functional body of :meth:`step` traced by :meth:`compile_step`."""
        u = self.in_head(self.input_norm.normalise(x))
        new_convs, new_hs = [], []
        for layer, c, h, w in zip(self.layers, convs, hs, taps):
            out, c, h = layer.mixer.step_functional(layer.norm(u), c, h, w)
            u = u + out
            new_convs.append(c)
            new_hs.append(h)
        return self.output_norm.denormalise(self.out_head(self.norm_f(u))), new_convs, new_hs

    def _step_graph_inplace(self, x: torch.Tensor, convs: list[torch.Tensor], hs: list[torch.Tensor],
                            taps: list[torch.Tensor]):
        """:meth:`_step_graph` writing the new state into ``convs``/``hs`` (inductor fuses the
        write-back into its loops, so the state is never allocated anew)."""
        y, new_convs, new_hs = self._step_graph(x, convs, hs, taps)
        for dst, src in zip(convs + hs, new_convs + new_hs):
            dst.copy_(src)
        return y

    def _run_compiled(self, state: MambaState, x: torch.Tensor, inplace: bool):
        """The compiled step, or None after a compilation failure (then eager for good)."""
        taps = [layer.mixer.conv_taps() for layer in self.layers]
        try:
            if inplace:
                return self._compiled_step[1](x, state.conv, state.h, taps), state
            y, convs, hs = self._compiled_step[0](x, list(state.conv), list(state.h), taps)
        except Exception as exc:  # no C++ compiler, unsupported backend, ...: stay correct
            warnings.warn(f"Mamba.compile_step: torch.compile failed ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}); using the eager step",
                          RuntimeWarning, stacklevel=3)
            self._compiled_step = None
            return None
        return y, MambaState(convs, hs)

    def initial_state(self, batch: int = 1) -> MambaState:
        """Zero state for ``batch`` sequences (dtype/device of the parameters)."""
        p = self.norm_f.weight  # never quantised
        hp = self.hparams
        conv = [p.new_zeros(batch, hp["d_conv"] - 1, hp["d_inner"]).transpose(1, 2)  # frame-major
                for _ in self.layers]
        h = [p.new_zeros(batch, hp["d_inner"], hp["d_state"]) for _ in self.layers]
        return MambaState(conv, h)

    def forward_with_state(self, x: torch.Tensor, state: MambaState | None = None,
                           scan: str | None = None) -> tuple[torch.Tensor, MambaState]:
        """x (B, L, input_dim) from ``state`` (zeros if None) -> (y (B, L, output_dim), last state)."""
        scan = scan or self.scan
        u = self.in_head(self.input_norm.normalise(x))
        convs, hs = [], []
        for i, layer in enumerate(self.layers):
            c0 = None if state is None else state.conv[i]
            h0 = None if state is None else state.h[i]
            out, c, h = layer.mixer(layer.norm(u), c0, h0, scan, self.chunk)
            u = u + out
            convs.append(c)
            hs.append(h)
        y = self.output_norm.denormalise(self.out_head(self.norm_f(u)))
        return y, MambaState(convs, hs)

    def forward(self, x: torch.Tensor, state: MambaState | None = None, scan: str | None = None) -> torch.Tensor:
        """x (B, L, input_dim) -> y (B, L, output_dim); see :meth:`forward_with_state`."""
        return self.forward_with_state(x, state, scan)[0]

    def training_loss(self, x: torch.Tensor, y: torch.Tensor, state: MambaState | None = None):
        """Teacher-forced MSE in normalised output units: x (B, L, in), y (B, L, out)."""
        pred = self(x, state)
        loss = F.mse_loss(self.output_norm.normalise(pred), self.output_norm.normalise(y))
        return loss, {"mse": loss.detach()}

    def step(self, state: MambaState, x: torch.Tensor,
             inplace: bool = False) -> tuple[torch.Tensor, MambaState]:
        """One frame x (B, input_dim) -> (y (B, output_dim), new state); O(1) in time.

        ``inplace=True`` (under ``torch.no_grad()``/``inference_mode`` only) overwrites
        ``state`` and returns it: no per-frame allocation of the (B, Di, N) states, which is
        what a game loop stepping many characters wants. Otherwise ``state`` is untouched.
        """
        if self._compiled_step is not None and not torch.is_grad_enabled() and not _autocasting(x):
            result = self._run_compiled(state, x, inplace)
            if result is not None:
                return result
        u = self.in_head(self.input_norm.normalise(x))
        convs, hs = [], []
        for layer, c, h in zip(self.layers, state.conv, state.h):
            out, c, h = layer.mixer.step(layer.norm(u), c, h, inplace)
            u = u + out
            convs.append(c)
            hs.append(h)
        y = self.output_norm.denormalise(self.out_head(self.norm_f(u)))
        if inplace:
            return y, state
        return y, MambaState(convs, hs)

    def rollout_steps(self, x: torch.Tensor, state: MambaState | None = None) -> torch.Tensor:
        """Run :meth:`step` frame by frame over x (B, L, input_dim) (the slow reference)."""
        state = self.initial_state(x.shape[0]) if state is None else state
        ys = []
        for xt in x.unbind(1):
            y, state = self.step(state, xt)
            ys.append(y)
        return torch.stack(ys, 1)
