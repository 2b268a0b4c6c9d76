"""Post-training dynamic int8 quantisation for CPU inference (``torch.ao``).

Linear layers get int8 weights and quantise activations on the fly; everything else (norms,
the Mamba scan, convolutions, normalisation buffers) stays float32. Measure accuracy and
speed against float32 with ``benchmarks/bench_nn.py``.
"""
from __future__ import annotations

import copy
import warnings

import torch
from torch import nn


def quantize_dynamic(model: nn.Module, dtype: torch.dtype = torch.qint8) -> nn.Module:
    """An eval-mode copy of ``model`` with every ``nn.Linear`` dynamically quantised.

    The original model is left untouched. The result runs on CPU only and is for inference
    (it cannot be trained or saved as a kinema checkpoint; save the float model instead).
    """
    with torch.inference_mode(False), warnings.catch_warnings():
        float_model = copy.deepcopy(model).float().cpu().eval()
        # torch.ao eager quantisation is marked deprecated but still ships with the pinned torch
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return torch.ao.quantization.quantize_dynamic(float_model, {nn.Linear}, dtype=dtype)


def count_quantized(model: nn.Module) -> int:
    """Number of dynamically quantised Linear modules inside ``model``."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear
    return sum(isinstance(m, DynamicLinear) for m in model.modules())
