"""Free-running joint error over the horizon, per frame, for the model and its baselines:
a PNG of :func:`kinema.control.retrieval.evaluate.evaluate`'s ``frame_joint_error_cm``."""
from __future__ import annotations

from pathlib import Path

import numpy as np

# label, line style (the model bold, copying dashed: the two a reader compares first)
STYLES = {
    "with": ("retrieval controller", dict(color="C0", lw=2.4)),
    "without": ("same model, null candidates", dict(color="C0", lw=1.2, ls=":")),
    "no_retrieval_model": ("model trained without retrieval", dict(color="C1", lw=1.4)),
    "copy_previous": ("copy previous (frozen) pose", dict(color="k", lw=1.4, ls="--")),
    "motion_matching": ("motion matching (runtime, inertialized)", dict(color="C2", lw=1.6)),
    "motion_matching_playback": ("motion-matching playback", dict(color="C2", lw=1.0, ls=":")),
    "nearest_candidate": ("nearest candidate", dict(color="C3", lw=1.0, alpha=0.7)),
    "random_candidates": ("model fed random rows", dict(color="C4", lw=1.0, alpha=0.7)),
}


def plot_frame_errors(result: dict, path: str | Path, title: str | None = None) -> Path:
    """Write a PNG of per-frame free-running joint error (cm) against time (s), one line
    per method of ``result["free_running"]["frame_joint_error_cm"]``, and return its path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    curves = result["free_running"].get("frame_joint_error_cm")
    if not curves:
        raise ValueError("the evaluation holds no per-frame curves (frame_joint_error_cm): evaluate again")
    fps = float(result.get("fps", 60.0))
    # The scale follows the model and the frozen pose; a curve that leaves it (a diverging
    # ablation) is cut at the top and says so in its label.
    top = 1.6 * max(max(curves.get(k, [0.0])) for k in ("with", "copy_previous"))
    fig = Figure(figsize=(8, 5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for name, values in curves.items():
        label, style = STYLES.get(name, (name, {}))
        if max(values) > top:
            label += f" (off scale: {max(values):.0f} cm)"
        t = np.arange(1, len(values) + 1) / fps
        ax.plot(t, values, label=label, **style)
    ax.set_xlabel("time after the context (s)")
    ax.set_ylabel("joint position error (cm, character space)")
    names = [Path(c).stem for c in result["clips"]]
    held = ", ".join(names) if len(names) <= 2 else f"{len(names)} held-out clips"
    mirrored = " and their mirrors" if result.get("mirrored") else ""
    ax.set_title(title or f"{Path(result['checkpoint']).stem}: {result['windows']} windows of {held}{mirrored}",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.set_xlim(0, len(next(iter(curves.values()))) / fps)
    ax.set_ylim(0, top)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
