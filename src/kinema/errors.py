"""Exceptions raised by kinema. Every error a user can trigger with bad input is a
:class:`KinemaError`, so callers can catch one type."""
from __future__ import annotations

from pathlib import Path


class KinemaError(Exception):
    """Base class of every error kinema raises on purpose."""


class FormatError(KinemaError, ValueError):
    """A file could not be read: it names the file, and the line when known.

    Args:
        message: what is wrong.
        path: the file being read.
        line: 1-based line number of the problem, for text formats.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = self.path + (f":{line}" if line is not None else "") + ": "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(where + message)


class MissingFileError(FormatError, FileNotFoundError):
    """The file to read does not exist (also a :class:`FileNotFoundError`)."""


class UnsupportedFormatError(KinemaError, ValueError):
    """The file type is not one kinema can read or write."""


class CheckpointError(KinemaError, ValueError):
    """A model or database file is corrupted, mismatched or unsafe (e.g. a pickle)."""


class LimitError(FormatError, CheckpointError):
    """A file declares more than a :class:`kinema.limits.Limits` allows (frames, array
    sizes, decompressed bytes, model size...); the message names the limit to raise.
    Also a :class:`CheckpointError`, as model and database files raise it too.

    Args:
        message: what the file declares. path: the file. limit: the ``Limits`` field name.
    """

    def __init__(self, message: str, path: str | Path | None = None, limit: str | None = None):
        self.limit = limit
        if limit is not None:
            message = f"{message} (limit kinema.limits.Limits.{limit}; pass limits= to raise it)"
        super().__init__(message, path)


class NonFiniteError(KinemaError, ValueError):
    """An array that must be finite holds NaN or infinity (e.g. the search queries or the
    output of a controller whose rollout diverged: a program may restart that controller
    where it stands instead of stopping)."""


class SkeletonError(KinemaError, ValueError):
    """A skeleton or motion is inconsistent (parent order, shapes, names)."""


class EulerOrderError(KinemaError, ValueError):
    """An Euler order that is not one of :data:`kinema.maths.quat.EULER_ORDERS`."""


class RenderError(KinemaError, RuntimeError):
    """The GPU pipeline could not be set up (shader compile, framebuffer, no context)."""
