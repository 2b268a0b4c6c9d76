"""``kinema eval CHECKPOINT --db DB --clips PATHS...``: retrieval gain and baselines."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kinema.data import portable_path

HELP = "evaluate a retrieval controller: retrieval gain (teacher forced, free running), metrics, baselines"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="controller checkpoint (.safetensors)")
    parser.add_argument("--db", help="retrieval database (.npz) or the training config to rebuild it from "
                                     "(default: rebuild from the checkpoint's own config); its fingerprint "
                                     "must equal the checkpoint's")
    parser.add_argument("--clips", nargs="+", help="held-out motion files (default: the checkpoint's test "
                                                    "clips, or its validation clips when it has none)")
    parser.add_argument("--frames", type=int, default=300, help="free-running frames per window (default 300)")
    parser.add_argument("--context", type=int, default=32, help="teacher-forced warm-up frames (default 32)")
    parser.add_argument("--stride", type=int, default=120, help="frames between window starts (default 120)")
    parser.add_argument("--baseline", help="a checkpoint of the same architecture trained without retrieval")
    parser.add_argument("--mirror", action="store_true", help="also evaluate the mirrored clips")
    parser.add_argument("--max-windows", type=int, help="evaluate at most this many windows")
    parser.add_argument("--stability", type=int, default=0, metavar="FRAMES",
                        help="also run free-running rollouts of this many frames (e.g. 1200 = 20 s) and "
                             "report whether they stay finite and bounded")
    parser.add_argument("--scenarios", nargs="*", metavar="NAME",
                        help="also drive the runtime controller with scripted sticks, 60 s each (default all: "
                             "idle stop_start turns circle walk_run run_release, and long_idle: the stick released "
                             "for 5 min): finite, bone-length drift, head above "
                             "hips, root error, foot skating, stride ratio, both feet down when let go; and a crowd of 64 "
                             "on wandering sticks for 10 s "
                             "(who lies down); every search only among the rows that stay on their feet, as in the demos")
    parser.add_argument("--scenario-frames", type=int, default=3600, metavar="FRAMES",
                        help="frames per scenario at 60 Hz (default 3600 = 60 s; long_idle five times as many)")
    parser.add_argument("--raw-positions", action="store_true",
                        help="score the networks' predicted joint positions as they are, instead of rebuilding "
                             "them from the predicted rotations as the runtime draws them")
    parser.add_argument("--foot-lock", action="store_true",
                        help="also score every method's foot skating after the runtime foot lock, applied the same "
                             "way to each (contacts detected from its own motion); the contact targets then read it")
    parser.add_argument("--planted", action=argparse.BooleanOptionalAction, default=None,
                        help="move every free-running method's root by the planted-foot rule (toes on the floor "
                             "stay put; kinema.control.planted), the same way for all (default: as the "
                             "checkpoint was trained, as its runtime controller does)")
    parser.add_argument("--oracle", action="store_true",
                        help="also run the model and motion matching with a database that holds the evaluated clips "
                             "themselves (their exact future retrievable): how much of what its candidates carry the "
                             "model uses (uptake 0: none, 1: as much as motion matching)")
    parser.add_argument("--plot", metavar="PNG", help="also draw the per-frame free-running joint error of the "
                                                     "model and every baseline into this PNG")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    parser.add_argument("-o", "--out", help="also write the JSON result here")


def format_table(result: dict) -> str:
    lines = []
    for regime in ("teacher_forced", "free_running"):
        r = result[regime]
        lines.append(f"{regime}: gain {r['gain']:+.4f} (95% CI {r['gain_ci95'][0]:+.4f} .. {r['gain_ci95'][1]:+.4f}, "
                     f"{100 * r['gain_relative']:+.1f}% of the null-candidate loss)")
        rows = {"with retrieval": r["with"], "null candidates": r["without"], **r["baselines"]}
        keys = [k for k in r["with"] if k != "joint_error_max_cm"]
        widths = [max(20, len(k) + 2) for k in keys]
        lines.append(f"  {'':24}" + "".join(f"{k:>{w}}" for k, w in zip(keys, widths)))
        for name, m in rows.items():
            lines.append(f"  {name:24}" + "".join(f"{m.get(k, float('nan')):>{w}.4f}" for k, w in zip(keys, widths)))
    h = result["free_running"].get("horizons")
    if h:
        lines.append("free-running joint error (cm) over the first N frames; [95% CI of other - model]:")
        lines.append(f"  {'':24}" + "".join(f"{n:>24}" for n in h["frames"]))
        for name, vals in h["joint_error_cm"].items():
            ci = h["other_minus_model_ci95"].get(name)
            cells = [f"{v:.2f}" + ("" if ci is None else f" [{ci[i][0]:+.1f},{ci[i][1]:+.1f}]") for i, v in enumerate(vals)]
            lines.append(f"  {name:24}" + "".join(f"{c:>24}" for c in cells))
    o = result["free_running"].get("oracle")
    if o:
        lines.append("oracle database (the evaluated clips retrievable): joint error (cm) over the first N frames")
        lines.append(f"  {'':24}" + "".join(f"{n:>24}" for n in o["frames"]))
        for name, label in (("with", "model, its database"), ("oracle", "model, oracle database"),
                            ("motion_matching", "motion matching, oracle")):
            lines.append(f"  {label:24}" + "".join(f"{v:>24.2f}" for v in o["joint_error_cm"][name]))
        lines.append(f"  {'uptake':24}" + "".join(f"{'-' if u is None else f'{u:.2f}':>24}" for u in o["uptake"]))
    mm_sc = result.get("scenarios_motion_matching") or {}
    for name, sc in (result.get("scenarios") or {}).items():
        mm = mm_sc.get(name)
        stride = "-" if sc.get("stride_ratio") is None else f"{sc['stride_ratio']:.2f}"
        lines.append(f"scenario {name:10} finite {sc['finite']!s:5} bone drift {sc['bone_length_drift_mm']:9.2f} mm  "
                     f"head above hips {sc['head_above_hips']!s:5}  torso {sc.get('torso_share_min', float('nan')):.2f}  "
                     f"root error {sc['root_error_m']:.3f} m  "
                     f"foot skate {sc['foot_skate_cm_s']:6.1f} cm/s"
                     + ("" if mm is None else f" (motion matching {mm['foot_skate_cm_s']:.1f})")
                     + f"  stride ratio {stride}"
                     + ("" if sc.get("feet_down_share") is None else f"  feet down {sc['feet_down_share']:.2f}"))
    if result.get("database_stride_ratio"):
        lines.append(f"database stride ratio {result['database_stride_ratio']:.2f}")
    from kinema.control.retrieval.targets import check_targets
    lines.append("targets: " + ", ".join(f"{r['target']} {'ok' if r['passed'] else 'MISSED'}"
                                         for r in check_targets(result) if r["passed"] is not None))
    st = result.get("stability")
    if st:
        lines.append(f"stability ({st['windows']} rollouts of {st['frames']} frames): " + json.dumps(st))
    return "\n".join(lines)


def portable_command(argv: list[str]) -> str:
    """The ``kinema eval`` command line of ``argv`` as a card prints it: a path inside the
    current folder relative to it, one in the shared data or the bundled sample as
    ``shared:``/``sample:`` (:func:`kinema.data.portable_path`), so the command runs on
    another machine from the repository root; other words as given."""
    out = []
    for word in argv:
        path = Path(word)
        if not word.startswith("-") and (path.exists() or (len(path.parts) > 1 and path.parent.exists())):
            word = portable_path(path)
        out.append(word)
    return " ".join(["kinema eval", *out])


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kinema.control.retrieval.evaluate import evaluate
    from kinema.control.retrieval.training import validation_clips
    from kinema.nn.checkpoint import read_metadata

    meta = read_metadata(args.checkpoint, require=("config",))     # CheckpointError if it has none
    clips = args.clips or validation_clips(meta)
    result = evaluate(args.checkpoint, args.db, clips, frames=args.frames, context=args.context, stride=args.stride,
                      baseline=args.baseline, max_windows=args.max_windows,
                      mirror=args.mirror, stability_frames=args.stability, rigid=not args.raw_positions,
                      scenarios=args.scenarios, scenario_frames=args.scenario_frames, foot_lock=args.foot_lock,
                      planted=args.planted, oracle=args.oracle)
    result["command"] = portable_command(sys.argv[sys.argv.index("eval") + 1:]) if "eval" in sys.argv[1:] else None
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    if args.plot:
        from kinema.control.retrieval.plot import plot_frame_errors
        plot_frame_errors(result, args.plot)
    print(json.dumps(result, indent=1) if args.json else format_table(result))
    zero = [k for k in ("teacher_forced", "free_running") if result[k]["gain"] == 0.0]
    if zero:
        print(f"kinema eval: error: the retrieval gain is exactly 0.0 ({', '.join(zero)}): the candidates "
              "do not reach the model's output", file=sys.stderr)
        return 3
    return 0
