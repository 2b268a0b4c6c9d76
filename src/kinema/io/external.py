"""Reading the files and ``data:`` URIs another file refers to (glTF buffers and images,
FBX textures), safely for untrusted input.

The rule: a reference is a *relative* path that resolves, symlinks followed, to a regular
file inside the referring file's folder (subfolders allowed). Absolute paths, URL schemes
(``file:``, ``http:``), drive letters, ``..`` that leaves the folder and symlinks pointing
out of it are refused; so are devices, FIFOs and sockets (``/dev/zero`` never reads). At
most ``max_bytes`` bytes are read, whatever the file's size, so a declared length is the
bound. Every refusal is a :class:`kinema.errors.FormatError` naming the referring file.
"""
from __future__ import annotations

import base64
import binascii
import os
import stat
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from kinema.errors import FormatError


def resolve_inside(reference: str, base: Path, path: Path, what: str) -> Path:
    """The real path of ``reference`` relative to folder ``base``, refused unless inside it.

    Args:
        reference: relative path (already URI-unquoted), '/' or '\\' separated.
        base: folder of the referring file ``path``.
        path: the referring file, named in errors. what: e.g. "buffer 0", for errors.
    """
    text = reference.replace("\\", "/")
    if not text or "\0" in text:
        raise FormatError(f"{what}: empty or invalid file reference {reference!r}", path)
    pure = PurePosixPath(text)
    if pure.is_absolute() or (len(text) > 1 and text[1] == ":"):
        raise FormatError(f"{what}: absolute path {reference!r} refused (only paths relative "
                          "to the file's folder are read)", path)
    root = Path(os.path.realpath(base))
    target = Path(os.path.realpath(root.joinpath(*pure.parts)))
    if target != root and root not in target.parents:
        raise FormatError(f"{what}: {reference!r} resolves to {target}, outside the file's folder "
                          f"{root} (refused)", path)
    return target


def read_inside(reference: str, base: Path, path: Path, what: str, max_bytes: int,
                exact: bool = False) -> bytes:
    """Bytes of the regular file ``reference`` inside ``base`` (see :func:`resolve_inside`).

    Args:
        max_bytes: read at most this many bytes. exact: when True the file must hold at
            least ``max_bytes`` (a glTF buffer's ``byteLength``), and exactly that many
            are returned; when False a file larger than ``max_bytes`` is refused.
    """
    target = resolve_inside(reference, base, path, what)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags)
    except OSError as e:
        raise FormatError(f"{what}: cannot read {reference!r} ({e.strerror})", path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FormatError(f"{what}: {reference!r} is not a regular file (refused)", path)
        if not exact and info.st_size > max_bytes:
            raise FormatError(f"{what}: {reference!r} is {info.st_size} bytes, over the limit of "
                              f"{max_bytes} (kinema.limits.Limits.max_external_bytes)", path)
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(max_bytes)
    finally:
        os.close(fd)
    if exact and len(data) < max_bytes:
        raise FormatError(f"{what}: {reference!r} holds {len(data)} bytes, fewer than the "
                          f"declared {max_bytes}", path)
    return data


def decode_data_uri(uri: str, path: Path, what: str, max_bytes: int) -> bytes:
    """Decoded payload of a base64 ``data:`` URI, refused before decoding when it would
    exceed ``max_bytes`` (decoded size is 3/4 of the base64 length)."""
    head, sep, payload = uri.partition(",")
    if not sep or ";base64" not in head:
        raise FormatError(f"{what}: data URI is not base64", path)
    if (len(payload) // 4) * 3 > max_bytes + 3:
        raise FormatError(f"{what}: data URI decodes to about {len(payload) // 4 * 3} bytes, over "
                          f"the limit of {max_bytes}", path)
    try:
        return base64.b64decode(payload, validate=False)
    except (ValueError, binascii.Error) as e:
        raise FormatError(f"{what}: bad base64 data ({e})", path) from None


def read_uri(uri: str, base: Path, path: Path, what: str, max_bytes: int,
             exact: bool = False) -> bytes:
    """A glTF URI: a bounded ``data:`` URI or a relative file inside ``base``.

    Any other scheme (``file:``, ``http:`` ...) is refused. See :func:`read_inside` for
    ``max_bytes`` and ``exact``.
    """
    if not isinstance(uri, str):
        raise FormatError(f"{what}: uri is not a string", path)
    if uri.startswith("data:"):
        return decode_data_uri(uri, path, what, max_bytes)
    parts = urlsplit(uri)
    if parts.scheme and len(parts.scheme) > 1:
        raise FormatError(f"{what}: URI scheme {parts.scheme!r} refused (only relative paths "
                          "and data: URIs are read)", path)
    return read_inside(unquote(uri.split("#")[0].split("?")[0]), base, path, what, max_bytes,
                       exact=exact)
