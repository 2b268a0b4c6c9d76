"""Batch conversion of motion files (every suffix in :data:`kinema.io.FORMATS`) to motion npz.

:func:`plan` finds the input files (recursing into folders) and chooses an output path
per file; :func:`convert_file` converts one file (one npz per animation for files with
several, named ``<stem>__<animation>.npz``); :func:`convert_all` runs them in worker
processes with a progress bar and collects failures instead of stopping at the first.
"""
from __future__ import annotations

import inspect
import os
import re
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from kinema.errors import KinemaError, MissingFileError, UnsupportedFormatError
from kinema.io import FORMATS, format_module, npz
from kinema.motion import Motion, Skeleton


@dataclass
class Job:
    """One input file and the output path (without the ``.npz``) chosen for it."""

    source: Path
    dest_base: Path


@dataclass
class Result:
    """What converting one file gave: written files, frames, or the error text."""

    source: str
    outputs: list[str] = field(default_factory=list)
    frames: int = 0
    error: str | None = None
    seconds: float = 0.0
    skipped: bool = False          # every output was newer than the input: nothing written


@dataclass
class Summary:
    """All results of a batch, with the failures first-class."""

    results: list[Result]
    seconds: float

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results if r.error is not None]

    @property
    def skipped(self) -> list[Result]:
        return [r for r in self.results if r.skipped]

    @property
    def outputs(self) -> list[str]:
        return [o for r in self.results for o in r.outputs]

    @property
    def frames(self) -> int:
        return sum(r.frames for r in self.results)


def supported_suffixes() -> set[str]:
    return set(FORMATS)


def find_inputs(paths: Iterable[str | Path], exclude: Path | None = None) -> list[tuple[Path, Path]]:
    """(file, folder it was found under) for every supported file; files given directly
    are returned with their own folder. Hidden files and anything under ``exclude`` are
    skipped; the order is sorted and duplicates are dropped."""
    suffixes = supported_suffixes()
    exclude = exclude.resolve() if exclude is not None else None
    found: list[tuple[Path, Path]] = []
    seen: set[Path] = set()

    def add(f: Path, base: Path) -> None:
        r = f.resolve()
        if r in seen or (exclude is not None and exclude in r.parents):
            return
        seen.add(r)
        found.append((f, base))

    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(p)
                if f.is_file() and f.suffix.lower() in suffixes and not any(s.startswith(".") for s in rel.parts):
                    add(f, p)
        elif p.is_file():
            if p.suffix.lower() not in suffixes:
                raise UnsupportedFormatError(f"{p}: unsupported file type {p.suffix!r} "
                                             f"(supported: {', '.join(sorted(suffixes))})")
            add(p, p.parent)
        else:
            raise MissingFileError("no such file or folder", p)
    return found


def plan(paths: Sequence[str | Path], out_dir: str | Path) -> list[Job]:
    """Jobs for every supported file under ``paths``, writing below ``out_dir``.

    A file found in folder ``D`` goes to ``out_dir / relative path / stem``; a file given
    directly to ``out_dir / stem``. Where two inputs would share an output (``a.bvh`` and
    ``a.fbx``) both get their suffix appended (``a_bvh``, ``a_fbx``).
    """
    out_dir = Path(out_dir)
    inputs = find_inputs(paths, exclude=out_dir)
    bases = [out_dir / f.relative_to(base).parent / f.stem for f, base in inputs]
    counts = Counter(bases)
    jobs, taken = [], set()
    for (f, _), b in zip(inputs, bases):
        if counts[b] > 1:
            b = b.with_name(f"{b.name}_{f.suffix.lower().lstrip('.')}")
        k, unique = 2, b
        while unique in taken:
            unique, k = b.with_name(f"{b.name}_{k}"), k + 1
        taken.add(unique)
        jobs.append(Job(f, unique))
    return jobs


def safe_name(name: str) -> str:
    """A file-name-safe version of an animation name."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return s or "animation"


def _accepts(fn, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def load_for_convert(module, path: Path, animation: str | None, fps: float | None, scale: float | None):
    """Load with the module, passing ``fps``/``scale`` where its ``load`` takes them, and
    resampling / scaling afterwards where it does not."""
    kwargs = {}
    if animation is not None:
        kwargs["animation"] = animation
    if fps is not None and _accepts(module.load, "fps"):
        kwargs["fps"] = fps
    if scale is not None and _accepts(module.load, "scale"):
        kwargs["scale"] = scale
    motion = module.load(path, **kwargs)
    if scale is not None and "scale" not in kwargs:
        motion = scaled(motion, scale)
    if fps is not None:
        motion = motion.at_fps(fps, tolerance=1e-9 * fps)
    return motion


def scaled(motion, factor: float):
    """``motion`` with every length (offsets, translations) multiplied by ``factor``."""
    sk = motion.skeleton
    meta = dict(motion.metadata)
    meta["scale_applied"] = float(factor) * float(meta.get("scale_applied", 1.0))
    return Motion(Skeleton(sk.names, sk.parents, sk.offsets * factor), motion.fps, motion.rotations,
                  motion.positions * factor, motion.name, meta)


def up_to_date(source: Path, outputs: Sequence[Path]) -> bool:
    """True when every output exists and was modified after ``source``."""
    try:
        t = source.stat().st_mtime_ns
        return bool(outputs) and all(o.stat().st_mtime_ns > t for o in outputs)
    except OSError:
        return False


def convert_file(job: Job, fps: float | None = None, scale: float | None = None,
                 compress: bool = True, force: bool = True) -> Result:
    """Convert one file; never raises (the error text goes into the Result).

    With ``force=False`` a file whose outputs are all newer than it is skipped
    (``Result.skipped``), so a re-run of an interrupted batch resumes.
    """
    t0 = time.perf_counter()
    result = Result(str(job.source))
    try:
        module = format_module(job.source)
        names = list(module.animation_names(job.source)) if hasattr(module, "animation_names") else []
        job.dest_base.parent.mkdir(parents=True, exist_ok=True)
        if len(names) <= 1:
            targets = [(names[0] if names else None, job.dest_base.with_name(job.dest_base.name + ".npz"))]
        else:
            used: Counter[str] = Counter()
            targets = []
            for n in names:
                s = safe_name(n)
                used[s] += 1
                s = s if used[s] == 1 else f"{s}_{used[s]}"
                targets.append((n, job.dest_base.with_name(f"{job.dest_base.name}__{s}.npz")))
        if not force and up_to_date(job.source, [out for _, out in targets]):
            result.skipped = True
            result.outputs = [str(out) for _, out in targets]
            targets = []
        for anim, out in targets:
            motion = load_for_convert(module, job.source, anim, fps, scale)
            motion.metadata.setdefault("source", str(job.source))
            if anim is not None:
                motion.metadata["animation"] = anim
            npz.save(motion, out, compress=compress)
            result.outputs.append(str(out))
            result.frames += motion.num_frames
    except KinemaError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    except FileNotFoundError as exc:
        result.error = f"FileNotFoundError: {exc}"
    except Exception as exc:   # a bug or an unexpected file: report it, keep converting the rest
        last = traceback.extract_tb(exc.__traceback__)[-1]
        result.error = f"{type(exc).__name__}: {exc} (at {Path(last.filename).name}:{last.lineno})"
    result.seconds = time.perf_counter() - t0
    return result


def _exit_with_parent() -> None:
    """Pool initializer: on Linux, the worker gets SIGTERM when its parent dies, so a
    killed ``kinema convert`` leaves no worker writing (or sleeping) behind."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))   # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() == 1:          # the parent died before prctl took effect
        os._exit(1)


def convert_all(jobs: Sequence[Job], *, jobs_n: int | None = None, fps: float | None = None,
                scale: float | None = None, compress: bool = True, progress: bool = True,
                force: bool = True) -> Summary:
    """Convert every job, in ``jobs_n`` worker processes (default: CPU count; 1 runs here).

    Returns a Summary; failed files carry their error and the others are still written.
    ``force=False`` skips inputs whose outputs are newer (see :func:`convert_file`).
    """
    from tqdm import tqdm
    t0 = time.perf_counter()
    n = max(1, jobs_n or os.cpu_count() or 1)
    n = min(n, max(1, len(jobs)))
    results: list[Result] = []

    def progress_bar():
        return tqdm(total=len(jobs), unit="file", desc="convert", disable=not progress, dynamic_ncols=True)

    if n == 1:
        with progress_bar() as bar:
            for job in jobs:
                results.append(convert_file(job, fps, scale, compress, force))
                bar.update(1)
    else:
        with ProcessPoolExecutor(max_workers=n, initializer=_exit_with_parent) as pool:
            # submit (and so fork the workers) before tqdm starts its monitor thread
            futures = {pool.submit(convert_file, job, fps, scale, compress, force): job for job in jobs}
            try:
                with progress_bar() as bar:
                    for fut in as_completed(futures):
                        job = futures[fut]
                        try:
                            results.append(fut.result())
                        except BrokenProcessPool as exc:
                            results.append(Result(str(job.source), error=f"worker process died: {exc}"))
                        bar.update(1)
            except KeyboardInterrupt:
                pool.shutdown(wait=False, cancel_futures=True)   # Ctrl-C stops at once
                raise
    order = {str(j.source): i for i, j in enumerate(jobs)}
    results.sort(key=lambda r: order.get(r.source, len(order)))
    return Summary(results, time.perf_counter() - t0)
