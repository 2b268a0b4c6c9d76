"""Safetensors checkpoints: round trip, metadata, atomic writes, and refusal of pickles,
corrupted and mismatched files."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from kinema.errors import CheckpointError
from kinema.nn.checkpoint import FORMAT, load_checkpoint, read_metadata, save_checkpoint
from kinema.nn.mamba import Mamba
from kinema.nn.models import MLP, Autoencoder, CodebookMatching, SequenceMLP


def _models():
    torch.manual_seed(0)
    return [
        (Mamba(6, 5, d_model=16, n_layers=2, d_state=4), torch.randn(2, 7, 6)),
        (MLP(6, 5, hidden=(16, 16), gated=True), torch.randn(3, 6)),
        (SequenceMLP(6, 5, horizon=4, hidden=(16,)), torch.randn(3, 6)),
        (Autoencoder(6, 3, hidden=(16,), variational=True), torch.randn(3, 6)),
        (CodebookMatching(6, 5, channels=3, classes=4, hidden=(16,)), torch.randn(3, 6)),
    ]


@pytest.mark.parametrize("index", range(5))
def test_round_trip_gives_identical_outputs(tmp_path, index):
    model, x = _models()[index]
    norms = [m for m in model.modules() if hasattr(m, "mean") and hasattr(m, "std")]
    for n in norms:  # non-trivial normalisation must be persisted and restored
        n.set(torch.randn(n.dim), torch.rand(n.dim) + 0.5)
    model.eval()
    kwargs = {"greedy": True} if isinstance(model, CodebookMatching) else {}
    with torch.no_grad():
        y = model(x, **kwargs)
    path = save_checkpoint(tmp_path / "m.safetensors", model, config={"lr": 1e-3},
                           normalisation={"source": "test"}, loss_weights={"pose": 1.0},
                           fingerprint="abc123")
    loaded, meta = load_checkpoint(path)
    assert type(loaded) is type(model)
    with torch.no_grad():
        y2 = loaded(x, **kwargs)
    assert torch.equal(y, y2)
    for n, n2 in zip(norms, [m for m in loaded.modules() if hasattr(m, "mean") and hasattr(m, "std")]):
        assert torch.equal(n.mean, n2.mean) and torch.equal(n.std, n2.std)
    assert meta["architecture"]["class"] == type(model).__name__
    assert meta["config"] == {"lr": 1e-3} and meta["loss_weights"] == {"pose": 1.0}
    assert meta["normalisation"] == {"source": "test"} and meta["fingerprint"] == "abc123"
    assert set(meta["versions"]) >= {"kinema", "torch", "safetensors"}


def test_metadata_is_plain_json_in_safetensors_header(tmp_path):
    model = MLP(4, 2, hidden=(8,))
    path = save_checkpoint(tmp_path / "a" / "m.safetensors", model)
    header_len = int.from_bytes(path.read_bytes()[:8], "little")
    header = json.loads(path.read_bytes()[8:8 + header_len])
    assert header["__metadata__"]["format"] == FORMAT
    arch = json.loads(header["__metadata__"]["architecture"])
    assert arch == {"class": "MLP", "hparams": model.hparams, "dtype": "float32"}
    assert read_metadata(path)["config"] is None


def test_float64_model_keeps_dtype(tmp_path):
    model = Mamba(3, 3, d_model=8, n_layers=1, d_state=2).double()
    loaded, _ = load_checkpoint(save_checkpoint(tmp_path / "m.safetensors", model))
    assert next(loaded.parameters()).dtype == torch.float64


def test_training_state_round_trip(tmp_path):
    model = MLP(4, 2, hidden=(8,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.training_loss(torch.randn(5, 4), torch.randn(5, 2))[0].backward()
    opt.step()
    state = {"optimizer": opt.state_dict(), "rng": torch.get_rng_state(), "epoch": 3, "t": (1, 2.5)}
    path = save_checkpoint(tmp_path / "m.safetensors", model, training_state=state)
    _, meta = load_checkpoint(path)
    ts = meta["training_state"]
    assert ts["epoch"] == 3 and ts["t"] == (1, 2.5)
    assert torch.equal(ts["rng"], state["rng"])
    assert set(ts["optimizer"]["state"]) == set(state["optimizer"]["state"])  # int keys kept
    for k, v in state["optimizer"]["state"][0].items():
        assert torch.equal(ts["optimizer"]["state"][0][k], v)
    assert ts["optimizer"]["param_groups"] == state["optimizer"]["param_groups"]


def test_pickle_file_is_refused(tmp_path):
    model = MLP(4, 2, hidden=(8,))
    path = tmp_path / "model.safetensors"
    torch.save(model.state_dict(), path)
    with pytest.raises(CheckpointError, match="pickle"):
        load_checkpoint(path)
    legacy = tmp_path / "legacy.pt"
    torch.save(model.state_dict(), legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match="pickle"):
        load_checkpoint(legacy)


def test_corrupted_and_truncated_files_are_refused(tmp_path):
    path = save_checkpoint(tmp_path / "m.safetensors", MLP(4, 2, hidden=(8,)))
    data = path.read_bytes()
    (tmp_path / "trunc.safetensors").write_bytes(data[: len(data) - 10])
    with pytest.raises(CheckpointError, match="trunc.safetensors"):
        load_checkpoint(tmp_path / "trunc.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(CheckpointError, match="junk.safetensors"):
        load_checkpoint(tmp_path / "junk.safetensors")
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing.safetensors")


def _write_raw(path, tensors, arch):
    save_file(tensors, str(path), metadata={"format": FORMAT, "architecture": json.dumps(arch)})


def test_mismatched_architecture_is_refused(tmp_path):
    model = MLP(4, 2, hidden=(8,))
    tensors = {f"model.{k}": v.clone() for k, v in model.state_dict().items()}
    arch = {"class": "MLP", "hparams": dict(model.hparams, hidden=[9]), "dtype": "float32"}
    _write_raw(tmp_path / "shape.safetensors", tensors, arch)
    with pytest.raises(CheckpointError, match="shapes do not match"):
        load_checkpoint(tmp_path / "shape.safetensors")
    arch = {"class": "MLP", "hparams": dict(model.hparams, hidden=[8, 8]), "dtype": "float32"}
    _write_raw(tmp_path / "keys.safetensors", tensors, arch)
    with pytest.raises(CheckpointError, match="missing"):
        load_checkpoint(tmp_path / "keys.safetensors")
    _write_raw(tmp_path / "cls.safetensors", tensors, {"class": "Transformer", "hparams": {}})
    with pytest.raises(CheckpointError, match="unknown model class"):
        load_checkpoint(tmp_path / "cls.safetensors")
    _write_raw(tmp_path / "hp.safetensors", tensors, {"class": "MLP", "hparams": {"width": 3}})
    with pytest.raises(CheckpointError, match="hyper-parameters"):
        load_checkpoint(tmp_path / "hp.safetensors")
    save_file(tensors, str(tmp_path / "foreign.safetensors"))
    with pytest.raises(CheckpointError, match="not a kinema checkpoint"):
        load_checkpoint(tmp_path / "foreign.safetensors")


def test_write_is_atomic(tmp_path):
    path = save_checkpoint(tmp_path / "m.safetensors", MLP(4, 2, hidden=(8,)), config={"v": 1})
    before = path.read_bytes()
    with pytest.raises(CheckpointError, match="JSON"):
        save_checkpoint(path, MLP(4, 2, hidden=(8,)), config={"v": object()})
    assert path.read_bytes() == before  # the failed save left the old file intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]  # no temp files


def test_unregistered_model_cannot_be_saved(tmp_path):
    with pytest.raises(CheckpointError, match="cannot checkpoint"):
        save_checkpoint(tmp_path / "x.safetensors", torch.nn.Linear(2, 2))


def test_retrieval_mamba_round_trip(tmp_path):
    from kinema.nn.retrieval import RetrievalMamba
    torch.manual_seed(0)
    model = RetrievalMamba(pose_dim=6, control_dim=3, contact_dim=2, k=2, retrieval_dim=8,
                           d_model=16, n_layers=1, d_state=4)
    loaded, meta = load_checkpoint(save_checkpoint(tmp_path / "r.safetensors", model))
    assert meta["architecture"]["hparams"]["d_model"] == 16
    sd, sd2 = model.state_dict(), loaded.state_dict()
    assert sd.keys() == sd2.keys() and all(torch.equal(sd[k], sd2[k]) for k in sd)
