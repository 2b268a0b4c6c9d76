"""The glide a user sees, as a picture: the stride ratio (character-space toe speed per m/s
of root speed, :func:`kinema.control.retrieval.scenarios.stride_ratio`) in 2-s bins over a
60-s scripted stick, each shipped retrieval controller against motion matching driven
through the same runtime, with the database's own ratio as the reference line.

    .venv/bin/python benchmarks/plot_glide.py [--stick circle] [--out benchmarks/results/glide.png]
        [CHECKPOINT ...]

Default checkpoints: the shipped models whose data is present (models/retrieval_*.safetensors).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from kinema.control.retrieval.controller import RetrievalController
from kinema.control.retrieval.evaluate import open_database
from kinema.control.retrieval.scenarios import SCENARIOS, database_stride_ratio, run_scenario, stride_ratio
from kinema.errors import KinemaError
from kinema.matching.database import upright_mask
from kinema.nn.checkpoint import read_metadata

MODELS = Path(__file__).resolve().parents[1] / "models"
BIN_S = 2.0


def binned_ratio(traces: dict, fps: float) -> np.ndarray:
    """Stride ratio per BIN_S-second bin (NaN where the root hardly moves)."""
    n = int(BIN_S * fps)
    out = []
    for a in range(0, len(traces["roots"]) - n + 1, n):
        r = stride_ratio(traces["local_toes"][a:a + n], traces["roots"][a:a + n], fps)
        out.append(np.nan if r is None else r)
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="*", type=Path)
    parser.add_argument("--stick", default="circle", choices=sorted(SCENARIOS))
    parser.add_argument("--frames", type=int, default=3600)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "glide.png")
    args = parser.parse_args()
    ckpts = args.checkpoints or [MODELS / f"retrieval_{m}.safetensors" for m in ("lafan1", "bandai", "sample_games105")]
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(4.2 * len(ckpts), 3.4), layout="constrained")
    canvas = FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(ckpts), squeeze=False)[0]
    for ax, ckpt in zip(axes, ckpts):
        try:
            db = open_database(None, read_metadata(ckpt))
        except KinemaError as e:     # its training data is not here
            ax.set_title(f"{ckpt.stem}: skipped")
            ax.text(0.05, 0.5, str(e)[:80], fontsize=7)
            print(f"{ckpt.name}: skipped ({e})")
            continue
        ref = database_stride_ratio(db)
        for mode, colour in (("retrieval", "tab:red"), ("matching", "tab:blue")):
            traces: dict = {}
            # searches among the rows that stay on their feet, as the demos and kinema eval --scenarios
            ctl = RetrievalController(ckpt, db, mode=mode, search_mask=upright_mask(db))
            res = run_scenario(ctl, SCENARIOS[args.stick], args.frames, traces=traces)
            ratio = binned_ratio(traces, db.fps)
            t = (np.arange(len(ratio)) + 0.5) * BIN_S
            label = "retrieval model" if mode == "retrieval" else "motion matching"
            ax.plot(t, ratio, "-o", ms=3, color=colour,
                    label=f"{label} (skate {res['foot_skate_cm_s']:.0f} cm/s)")
            print(f"{ckpt.name} {mode}: stride ratio per {BIN_S:g} s {np.round(ratio, 2).tolist()}, "
                  f"skate {res['foot_skate_cm_s']:.1f} cm/s")
        ax.axhline(ref, color="k", ls="--", lw=1, label=f"the data ({ref:.2f})")
        ax.set_title(f"{ckpt.stem.removeprefix('retrieval_')}: '{args.stick}' stick")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("toe speed / root speed")
        ax.set_ylim(0, max(2.0, ax.get_ylim()[1]))
        ax.legend(fontsize=7, loc="upper right")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    canvas.print_png(str(args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
