"""Write one maths function for NumPy arrays and torch tensors.

kinema.maths functions take either library's arrays and return the same kind. torch is
imported lazily (only when a tensor is passed), so NumPy-only users never import it: this
module finds torch in ``sys.modules`` and never imports it itself.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

Array = Any  # np.ndarray | torch.Tensor


def is_torch(x: Array) -> bool:
    """True when ``x`` is a torch tensor (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def xp(x: Array):
    """The array module for ``x``: ``torch`` for tensors, ``numpy`` otherwise."""
    if is_torch(x):
        return sys.modules["torch"]
    return np


def asarray(x: Array, like: Array | None = None) -> Array:
    """``x`` as an array of the same library, dtype and device as ``like``.

    Without ``like``: tensors pass through, anything else becomes a float NumPy array
    (float64 unless already floating). With a NumPy ``like``, the result is floating
    (``like``'s dtype promoted with float32).
    """
    if like is not None and is_torch(like):
        torch = sys.modules["torch"]
        return torch.as_tensor(x, dtype=like.dtype, device=like.device)
    if is_torch(x):
        return x
    x = np.asarray(x)
    if like is not None:
        return x.astype(np.result_type(like.dtype, np.float32), copy=False)
    return x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64)


def promote(*xs: Array) -> tuple[Array, ...]:
    """Bring arguments to one library.

    When any is a tensor, all become tensors with the dtype and device of the first tensor.
    Otherwise NumPy arrays keep their own float dtype and Python scalars or lists take the
    dtype of the first NumPy array (so a float ``t`` does not turn float32 into float64).
    """
    first = next((x for x in xs if is_torch(x)), None)
    if first is None:
        ref = next((x for x in xs if isinstance(x, np.ndarray)), None)
        return tuple(asarray(x) if isinstance(x, np.ndarray) or ref is None else asarray(x, like=ref)
                     for x in xs)
    return tuple(x if is_torch(x) else asarray(x, like=first) for x in xs)


def stack(xs: list[Array], axis: int = -1) -> Array:
    """Stack arrays of one library along a new axis."""
    if is_torch(xs[0]):
        return sys.modules["torch"].stack(xs, dim=axis)
    return np.stack(xs, axis=axis)


def cat(xs: list[Array], axis: int = -1) -> Array:
    """Concatenate arrays of one library along an existing axis."""
    if is_torch(xs[0]):
        return sys.modules["torch"].cat(xs, dim=axis)
    return np.concatenate(xs, axis=axis)


def cross(a: Array, b: Array) -> Array:
    """Cross product over the last axis (size 3), broadcasting leading dims."""
    ax, ay, az = a[..., 0], a[..., 1], a[..., 2]
    bx, by, bz = b[..., 0], b[..., 1], b[..., 2]
    return stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], axis=-1)


def dot(a: Array, b: Array, keepdims: bool = False) -> Array:
    """Dot product over the last axis."""
    d = (a * b).sum(-1)
    return d[..., None] if keepdims else d


def norm(x: Array, keepdims: bool = False) -> Array:
    """Euclidean norm over the last axis."""
    return xp(x).sqrt(dot(x, x, keepdims=keepdims))


def unit(x: Array, eps: float = 1e-12) -> Array:
    """Unit vectors (..., D) along ``x`` (..., D); a vector shorter than ``eps`` is divided
    by ``eps`` (stays near zero) instead of by its length."""
    n = norm(x, keepdims=True)
    return x / (n.clamp_min(eps) if is_torch(n) else np.maximum(n, eps))


def where(cond: Array, a: Array, b: Array) -> Array:
    """Elementwise ``a if cond else b`` (broadcasting)."""
    return xp(a).where(cond, a, b)


def clip(x: Array, lo: float, hi: float) -> Array:
    """Clamp ``x`` to ``[lo, hi]``."""
    if is_torch(x):
        return x.clamp(lo, hi)
    return np.clip(x, lo, hi)


def broadcast_to(x: Array, shape: tuple[int, ...]) -> Array:
    """View of ``x`` broadcast to ``shape``."""
    if is_torch(x):
        return x.expand(shape)
    return np.broadcast_to(x, shape)


def eps(x: Array) -> float:
    """Machine epsilon of ``x``'s floating dtype."""
    return float(xp(x).finfo(x.dtype).eps)


def tiny(x: Array) -> float:
    """Smallest positive normal number of ``x``'s floating dtype (below it, precision is lost)."""
    return float(xp(x).finfo(x.dtype).tiny)


def moveaxis(x: Array, source: int, destination: int) -> Array:
    """Move one axis of ``x`` to a new position."""
    if is_torch(x):
        return x.movedim(source, destination)
    return np.moveaxis(x, source, destination)


def take_along(x: Array, index: Array, axis: int) -> Array:
    """``numpy.take_along_axis`` for both libraries (``index`` broadcasts against ``x``)."""
    if is_torch(x):
        return sys.modules["torch"].take_along_dim(x, index, dim=axis)
    return np.take_along_axis(x, index, axis=axis)


def matmul_vec(m: Array, v: Array) -> Array:
    """Matrices (..., N, M) times vectors (..., M) -> (..., N), broadcasting leading dims."""
    return (m @ v[..., None])[..., 0]


def transpose(m: Array) -> Array:
    """Swap the last two axes."""
    return m.swapaxes(-1, -2)
