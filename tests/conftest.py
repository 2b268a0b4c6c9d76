"""Shared test fixtures: the real data folder and the bundled sample."""
from __future__ import annotations

from pathlib import Path

import pytest

from kinema.data import sample_root, shared_root


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or $KINEMA_DATA); skips the test, saying why, when absent."""
    root = shared_root()
    if root is None:
        pytest.skip("real data folder ../shared/data not found (set KINEMA_DATA)")
    return root


@pytest.fixture(scope="session")
def sample_data() -> Path:
    """The small permissively licensed sample bundled in the package."""
    return sample_root()
