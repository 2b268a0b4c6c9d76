"""``kinema convert PATH_OR_DIR... -o OUT_DIR``: convert motion files to kinema's motion npz."""
from __future__ import annotations

import argparse
import sys

from kinema.data import data_path
from kinema.io.convert import convert_all, plan

HELP = "convert motion files (BVH, GLB/glTF, FBX, npz; folders recursively) to motion npz"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH_OR_DIR", help="files or folders (searched recursively)")
    parser.add_argument("-o", "--out", required=True, metavar="OUT_DIR", help="output folder (created)")
    parser.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                        help="worker processes (default: number of CPUs; 1 converts in this process)")
    parser.add_argument("--fps", type=float, default=None, metavar="F",
                        help="resample every motion to F frames per second")
    parser.add_argument("--scale", type=float, default=None, metavar="S",
                        help="metres per file unit (BVH default 0.01, i.e. centimetres); for formats "
                             "whose loader has no scale option, lengths are multiplied by S")
    parser.add_argument("--no-compress", action="store_true", help="store arrays uncompressed (faster, larger)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--force", action="store_true",
                        help="convert every file, also those whose outputs are newer than the input "
                             "(default: skip them, so a re-run resumes)")


def run(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        print("kinema convert: --jobs must be at least 1", file=sys.stderr)
        return 2
    for name in ("fps", "scale"):
        v = getattr(args, name)
        if v is not None and not v > 0:
            print(f"kinema convert: --{name} must be positive", file=sys.stderr)
            return 2
    jobs = plan([data_path(p) for p in args.paths], args.out)
    if not jobs:
        print("kinema convert: no supported files found", file=sys.stderr)
        return 1
    summary = convert_all(jobs, jobs_n=args.jobs, fps=args.fps, scale=args.scale,
                          compress=not args.no_compress, progress=not args.quiet, force=args.force)
    ok = len(jobs) - len(summary.failed)
    print(f"converted {ok} of {len(jobs)} files ({len(summary.outputs)} motions, {summary.frames} frames) "
          f"into {args.out} in {summary.seconds:.1f} s"
          + (f"; {len(summary.skipped)} up to date, skipped (--force converts them)" if summary.skipped else ""))
    if summary.failed:
        print(f"{len(summary.failed)} failed:", file=sys.stderr)
        for r in summary.failed:
            print(f"  {r.source}: {r.error}", file=sys.stderr)
        return 1
    return 0
