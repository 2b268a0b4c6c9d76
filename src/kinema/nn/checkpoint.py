"""Model checkpoints as safetensors files (never pickle).

A checkpoint holds the model's ``state_dict`` (parameters and normalisation buffers) under
``model.<name>`` and, optionally, a training state (optimizer, scheduler, RNG, counters)
under ``train.<i>``. The safetensors metadata header holds JSON strings:

- ``format``: ``"kinema-checkpoint/1"``
- ``architecture``: ``{"class": name in MODEL_CLASSES, "hparams": {...}, "dtype": "float32"}``
- ``config``, ``normalisation``, ``loss_weights``, ``fingerprint``: whatever the caller gave
  (JSON-serialisable), ``null`` when absent
- ``versions``: kinema, torch, safetensors, numpy and Python versions at save time
- ``training_state``: JSON skeleton of the training state (tensors replaced by references)

:func:`load_checkpoint` rebuilds the model from the header alone. Writes are atomic
(temporary file in the same folder, then rename).
"""
from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kinema.errors import CheckpointError
from kinema.nn.mamba import Mamba
from kinema.nn.models import MLP, Autoencoder, CodebookMatching, SequenceMLP
from kinema.nn.retrieval import RetrievalMamba
from kinema.nn.retrieval_concat import ConcatRetrievalMamba

FORMAT = "kinema-checkpoint/1"
META_KEYS = ("config", "normalisation", "loss_weights", "fingerprint")

# Constant registry: class name stored in a checkpoint -> class rebuilt on load.
MODEL_CLASSES: dict[str, type[nn.Module]] = {
    "Mamba": Mamba,
    "MLP": MLP,
    "SequenceMLP": SequenceMLP,
    "Autoencoder": Autoencoder,
    "CodebookMatching": CodebookMatching,
    "RetrievalMamba": RetrievalMamba,
    "ConcatRetrievalMamba": ConcatRetrievalMamba,
}

_PICKLE_MAGICS = (b"PK\x03\x04", b"\x80")


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside DistributedDataParallel / TrainingLoss wrappers (or itself)."""
    while hasattr(model, "module") and isinstance(model.module, nn.Module):
        model = model.module
    return model


def architecture(model: nn.Module) -> dict:
    """``{"class", "hparams", "dtype"}`` describing how to rebuild ``model``."""
    model = unwrap(model)
    name = type(model).__name__
    if MODEL_CLASSES.get(name) is not type(model):
        raise CheckpointError(f"cannot checkpoint {name}: not one of {sorted(MODEL_CLASSES)}")
    hparams = getattr(model, "hparams", None)
    if not isinstance(hparams, dict):
        raise CheckpointError(f"cannot checkpoint {name}: the model has no hparams dict")
    dtype = next(model.parameters()).dtype
    return {"class": name, "hparams": hparams, "dtype": str(dtype).removeprefix("torch.")}


def versions() -> dict[str, str]:
    """Library versions recorded in every checkpoint."""
    import numpy
    import safetensors

    import kinema
    return {"kinema": kinema.__version__, "torch": torch.__version__,
            "safetensors": safetensors.__version__, "numpy": numpy.__version__,
            "python": platform.python_version()}


def encode_state(obj: Any, tensors: dict[str, torch.Tensor], prefix: str = "train.") -> Any:
    """JSON skeleton of a nested dict/list/tuple state; tensors go into ``tensors``."""
    if isinstance(obj, torch.Tensor):
        name = f"{prefix}{len(tensors)}"
        tensors[name] = obj.detach().cpu().contiguous().clone()
        return {"__tensor__": name}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: encode_state(v, tensors, prefix) for k, v in obj.items()}
        return {"__items__": [[encode_state(k, tensors, prefix), encode_state(v, tensors, prefix)]
                              for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [encode_state(v, tensors, prefix) for v in obj]}
    if isinstance(obj, list):
        return [encode_state(v, tensors, prefix) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise CheckpointError(f"cannot store a {type(obj).__name__} in a checkpoint's training state")


def decode_state(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """Inverse of :func:`encode_state`."""
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__items__" in obj:
            return {decode_state(k, tensors): decode_state(v, tensors) for k, v in obj["__items__"]}
        if "__tuple__" in obj:
            return tuple(decode_state(v, tensors) for v in obj["__tuple__"])
        return {k: decode_state(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_state(v, tensors) for v in obj]
    return obj


def save_checkpoint(path: str | Path, model: nn.Module, *, training_state: dict | None = None,
                    **meta: Any) -> Path:
    """Write ``model`` (and an optional training state) to ``path`` atomically.

    Keyword metadata: ``config``, ``normalisation``, ``loss_weights``, ``fingerprint`` and
    any other JSON-serialisable entries. Returns the path.
    """
    from safetensors.torch import save_file

    path = Path(path)
    model = unwrap(model)
    arch = architecture(model)
    tensors = {f"model.{k}": v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    header: dict[str, Any] = {key: meta.pop(key, None) for key in META_KEYS}
    header.update(meta)
    header["architecture"] = arch
    header["versions"] = versions()
    if training_state is not None:
        header["training_state"] = encode_state(training_state, tensors)
    try:
        metadata = {k: json.dumps(v) for k, v in header.items()}
    except TypeError as e:
        raise CheckpointError(f"{path}: checkpoint metadata is not JSON-serialisable: {e}") from e
    metadata["format"] = FORMAT
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _read(path: Path) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    """Raw metadata and tensors of a safetensors file, refusing pickles and garbage."""
    from safetensors.torch import load_file
    from safetensors import safe_open

    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    with open(path, "rb") as f:
        head = f.read(16)
    if head[8:9] != b"{" and head.startswith(_PICKLE_MAGICS):  # safetensors: u64 size, then JSON
        raise CheckpointError(f"{path}: this is a pickle/torch.save file; kinema loads only "
                              "safetensors checkpoints (pickles can run arbitrary code)")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
        tensors = load_file(str(path))
    except Exception as e:  # safetensors raises its own error types for bad headers/sizes
        raise CheckpointError(f"{path}: not a valid safetensors checkpoint (corrupted or "
                              f"truncated?): {e}") from e
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a kinema checkpoint (format {metadata.get('format')!r}, "
                              f"expected {FORMAT!r})")
    return metadata, tensors


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The decoded JSON header of a checkpoint (without building the model)."""
    path = Path(path)
    metadata, _ = _read(path)
    return _decode_header(path, metadata)


def _decode_header(path: Path, metadata: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"format": metadata["format"]}
    for k, v in metadata.items():
        if k == "format":
            continue
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError as e:
            raise CheckpointError(f"{path}: metadata entry {k!r} is not valid JSON: {e}") from e
    if "architecture" not in out:
        raise CheckpointError(f"{path}: checkpoint has no 'architecture' metadata")
    return out


def build_model(arch: dict, path: Path | str = "<checkpoint>") -> nn.Module:
    """Instantiate the model described by an ``architecture`` entry."""
    name = arch.get("class") if isinstance(arch, dict) else None
    cls = MODEL_CLASSES.get(name)
    if cls is None:
        raise CheckpointError(f"{path}: unknown model class {name!r}; known: {sorted(MODEL_CLASSES)}")
    try:
        model = cls(**arch.get("hparams", {}))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot build {name} from its hyper-parameters: {e}") from e
    dtype = getattr(torch, str(arch.get("dtype", "float32")), None)
    if not isinstance(dtype, torch.dtype):
        raise CheckpointError(f"{path}: unknown dtype {arch.get('dtype')!r}")
    return model.to(dtype)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> tuple[nn.Module, dict]:
    """Rebuild the model stored at ``path`` from its metadata alone.

    Returns ``(model in eval mode, metadata)``; ``metadata`` is the decoded header (keys of
    the module docstring), with ``training_state`` decoded to tensors when present.
    Raises :class:`kinema.errors.CheckpointError` on pickles, corrupted files, unknown
    classes, or weights that do not match the architecture.
    """
    path = Path(path)
    raw, tensors = _read(path)
    meta = _decode_header(path, raw)
    model = build_model(meta["architecture"], path)
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not match {meta['architecture']['class']}: "
                              f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    bad = [(k, tuple(v.shape), tuple(expected[k].shape)) for k, v in state.items() if v.shape != expected[k].shape]
    if bad:
        raise CheckpointError(f"{path}: tensor shapes do not match the architecture: {bad[:5]}")
    model.load_state_dict(state)
    model.to(map_location).eval()
    if "training_state" in meta:
        meta["training_state"] = decode_state(meta["training_state"], tensors)
    return model, meta
