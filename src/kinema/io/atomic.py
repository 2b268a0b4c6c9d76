"""Atomic file writes: write a temporary file in the destination folder, then rename it.

``os.replace`` within one folder is atomic, so a reader (or a later run) sees either the
old file or the complete new one, never a half-written file under the final name, even
when the writing process is killed. The data is flushed and fsynced before the rename
(and the folder after it, where the platform allows), so a power cut cannot leave an
empty file under the final name either. A failed write removes its temporary file. The
file gets the permissions an ordinary ``open(path, "w")`` would (0666 minus the umask),
not ``mkstemp``'s 0600.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def open_atomic(path: str | Path) -> Iterator[BinaryIO]:
    """Open a temporary binary file next to ``path``; on success it replaces ``path``.

    The temporary name starts with ``.`` and ends with ``.part`` so folder scans skip it;
    on any exception (including KeyboardInterrupt) it is removed and ``path`` is untouched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(path.parent)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with open_atomic(path) as f:
        f.write(data)
