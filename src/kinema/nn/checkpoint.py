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
(:mod:`kinema.io.atomic`: temporary file in the same folder, fsync, rename). Reads check
the header against the file size and :mod:`kinema.limits` and build the model on the
``meta`` device first, so nothing is allocated for sizes the file does not hold.
"""
from __future__ import annotations

import json
import math
import platform
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kinema._version import __version__
from kinema.errors import CheckpointError, LimitError
from kinema.io import atomic
from kinema.io.validate import parse_json
from kinema.limits import DEFAULT, Limits
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

    return {"kinema": __version__, "torch": torch.__version__,
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


def decode_state(obj: Any, tensors: dict[str, torch.Tensor], path: Path | str = "<checkpoint>") -> Any:
    """Inverse of :func:`encode_state`; a reference to a tensor the file lacks raises
    :class:`CheckpointError` naming ``path``."""
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            name = obj["__tensor__"]
            if not isinstance(name, str) or name not in tensors:
                raise CheckpointError(f"{path}: training state refers to tensor {name!r}, which the "
                                      "file does not hold")
            return tensors[name]
        if "__items__" in obj:
            items = obj["__items__"]
            if not isinstance(items, list) or not all(isinstance(i, list) and len(i) == 2 for i in items):
                raise CheckpointError(f"{path}: malformed training state ('__items__' is not a list of pairs)")
            try:
                return {decode_state(k, tensors, path): decode_state(v, tensors, path) for k, v in items}
            except TypeError as e:        # an unhashable key
                raise CheckpointError(f"{path}: malformed training state ({e})") from None
        if "__tuple__" in obj:
            if not isinstance(obj["__tuple__"], list):
                raise CheckpointError(f"{path}: malformed training state ('__tuple__' is not a list)")
            return tuple(decode_state(v, tensors, path) for v in obj["__tuple__"])
        return {k: decode_state(v, tensors, path) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_state(v, tensors, path) for v in obj]
    return obj


def save_checkpoint(path: str | Path, model: nn.Module, *, training_state: dict | None = None,
                    **meta: Any) -> Path:
    """Write ``model`` (and an optional training state) to ``path`` atomically.

    Keyword metadata: ``config``, ``normalisation``, ``loss_weights``, ``fingerprint`` and
    any other JSON-serialisable entries. Returns the path.
    """
    from safetensors.torch import save

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
    atomic.write_bytes(path, save(tensors, metadata=metadata))
    return path


# safetensors dtype name -> bytes per element
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
                "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


def _header(path: Path, limits: Limits) -> tuple[dict[str, str], dict[str, tuple[int, ...]]]:
    """Metadata strings and ``{tensor name: shape}`` from a safetensors header, validated
    against the file size (every tensor's bytes inside the file) before any tensor is read."""
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(16)
        if head[8:9] != b"{" and head.startswith(_PICKLE_MAGICS):  # safetensors: u64 size, then JSON
            raise CheckpointError(f"{path}: this is a pickle/torch.save file; kinema loads only "
                                  "safetensors checkpoints (pickles can run arbitrary code)")
        if len(head) < 8:
            raise CheckpointError(f"{path}: not a valid safetensors checkpoint ({size} bytes)")
        n = int.from_bytes(head[:8], "little")
        if n > limits.max_json_bytes:
            raise LimitError(f"{path}: safetensors header of {n} bytes, over {limits.max_json_bytes}",
                             None, "max_json_bytes")
        if 8 + n > size:
            raise CheckpointError(f"{path}: not a valid safetensors checkpoint (header of {n} bytes in "
                                  f"a {size}-byte file: truncated?)")
        f.seek(8)
        header = parse_json(f.read(n), path, "safetensors header", limits, CheckpointError)
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: safetensors header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(f"{path}: safetensors metadata must map names to strings")
    return metadata, _tensor_shapes(header, size - 8 - n, path, limits)


def _tensor_shapes(header: dict, data_bytes: int, path: Path, limits: Limits) -> dict[str, tuple[int, ...]]:
    """``{name: shape}`` of the header's tensor entries, each checked to lie in the data."""
    shapes, total = {}, 0
    for name, entry in header.items():
        ok = isinstance(entry, dict) and entry.get("dtype") in _DTYPE_BYTES \
            and isinstance(entry.get("shape"), list) and isinstance(entry.get("data_offsets"), list) \
            and all(isinstance(d, int) and d >= 0 for d in entry["shape"]) \
            and len(entry["data_offsets"]) == 2 and all(isinstance(d, int) for d in entry["data_offsets"])
        if not ok:
            raise CheckpointError(f"{path}: malformed safetensors entry for tensor {name!r}")
        numel = 1
        for d in entry["shape"]:
            numel *= d
        start, stop = entry["data_offsets"]
        if not 0 <= start <= stop <= data_bytes or stop - start != numel * _DTYPE_BYTES[entry["dtype"]]:
            raise CheckpointError(f"{path}: tensor {name!r} {entry['shape']} does not fit its bytes "
                                  f"{start}..{stop} of {data_bytes} (truncated or corrupted)")
        total += stop - start
        if stop - start > limits.max_array_bytes:
            raise LimitError(f"{path}: tensor {name!r} holds {stop - start} bytes, over "
                             f"{limits.max_array_bytes}", None, "max_array_bytes")
        shapes[name] = tuple(entry["shape"])
    if total > limits.max_total_bytes:
        raise LimitError(f"{path}: tensors hold {total} bytes, over {limits.max_total_bytes}", None,
                         "max_total_bytes")
    return shapes


def _read(path: Path, limits: Limits = DEFAULT) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    """Raw metadata and tensors of a safetensors file, refusing pickles and garbage."""
    metadata, _ = _header(path, limits)
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a kinema checkpoint (format {metadata.get('format')!r}, "
                              f"expected {FORMAT!r})")
    return metadata, _tensors(path)


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as e:  # safetensors raises its own error types for bad headers/sizes
        raise CheckpointError(f"{path}: not a valid safetensors checkpoint (corrupted or "
                              f"truncated?): {e}") from e


def _kinema_header(path: Path, limits: Limits) -> tuple[dict, dict]:
    """(decoded metadata, tensor shapes) of a kinema checkpoint; CheckpointError names any
    other safetensors file."""
    raw, shapes = _header(path, limits)
    if raw.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a kinema checkpoint (format {raw.get('format')!r}, "
                              f"expected {FORMAT!r})")
    return _decode_header(path, raw, limits), shapes


def read_metadata(path: str | Path, require: tuple[str, ...] = (), limits: Limits = DEFAULT) -> dict[str, Any]:
    """The decoded JSON header of a checkpoint (without building the model or reading
    its tensors).

    Args:
        require: metadata entries that must be JSON objects (e.g. ``("config",)`` for a
            command that needs the training config); CheckpointError names a missing one.
    """
    path = Path(path)
    meta, _ = _kinema_header(path, limits)
    for key in require:
        if not isinstance(meta.get(key), dict):
            raise CheckpointError(f"{path}: checkpoint metadata {key!r} is "
                                  f"{'missing' if meta.get(key) is None else type(meta[key]).__name__}, "
                                  "expected a JSON object")
    return meta


def _decode_header(path: Path, metadata: dict[str, str], limits: Limits = DEFAULT) -> dict[str, Any]:
    out: dict[str, Any] = {"format": metadata["format"]}
    for k, v in metadata.items():
        if k == "format":
            continue
        out[k] = parse_json(v, path, f"metadata entry {k!r}", limits, CheckpointError)
    if not isinstance(out.get("architecture"), dict):
        raise CheckpointError(f"{path}: checkpoint has no 'architecture' metadata")
    return out


_BUILD_ERRORS = (TypeError, ValueError, RuntimeError, OverflowError, KeyError, IndexError, AttributeError,
                 ZeroDivisionError)


def _construct(cls: type[nn.Module], hparams: dict, name: str, path, device: str | None = None) -> nn.Module:
    try:
        if device is None:
            return cls(**hparams)
        with torch.device(device):
            return cls(**hparams)
    except _BUILD_ERRORS as e:
        raise CheckpointError(f"{path}: cannot build {name} from its hyper-parameters: "
                              f"{type(e).__name__}: {e}") from None


def build_model(arch: dict, path: Path | str = "<checkpoint>", limits: Limits = DEFAULT,
                shapes: dict[str, tuple[int, ...]] | None = None) -> nn.Module:
    """Instantiate the model described by an ``architecture`` entry.

    The model is first built on PyTorch's ``meta`` device (no memory): its parameter count
    is checked against ``limits.max_model_parameters`` and, when ``shapes`` (the file's
    ``{name: shape}`` without the ``model.`` prefix) is given, its state-dict names and
    shapes against the file's, so a header asking for huge layers is refused before any
    allocation.
    """
    name = arch.get("class") if isinstance(arch, dict) else None
    cls = MODEL_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CheckpointError(f"{path}: unknown model class {name!r}; known: {sorted(MODEL_CLASSES)}")
    hparams = arch.get("hparams", {})
    if not isinstance(hparams, dict):
        raise CheckpointError(f"{path}: hparams of {name} must be a JSON object")
    dtype = getattr(torch, str(arch.get("dtype", "float32")), None)
    if not isinstance(dtype, torch.dtype):
        raise CheckpointError(f"{path}: unknown dtype {arch.get('dtype')!r}")
    ghost = _construct(cls, hparams, name, path, "meta")
    expected = {k: tuple(v.shape) for k, v in ghost.state_dict().items()}
    count = sum(math.prod(v) for v in expected.values())
    if count > limits.max_model_parameters:
        raise LimitError(f"{path}: {name} with these hyper-parameters has {count} parameters, over "
                         f"{limits.max_model_parameters}", None, "max_model_parameters")
    if shapes is not None:
        _match_shapes(expected, shapes, name, path)
    return _construct(cls, hparams, name, path).to(dtype)


def _match_shapes(expected: dict[str, tuple], state: dict[str, tuple], name: str, path) -> None:
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not match {name}: "
                              f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    bad = [(k, v, expected[k]) for k, v in state.items() if v != expected[k]]
    if bad:
        raise CheckpointError(f"{path}: tensor shapes do not match the architecture: {bad[:5]}")


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu",
                    limits: Limits = DEFAULT, fingerprint: str | None = None) -> tuple[nn.Module, dict]:
    """Rebuild the model stored at ``path`` from its metadata alone.

    Returns ``(model in eval mode, metadata)``; ``metadata`` is the decoded header (keys of
    the module docstring), with ``training_state`` decoded to tensors when present.
    Raises :class:`kinema.errors.CheckpointError` on pickles, corrupted files, unknown
    classes, weights that do not match the architecture or are not finite, and (as
    :class:`kinema.errors.LimitError`, also a CheckpointError) sizes over ``limits``; with
    ``fingerprint``, also when the checkpoint was trained on another database (its metadata's
    ``fingerprint``), before any weight is read.
    """
    path = Path(path)
    meta, shapes = _kinema_header(path, limits)
    if fingerprint is not None and meta.get("fingerprint") != fingerprint:
        raise CheckpointError(f"{path}: trained on database {meta.get('fingerprint')}, got {fingerprint}")
    model_shapes = {k[len("model."):]: v for k, v in shapes.items() if k.startswith("model.")}
    model = build_model(meta["architecture"], path, limits, model_shapes)
    tensors = _tensors(path)
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    for k, v in state.items():
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            raise CheckpointError(f"{path}: weight {k!r} holds NaN or infinite values")
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise CheckpointError(f"{path}: weights do not load into {meta['architecture']['class']}: {e}") from None
    model.to(map_location).eval()
    if "training_state" in meta:
        meta["training_state"] = decode_state(meta["training_state"], tensors, path)
    return model, meta
