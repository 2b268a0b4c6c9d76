"""Shared test fixtures: the real data folder and the bundled sample."""
from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from kinema.data import sample_root, shared_root
from kinema.matching import quadruped


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


@pytest.fixture(scope="session")
def dog_database(shared_data):
    """The MANN dog's matching database (:mod:`kinema.matching.quadruped`) from the shared
    takes and their mirrors; skips the test when ``quadruped/bvh`` is absent."""
    folder = shared_data / "quadruped" / "bvh"
    if not folder.exists():
        pytest.skip("quadruped/bvh not in the shared data folder")
    return quadruped.build_database(sorted(folder.glob("*.bvh")))


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (asked of the OS)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def with_display() -> Callable[[list[str]], list[str]]:
    """``cmd -> cmd`` run under ``xvfb-run`` when there is no display (OpenGL in a
    subprocess); skips the test, saying why, when there is neither."""
    def wrap(cmd: list[str], screen: str = "1024x768x24") -> list[str]:
        if os.environ.get("DISPLAY"):
            return list(cmd)
        if shutil.which("xvfb-run") is None:
            pytest.skip("no display and no xvfb-run for OpenGL")
        return ["xvfb-run", "-a", "-s", f"-screen 0 {screen}", *cmd]
    return wrap

