"""kinema.maths: quaternions, 6D rotations, 4x4 transforms and mirroring, on NumPy or torch.

Submodules: :mod:`~kinema.maths.quat`, :mod:`~kinema.maths.sixd`,
:mod:`~kinema.maths.transform`, :mod:`~kinema.maths.mirror`, :mod:`~kinema.maths.angles`
(yaw of floor directions, angle wrap), :mod:`~kinema.maths.backend`.
Importing this package never imports torch.
"""
from kinema.maths import angles, backend, mirror, quat, sixd, transform

__all__ = ["angles", "backend", "quat", "sixd", "transform", "mirror"]
