"""The editor's clip browser: every supported motion file under a folder, loaded lazily.

Listing only walks the folder (no file is parsed); :meth:`Browser.load` reads a clip the
first time it is asked for and keeps the few most recent ones (an LRU of ``keep``
entries) so flipping between neighbours is instant without holding a whole dataset.
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import kinema.io
from kinema.errors import KinemaError
from kinema.io.convert import find_inputs


def list_clips(path: str | Path) -> tuple[list[Path], Path]:
    """Supported motion files under ``path`` (recursive, sorted; hidden ones skipped) and
    the folder names are shown relative to. A file gives a list of itself."""
    path = Path(path)
    found = find_inputs([path])
    base = path if path.is_dir() else path.parent
    return [f for f, _ in found], base


class Browser:
    """Clips of a folder (or one file).

    Args:
        path: a motion file or a folder searched recursively.
        loader: ``loader(path) -> value`` called on first access (default :func:`kinema.load`).
        keep: how many loaded clips stay cached.
    """

    def __init__(self, path: str | Path, loader=None, keep: int = 8) -> None:
        self.paths, self.base = list_clips(path)
        if not self.paths:
            raise KinemaError(f"{path}: no supported motion files found")
        if loader is None:
            loader = kinema.io.load
        self.loader = loader
        self.keep = max(1, int(keep))
        self._cache: OrderedDict[int, object] = OrderedDict()
        self.loads = 0

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def names(self) -> list[str]:
        """Display names: paths relative to the browsed folder, without suffix clutter."""
        return [p.relative_to(self.base).as_posix() for p in self.paths]

    def index(self, name_or_path) -> int:
        """Position of a clip given by display name, file name, stem or path."""
        key = str(name_or_path)
        for i, (p, n) in enumerate(zip(self.paths, self.names)):
            if key in (n, p.name, p.stem, str(p)) or Path(key).resolve() == p.resolve():
                return i
        raise KinemaError(f"no clip {key!r} among the {len(self)} clips of {self.base}")

    def load(self, i: int):
        """The loaded clip ``i`` (from the cache when recent)."""
        i = int(i) % len(self.paths)
        if i in self._cache:
            self._cache.move_to_end(i)
            return self._cache[i]
        value = self.loader(self.paths[i])
        self.loads += 1
        self._cache[i] = value
        while len(self._cache) > self.keep:
            self._cache.popitem(last=False)
        return value

    def replace(self, i: int, value) -> None:
        """Cache ``value`` as clip ``i`` (e.g. another animation of the same file)."""
        i = int(i) % len(self.paths)
        self._cache[i] = value
        self._cache.move_to_end(i)
        while len(self._cache) > self.keep:
            self._cache.popitem(last=False)

    def is_loaded(self, i: int) -> bool:
        return int(i) % len(self.paths) in self._cache
