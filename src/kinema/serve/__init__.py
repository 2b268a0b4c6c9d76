"""The browser viewer (``kinema serve``): clips and live demos shown in a web browser on
localhost through ``viser`` (skinned characters, skeletons, trajectories, GUI controls).

:mod:`.clip` prepares motions (NumPy only); :mod:`.viewer` serves them (viser is imported when
a viewer starts).
"""
from kinema.serve.clip import LiveClip, ServedClip, bind_world, dense_weights
from kinema.serve.viewer import MotionViewer  # viser itself is imported when a viewer starts

__all__ = ["LiveClip", "MotionViewer", "ServedClip", "bind_world", "dense_weights"]
