"""``kinema db``: build and inspect motion-matching databases.

    kinema db build PATHS... -o DB [--config lafan1|bandai|games105|FILE] [--mirror] [--exclude NAME...]
                    [--trim-calibration] [--carry-above-hips]
    kinema db info DB [--json]
"""
from __future__ import annotations

import argparse
import json
import time

from kinema.data import expand_data_pattern

HELP = "build or inspect a motion-matching database"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="db_command", metavar="{build,info}")
    b = sub.add_parser("build", help="build a database from motion files or folders")
    b.add_argument("paths", nargs="+",
                   help="motion files or folders (searched recursively); 'shared:REL' and 'sample:REL' name "
                        "them in the shared data folder (KINEMA_DATA or kinema --data) or the bundled sample, "
                        "and quoted globs ('shared:lafan1/*.bvh') expand")
    b.add_argument("-o", "--output", required=True, help="database file to write (.npz)")
    b.add_argument("--config", default="lafan1",
                   help="skeleton config: preset 'lafan1', 'bandai' or 'games105', or a JSON file (default lafan1)")
    b.add_argument("--mirror", action="store_true", help="add the mirror image of every clip")
    b.add_argument("--exclude", nargs="+", default=[], metavar="NAME",
                   help="leave out the files with these names (stems), e.g. a held-out validation clip")
    b.add_argument("--trim-calibration", action="store_true",
                   help="drop the calibration T-pose takes open with (LaFAN1: 2-4 s); recorded in the "
                        "database config, so it changes the fingerprint")
    b.add_argument("--carry-above-hips", action="store_true",
                   help="put the joints above the hips (Bandai-Namco's joint_Root, left at the world origin) on "
                        "the root, so no pose slot holds the world position; recorded in the database config, "
                        "so it changes the fingerprint")
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    i = sub.add_parser("info", help="print a database's fingerprint, size and clips")
    i.add_argument("database", help="database file (.npz)")
    i.add_argument("--json", action="store_true", help="print JSON")


def _return_freed_memory() -> None:
    """Have glibc's malloc serve every block of 1 MiB or more with its own mapping (returned
    to the system when freed) for the rest of this process. By default the threshold rises
    to the size of the largest block freed, so the per-clip temporaries and parts a build
    frees stay in the process as heap and its peak grew by about the database's size again
    (LaFAN1 with mirrors: 466 MB peak instead of 349 MB). No-op without glibc."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = getattr(libc, "mallopt", None)
    except OSError:
        return
    if mallopt is not None:
        mallopt(-3, 1 << 20)        # M_MMAP_THRESHOLD (fixed from now on)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from kinema.matching.config import DatabaseConfig
    from kinema.matching.database import Database, build_from_paths, expand_paths
    if args.db_command == "build":
        t0 = time.perf_counter()
        paths = expand_paths([p for pat in args.paths for p in expand_data_pattern(pat)])
        if args.exclude:
            unknown = sorted(set(args.exclude) - {p.stem for p in paths})
            if unknown:
                print(f"kinema db build: error: --exclude names no input file: {', '.join(unknown)}")
                return 2
            paths = [p for p in paths if p.stem not in set(args.exclude)]
        config = DatabaseConfig.resolve(args.config)
        if args.trim_calibration:
            config = replace(config, trim_calibration=True)
        if args.carry_above_hips:
            config = replace(config, carry_above_hips=True)
        _return_freed_memory()
        db = build_from_paths(paths, config, mirror=args.mirror, progress=not args.quiet)
        path = db.save(args.output)
        cut = [s.get("calibration_frames", 0) for s in db.sources]
        trimmed = (f"; calibration T-pose trimmed from {sum(c > 0 for c in cut)} of {len(cut)} takes"
                   if config.trim_calibration else "")
        print(f"wrote {path}: {db.rows} rows, {len(db.clip_names)} clips, pose width {db.pose_width}, "
              f"fingerprint {db.fingerprint} ({time.perf_counter() - t0:.1f} s){trimmed}")
        return 0
    if args.db_command == "info":
        info = Database.load(args.database).info()
        if args.json:
            print(json.dumps(info, indent=2))
        else:
            for key in ("fingerprint", "rows", "pose_width", "feature_width", "frame_time", "mirror", "config"):
                print(f"{key:14s} {info[key]}")
            print(f"{'clips':14s} {info['num_clips']}: {', '.join(info['clips'])}")
        return 0
    print("kinema db: choose a command: build or info (see kinema db --help)")
    return 2
