"""The browser viewer (``kinema serve``): clips and live demos shown in a web browser on
localhost through ``viser`` (skinned characters, skeletons, trajectories, GUI controls).

:mod:`.clip` prepares motions (NumPy only); :mod:`.viewer` serves them (imports viser).
"""
from kinema.serve.clip import (
    LiveClip,
    ServedClip,
    bind_world,
    character_pose,
    character_pose_world,
    dense_weights,
)

__all__ = ["LiveClip", "MotionViewer", "ServedClip", "bind_world", "character_pose", "character_pose_world",
           "dense_weights"]


def __getattr__(name: str):
    if name == "MotionViewer":  # viser is imported only when the viewer is used
        from kinema.serve.viewer import MotionViewer
        return MotionViewer
    raise AttributeError(name)
