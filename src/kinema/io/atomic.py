"""Atomic file writes: write a temporary file in the destination folder, then rename it.

``os.replace`` within one folder is atomic, so a reader (or a later run) sees either the
old file or the complete new one, never a half-written file under the final name, even
when the writing process is killed. A failed write removes its temporary file.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def open_atomic(path: str | Path) -> Iterator[BinaryIO]:
    """Open a temporary binary file next to ``path``; on success it replaces ``path``.

    The temporary name starts with ``.`` and ends with ``.part`` so folder scans skip it.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with open_atomic(path) as f:
        f.write(data)
