"""kinema.maths: quaternions, 6D rotations, 4x4 transforms and mirroring, on NumPy or torch.

Submodules: :mod:`~kinema.maths.quat`, :mod:`~kinema.maths.sixd`,
:mod:`~kinema.maths.transform`, :mod:`~kinema.maths.mirror`, :mod:`~kinema.maths.backend`.
Importing this package never imports torch.
"""
from kinema.maths import backend, mirror, quat, sixd, transform

__all__ = ["backend", "quat", "sixd", "transform", "mirror"]
