"""Hostile checkpoints: sizes checked from the safetensors header and a meta-device build
before anything is allocated, deep JSON, missing tensors, NaN weights and a null config
all give a CheckpointError naming the file; `kinema card` prints one line."""
from __future__ import annotations

import json
import os
import stat

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from kinema.errors import CheckpointError, LimitError
from kinema.limits import Limits
from kinema.nn.checkpoint import load_checkpoint, read_metadata, save_checkpoint
from kinema.nn.models import MLP


def _rewrite(path, edit_meta=None, edit_tensors=None):
    """Rewrite a checkpoint with its metadata strings / tensors passed through the edits."""
    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata())
    tensors = load_file(str(path))
    if edit_meta:
        edit_meta(meta)
    if edit_tensors:
        edit_tensors(tensors)
    save_file(tensors, str(path), metadata=meta)
    return path


@pytest.fixture
def ckpt(tmp_path):
    torch.manual_seed(0)
    return save_checkpoint(tmp_path / "m.safetensors", MLP(4, 2, hidden=(8,)), config={"data": {"clips": []}},
                           training_state={"step": 3, "moments": [torch.ones(2)]})


def test_training_state_missing_a_tensor(ckpt):
    _rewrite(ckpt, edit_tensors=lambda t: t.pop("train.8"))
    with pytest.raises(CheckpointError, match=r"m\.safetensors: training state refers to tensor 'train\.8'"):
        load_checkpoint(ckpt)


def test_model_missing_a_tensor(ckpt):
    _rewrite(ckpt, edit_tensors=lambda t: t.pop("model.blocks.0.linear.weight"))
    with pytest.raises(CheckpointError, match=r"m\.safetensors: weights do not match MLP: missing \['blocks\.0\.linear\.weight'\]"):
        load_checkpoint(ckpt)


def test_huge_layers_are_refused_before_allocating(ckpt):
    def huge(meta):
        arch = json.loads(meta["architecture"])
        arch["hparams"]["hidden"] = [200_000, 200_000]          # 4e10 parameters: 160 GB
        meta["architecture"] = json.dumps(arch)
    _rewrite(ckpt, edit_meta=huge)
    with pytest.raises(LimitError, match=r"m\.safetensors: MLP with these hyper-parameters has \d+ parameters, "
                                         r"over 1000000000 .*max_model_parameters"):
        load_checkpoint(ckpt)
    with pytest.raises(LimitError, match="max_model_parameters"):
        load_checkpoint(_rewrite(ckpt, edit_meta=lambda m: None), limits=Limits(max_model_parameters=10))


def test_header_shapes_must_match_before_the_real_build(ckpt):
    def wide(meta):
        arch = json.loads(meta["architecture"])
        arch["hparams"]["hidden"] = [4096]
        meta["architecture"] = json.dumps(arch)
    _rewrite(ckpt, edit_meta=wide)
    with pytest.raises(CheckpointError, match="shapes do not match the architecture"):
        load_checkpoint(ckpt)


def test_deep_json_metadata(ckpt):
    _rewrite(ckpt, edit_meta=lambda m: m.update(config="[" * 100_000 + "]" * 100_000))
    with pytest.raises(CheckpointError, match=r"m\.safetensors: metadata entry 'config': JSON nested too deeply"):
        read_metadata(ckpt)
    with pytest.raises(CheckpointError, match="nested too deeply"):
        load_checkpoint(ckpt)


def test_nan_weights_are_refused(ckpt):
    _rewrite(ckpt, edit_tensors=lambda t: t["model.blocks.0.linear.weight"].__setitem__((0, 0), float("nan")))
    with pytest.raises(CheckpointError, match=r"m\.safetensors: weight 'blocks\.0\.linear\.weight' holds NaN or infinite"):
        load_checkpoint(ckpt)


def test_huge_header_length_is_refused(ckpt):
    data = bytearray(ckpt.read_bytes())
    data[:8] = (1 << 40).to_bytes(8, "little")
    ckpt.write_bytes(bytes(data))
    with pytest.raises(LimitError, match="max_json_bytes"):
        read_metadata(ckpt)


def test_null_config_for_card_and_eval(ckpt, capsys):
    from kinema.cli.main import main

    _rewrite(ckpt, edit_meta=lambda m: m.update(config="null"))
    assert read_metadata(ckpt)["config"] is None                 # fine for a plain model
    with pytest.raises(CheckpointError, match=r"m\.safetensors: checkpoint metadata 'config' is missing"):
        read_metadata(ckpt, require=("config",))
    for command in (["card", str(ckpt)], ["eval", str(ckpt)]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "m.safetensors" in err and "'config'" in err, err


def test_save_is_atomic_and_honours_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        path = save_checkpoint(tmp_path / "u.safetensors", MLP(4, 2, hidden=(8,)))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["u.safetensors"]       # no temporary left
    with pytest.raises(CheckpointError):
        save_checkpoint(path, MLP(4, 2, hidden=(8,)), config={"v": object()})
    assert [p.name for p in tmp_path.iterdir()] == ["u.safetensors"]
    assert isinstance(load_checkpoint(path)[0], MLP)
