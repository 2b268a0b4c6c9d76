"""DDP on CPU with gloo: 2 processes launched by torchrun follow the same loss trajectory
as 1 process with the same global batch (each rank takes half of every batch)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from kinema.nn.distributed import train_mlp


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch built without distributed")
def test_two_gloo_ranks_match_single_process(tmp_path, lafan_poses, free_port):
    x = lafan_poses[1000:1256:2]  # 128 real poses -> the next pose
    y = lafan_poses[1001:1257:2]
    np.savez(tmp_path / "data.npz", x=x.numpy(), y=y.numpy())
    steps, batch = 8, 32
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr",
           "127.0.0.1", "--master_port", str(free_port), "-m", "kinema.nn.distributed",
           "--data", str(tmp_path / "data.npz"), "--steps", str(steps), "--batch", str(batch), "--lr", "1e-2",
           "--out", str(tmp_path / "ddp.json")]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    ddp = json.loads((tmp_path / "ddp.json").read_text())
    assert ddp["world_size"] == 2

    single = train_mlp(x, y, steps, batch, lr=1e-2)  # one thread, like each rank (conftest)
    a, b = np.array(ddp["step_loss"]), np.array(single)
    assert len(a) == len(b) == steps
    assert b[-1] < b[0] * 0.5  # the run actually trains
    np.testing.assert_allclose(a, b, rtol=1e-5)
