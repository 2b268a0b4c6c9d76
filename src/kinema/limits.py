"""Resource limits for reading untrusted files.

A downloaded file can declare sizes (frame counts, array shapes, decompressed sizes,
model widths) far beyond what its bytes justify. Readers check what a file declares
against a :class:`Limits` *before* allocating, and raise
:class:`kinema.errors.LimitError` naming the limit. The defaults fit every real asset
kinema ships with or tests against by a wide margin; a user with bigger files passes
their own limits to the loader (``kinema.load(path, limits=Limits(max_frames=...))``)
or ``dataclasses.replace(DEFAULT, ...)``. There is no global mutable state: a loader
without ``limits=`` uses :data:`DEFAULT`.
"""
from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """Largest sizes a loader accepts (all counts are elements, sizes are bytes).

    Attributes:
        max_frames: frames of one motion (10 M frames is 23 h at 120 fps).
        max_joints: joints of one skeleton.
        max_motion_values: frames x joints x 4, the largest rotation array, in elements
            (the default, 2**28, is 1 GiB of float32).
        max_array_bytes: decompressed bytes of one array in an npz, safetensors or
            database file.
        max_total_bytes: decompressed bytes of all arrays of one file together.
        max_compression_ratio: decompressed size of all npz members / the file's size; a
            real motion inflates 1-10x (joints that only rotate compress well), a zip bomb
            1000x. Applied above ``ratio_free_bytes``; bounds a load's memory by the file.
        ratio_free_bytes: archives that inflate to at most this many bytes skip the
            ratio check (a constant pose compresses very well and is harmless when small).
        max_external_bytes: one external file a glTF or FBX refers to (buffer, image).
        max_data_uri_bytes: decoded bytes of one ``data:`` URI.
        max_image_pixels: width x height of one decoded texture.
        max_json_bytes: JSON metadata text of one file (npz, safetensors, database).
        max_json_depth: nesting depth of that JSON (objects and arrays).
        max_model_parameters: parameters of a model built from a checkpoint's config.
        min_fps, max_fps: frame rates a motion may declare (frames per second).
        max_abs_position: largest coordinate of a translation, offset or vertex, in metres
            (finite but huge values, e.g. FLT_MAX, overflow to inf in forward kinematics).
    """

    max_frames: int = 10_000_000
    max_joints: int = 4096
    max_motion_values: int = 1 << 28
    max_array_bytes: int = 2 * GiB
    max_total_bytes: int = 4 * GiB
    max_compression_ratio: float = 20.0
    ratio_free_bytes: int = 64 * MiB
    max_external_bytes: int = 1 * GiB
    max_data_uri_bytes: int = 256 * MiB
    max_image_pixels: int = 16384 * 16384
    max_json_bytes: int = 64 * MiB
    max_json_depth: int = 100
    max_model_parameters: int = 1_000_000_000
    min_fps: float = 1.0
    max_fps: float = 10_000.0
    max_abs_position: float = 1e6


DEFAULT = Limits()
"""The limits every loader uses unless given others."""
