"""Feature normalisation: mean and std statistics, per dimension or one scale per group.

``normalise(x) = (x - mean) / std`` (times ``weight`` when the normaliser carries per-column
weights), ``denormalise`` its inverse. Statistics are computed in the dtype of the data they
are fitted to (pass float64 data for float64 sums) and stored in ``dtype``; ``normalise``
and ``denormalise`` compute in NumPy's promotion of their input and the statistics (cast
float64 input to float32 first for float32 arithmetic); ``normalise`` returns float32,
``denormalise`` the statistics' dtype.

One normaliser serves every user: the matching database (one scale per feature group, the
group's weight folded in, so a group's weight is its share of the squared distance), the
dog's database (one pooled std per group, weights applied after), the feature datasets
(per dimension, from streamed moments) and the retrieval model's pose statistics (per
dimension, floored). :class:`kinema.nn.layers.Normaliser` holds the same statistics as
torch buffers.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Group = tuple  # (name, start, stop, weight) as in a feature layout, or (start, stop, weight)


def _span(group: Group) -> tuple[int, int, float]:
    """(start, stop, weight) of a layout entry ``(name, start, stop, weight)`` or ``(start, stop, weight)``."""
    a, b, w = group[-3:]
    return int(a), int(b), float(w)


@dataclass(frozen=True)
class Normaliser:
    """Mean (D,) and std (D,) of features, optionally per-column weights (D,).

    Attributes:
        mean: (D,) subtracted first.
        std: (D,) divided by next (positive).
        weight: (D,) multiplied last, or None (weights folded into ``std`` or none).
    """

    mean: np.ndarray
    std: np.ndarray
    weight: np.ndarray | None = None

    @classmethod
    def fit(cls, data: np.ndarray, groups: Sequence[Group] | None = None, *, pooled: bool = False,
            floor: float = 0.0, eps: float = 0.0, fold_weights: bool = True, dtype=np.float32) -> Normaliser:
        """Statistics of ``data`` (N, D) over its rows.

        Args:
            groups: None for a std per dimension, or the feature groups
                (``(name, start, stop, weight)`` as in a layout) for one scale per group:
                the mean of its dimensions' stds (a group that does not vary, mean std at
                most 1e-8, gets 1), or with ``pooled`` the std of all the group's values.
            floor: std at least ``floor`` (constant dimensions stay finite).
            eps: added to every std after the floor.
            fold_weights: divide each group's scale by its weight (at least 1e-8), so the
                normalised group's mean std is its weight; otherwise keep the weights in
                :attr:`weight`, applied after the division.
            dtype: dtype of the stored statistics.
        """
        data = np.asarray(data)
        mean = data.mean(axis=0)
        if groups is None:
            std = data.std(axis=0)
        else:
            per_dim = None if pooled else data.std(axis=0)
            std = np.ones(data.shape[1], data.dtype)
            for g in groups:
                a, b, _w = _span(g)
                if pooled:
                    std[a:b] = data[:, a:b].std()
                else:
                    s = float(per_dim[a:b].mean())
                    std[a:b] = s if s > 1e-8 else 1.0
        std = np.maximum(std, floor) + eps if (floor or eps) else std
        weight = None
        if groups is not None:
            w = np.ones(data.shape[1])
            for g in groups:
                a, b, wg = _span(g)
                w[a:b] = wg
            if fold_weights:
                std = std / np.maximum(w, 1e-8)
            else:
                weight = w.astype(dtype)
        return cls(mean.astype(dtype), std.astype(dtype), weight)

    @classmethod
    def from_moments(cls, count: int, total: np.ndarray, squares: np.ndarray, floor: float = 0.0,
                     dtype=np.float32) -> Normaliser:
        """Per-dimension statistics from streamed sums: ``count`` rows, their sum (D,) and
        sum of squares (D,) (accumulate them in float64); std at least ``floor``."""
        mean = np.asarray(total) / count
        std = np.sqrt(np.maximum(np.asarray(squares) / count - mean ** 2, 0)).astype(dtype)
        return cls(mean.astype(dtype), np.maximum(std, floor) if floor else std)

    @property
    def width(self) -> int:
        return int(self.mean.shape[-1])

    def normalise(self, x: np.ndarray) -> np.ndarray:
        """Raw features (..., D) -> normalised, float32 (what search and networks take);
        computed in the promoted dtype of ``x`` and the statistics."""
        out = np.subtract(x, self.mean)         # a new array: the rest works in place
        out /= self.std
        if self.weight is not None:
            out *= self.weight
        return out.astype(np.float32, copy=False)

    def denormalise(self, x: np.ndarray) -> np.ndarray:
        """Normalised features (..., D) -> raw units, in the statistics' dtype (computed in
        the promoted dtype of ``x`` and the statistics)."""
        x = np.asarray(x)
        if self.weight is not None:
            x = x / self.weight
        out = x * self.std
        out += self.mean
        return out.astype(self.mean.dtype, copy=False)

    def to_json(self) -> dict:
        """``{"mean": [...], "std": [...]}`` (and ``"weight"``), for checkpoint metadata."""
        d = {"mean": self.mean.tolist(), "std": self.std.tolist()}
        if self.weight is not None:
            d["weight"] = self.weight.tolist()
        return d

    @classmethod
    def from_json(cls, d: dict, dtype=np.float32) -> Normaliser:
        """The inverse of :meth:`to_json`."""
        w = d.get("weight")
        return cls(np.asarray(d["mean"], dtype), np.asarray(d["std"], dtype),
                   None if w is None else np.asarray(w, dtype))
