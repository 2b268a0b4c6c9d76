"""The motion editor (``kinema view``): a clip browser over a folder, timeline, mirroring
and every :mod:`kinema.features` quantity drawn on the character.

Like :mod:`kinema.render.viewer` it is an application of the renderer: :mod:`.editor`
(the :class:`Editor` and its GUI), :mod:`.browser` (folder listing, lazy loading),
:mod:`.features` (per-clip feature cache, NumPy only) and :mod:`.overlays` (what each
feature looks like in 3D).
"""
from kinema.render.editor.browser import Browser, list_clips
from kinema.render.editor.editor import Editor, LoadedClip
from kinema.render.editor.features import ClipFeatures, FeatureSetup, feature_setup
from kinema.render.editor.overlays import DEFAULT_OVERLAYS, OVERLAYS, draw_features

__all__ = ["Editor", "LoadedClip", "Browser", "list_clips", "ClipFeatures", "FeatureSetup", "feature_setup",
           "OVERLAYS", "DEFAULT_OVERLAYS", "draw_features"]
