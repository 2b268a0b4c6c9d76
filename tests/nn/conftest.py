"""Real motion windows for the nn tests (LaFAN1 walk via kinema.load)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import kinema
from kinema.maths import quat


@pytest.fixture(scope="session")
def lafan_poses(shared_data) -> torch.Tensor:
    """(F, 89) float32 poses of a real LaFAN1 walk at 30 fps: 22 local quaternions (w,x,y,z)
    flattened (hemisphere-continuous over time), then the hips height in metres."""
    motion = kinema.load(shared_data / "lafan1" / "walk4_subject1.bvh")
    rotations = quat.unroll(motion.rotations, axis=0)
    pose = np.concatenate([rotations.reshape(motion.num_frames, -1), motion.positions[:, 0, 1:2]], -1)
    return torch.tensor(pose, dtype=torch.float32)


@pytest.fixture(scope="session")
def lafan_motion(shared_data):
    """The LaFAN1 walk as a kinema Motion."""
    return kinema.load(shared_data / "lafan1" / "walk4_subject1.bvh")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The nn tests use small models: one intra-op thread is as fast and does not spin
    against other processes on a shared 2-core machine. Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
