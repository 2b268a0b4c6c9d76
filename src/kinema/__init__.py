"""kinema: neural character animation in one Python process.

Top-level API::

    motion = kinema.load("clip.bvh")          # any supported file -> Motion
    kinema.save(motion, "clip.npz")            # motion npz (or .bvh / .glb)
    character = kinema.load_character("geno.glb")
    on_geno = kinema.retarget(motion, character)   # another skeleton's motion on the character
"""
from __future__ import annotations

from kinema._version import __version__
from kinema.errors import FormatError, KinemaError, UnsupportedFormatError

__all__ = ["load", "save", "load_character", "retarget", "KinemaError", "FormatError",
           "UnsupportedFormatError", "__version__"]


def load(path, **options):
    """Load a motion from any supported file (BVH, motion npz, AI4AnimationPy npz, GLB, FBX).

    See :func:`kinema.io.load`.
    """
    from kinema.io import load as _load
    return _load(path, **options)


def save(motion, path, **options):
    """Save a motion; the format follows the suffix. See :func:`kinema.io.save`."""
    from kinema.io import save as _save
    return _save(motion, path, **options)


def load_character(path, **options):
    """Load a skinned character (skeleton, meshes, animations). See :func:`kinema.io.load_character`."""
    from kinema.io import load_character as _load_character
    return _load_character(path, **options)


def retarget(motion, target, **options):
    """``motion`` put on ``target`` (a Character, a Motion of the target skeleton, or a
    Skeleton). See :func:`kinema.retargeting.retarget`."""
    from kinema.retargeting import retarget as _retarget
    return _retarget(motion, target, **options)
