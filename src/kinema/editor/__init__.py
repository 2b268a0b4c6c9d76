"""The motion editor (``kinema view``): a clip browser over a folder, timeline, mirroring
and every :mod:`kinema.features` quantity drawn on the character.

Sits above :mod:`kinema.render` (an application of the renderer, like the demos). The
browser, features and overlay modules import no raylib; :mod:`kinema.editor.editor` does.
"""
from kinema.editor.browser import Browser, list_clips
from kinema.editor.features import ClipFeatures, FeatureSetup, feature_setup
from kinema.editor.overlays import DEFAULT_OVERLAYS, OVERLAYS, draw_features

__all__ = ["Editor", "LoadedClip", "Browser", "list_clips", "ClipFeatures", "FeatureSetup", "feature_setup",
           "OVERLAYS", "DEFAULT_OVERLAYS", "draw_features"]


def __getattr__(name: str):
    if name in ("Editor", "LoadedClip"):     # imports raylib: only when asked for
        from kinema.editor import editor
        return getattr(editor, name)
    raise AttributeError(f"module 'kinema.editor' has no attribute {name!r}")
