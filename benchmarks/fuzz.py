"""Fuzz kinema's loaders with seeded mutants of real files, each loaded in a forked child.

Formats: BVH, GLB, glTF (JSON + external buffer), FBX (when ../shared/data is present),
motion npz, safetensors checkpoint, matching database. Mutations: truncation, byte flips,
numeric edge cases (subnormal, huge, NaN, inf, FLT_MAX), deep JSON, size bombs (npz
headers, zip members, safetensors headers, glTF counts) and hostile URIs (absolute,
``..``, ``/dev/zero``, ``file:``).

Outcome of one mutant (a child process with a 4 GiB address-space cap):

* ``crash``: the child died by a signal; ``hang``: no answer within the timeout;
* ``non_kinema``: an exception that is not a KinemaError (or a KinemaError that does not
  name the file);
* ``bad_load``: it loaded, but with zero frames or non-finite values;
* ``rejected``: a KinemaError naming the file; ``loaded``: a valid result.

``peak_mb`` is the largest resident-memory growth of a child over the parent's (``wait4``
rusage), and ``peak_ratio_ok`` whether every load stayed below 20x its file size + 200 MB.

Usage: ``python benchmarks/fuzz.py [--mutants N] [--seed S] [--formats bvh,glb,...] [--out FILE]``
"""
from __future__ import annotations

import argparse
import io
import json
import os
import resource
import select
import signal
import struct
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

OUTCOMES = ("crash", "hang", "non_kinema", "bad_load", "rejected", "loaded")
EDGE_NUMBERS = ["1e-320", "4.9e-324", "1e308", "-1e308", "3.4028235e38", "1e39", "nan", "inf", "-inf", "-0",
                "0", "1e30", "99999999999999999999"]
HOSTILE_URIS = ["/etc/passwd", "../secret.bin", "../../../../../../etc/passwd", "/dev/zero", "file:///etc/passwd",
                "http://example.com/x.bin", "sub/../../secret.bin", "C:\\Windows\\win.ini", "\\\\server\\share\\x",
                "data:application/octet-stream;base64," + "A" * 64]


# ----------------------------------------------------------------------------- seeds
def seed_files(folder: Path) -> dict[str, Path]:
    """One real file per format, written under ``folder`` (FBX only with the shared data)."""
    import torch

    import kinema
    from kinema.data import sample_root, shared_root
    from kinema.io import gltf_document as gd
    from kinema.matching.database import build_database
    from kinema.nn.checkpoint import save_checkpoint
    from kinema.nn.models import MLP

    sample = sample_root()
    seeds = {"bvh": sample / "games105" / "walk60.bvh", "glb": sample / "fox" / "fox.glb"}
    text, blob = gd.parse_glb(seeds["glb"].read_bytes(), seeds["glb"])
    doc = json.loads(text)
    doc["buffers"][0]["uri"] = "fox.bin"
    (folder / "gltf").mkdir(exist_ok=True)
    (folder / "gltf" / "fox.bin").write_bytes(blob)
    (folder / "gltf" / "fox.gltf").write_text(json.dumps(doc))
    seeds["gltf"] = folder / "gltf" / "fox.gltf"
    motion = kinema.load(seeds["bvh"])
    seeds["npz"] = kinema.save(motion, folder / "walk.npz")
    torch.manual_seed(0)
    seeds["safetensors"] = save_checkpoint(folder / "m.safetensors", MLP(6, 4, hidden=(16,)),
                                           config={"data": {"clips": []}},
                                           training_state={"step": 1, "m": [torch.ones(3)]})
    clips = [kinema.load(sample / "games105" / n) for n in ("walk60.bvh", "run_forward.bvh")]
    seeds["database"] = build_database(clips, "games105", progress=False).save(folder / "db.npz")
    shared = shared_root()
    if shared is not None and (shared / "cmu" / "fbx" / "07_01_cmu.fbx").is_file():
        seeds["fbx"] = shared / "cmu" / "fbx" / "07_01_cmu.fbx"
    return seeds


# ----------------------------------------------------------------------------- mutators
def truncate(data: bytes, rng) -> bytes:
    return data[: int(rng.integers(0, max(1, len(data))))]


def flip_bytes(data: bytes, rng) -> bytes:
    out = bytearray(data)
    n = int(rng.integers(1, 32))
    head = min(len(out), 4096)
    for _ in range(n):
        i = int(rng.integers(0, head if rng.random() < 0.5 else len(out))) if out else 0
        if out:
            out[i] = int(rng.integers(0, 256))
    return bytes(out)


def edge_numbers_text(data: bytes, rng) -> bytes:
    """Replace a few numeric tokens of a text file by edge-case numbers."""
    tokens = data.split(b" ")
    for _ in range(int(rng.integers(1, 6))):
        i = int(rng.integers(0, len(tokens)))
        tail = b"\n" if tokens[i].endswith(b"\n") else b""
        tokens[i] = str(rng.choice(EDGE_NUMBERS)).encode() + tail
    return b" ".join(tokens)


def _json_paths(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix + (k,)
            yield from _json_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:20]):
            yield prefix + (i,)
            yield from _json_paths(v, prefix + (i,))


def _set(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def mutate_json(doc: dict, rng) -> dict:
    """Edge numbers, deep nesting, huge counts or junk at random places of a JSON object."""
    doc = json.loads(json.dumps(doc))
    paths = list(_json_paths(doc))
    for _ in range(int(rng.integers(1, 4))):
        path = paths[int(rng.integers(0, len(paths)))]
        kind = rng.integers(0, 5)
        value = float(rng.choice(EDGE_NUMBERS))
        if kind == 1:
            depth = int(rng.choice([50, 1000, 100_000]))
            value = json.loads("[" * min(depth, 900) + "]" * min(depth, 900))
        elif kind == 2:
            value = int(rng.choice([2 ** 31, 2 ** 40, 10 ** 12, -1]))
        elif kind == 3:
            value = "junk"
        elif kind == 4:
            value = [3.4028235e38] * 3
        try:
            _set(doc, path, value)
        except (KeyError, IndexError, TypeError):
            pass
    return doc


def _glb(doc: dict, blob: bytes) -> bytes:
    js = json.dumps(doc, allow_nan=True).encode()
    js += b" " * (-len(js) % 4)
    blob = blob + b"\0" * (-len(blob) % 4)
    body = struct.pack("<II", len(js), 0x4E4F534A) + js + struct.pack("<II", len(blob), 0x004E4942) + blob
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


def mutants_glb(data: bytes, rng) -> bytes:
    from kinema.io.gltf_document import parse_glb
    text, blob = parse_glb(data, "seed.glb")
    doc = json.loads(text)
    r = rng.random()
    if r < 0.3:
        return flip_bytes(data, rng)
    if r < 0.4:
        return truncate(data, rng)
    if r < 0.55:
        doc["buffers"][0]["uri"] = str(rng.choice(HOSTILE_URIS))
        return _glb(doc, blob)
    if r < 0.6:                                    # 100k nested brackets in the JSON chunk
        js = (json.dumps(doc)[:-1] + ', "extras": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()
        js += b" " * (-len(js) % 4)
        return struct.pack("<4sII", b"glTF", 2, 20 + len(js)) + struct.pack("<II", len(js), 0x4E4F534A) + js
    return _glb(mutate_json(doc, rng), blob)


def mutants_gltf(folder: Path, seed: Path, rng) -> bytes:
    doc = json.loads(seed.read_text())
    r = rng.random()
    if r < 0.5:
        doc["buffers"][0]["uri"] = str(rng.choice(HOSTILE_URIS))
        if rng.random() < 0.3:
            doc.setdefault("images", []).append({"uri": str(rng.choice(HOSTILE_URIS))})
    elif r < 0.6:
        doc["buffers"][0]["byteLength"] = int(rng.choice([10 ** 12, 2 ** 31, -5]))
    else:
        doc = mutate_json(doc, rng)
    return json.dumps(doc, allow_nan=True).encode()


def _npz_members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


def _zip(members: dict[str, bytes], compress: bool = True) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for n, d in members.items():
            z.writestr(n, d)
    return buf.getvalue()


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def mutants_npz(data: bytes, rng, metadata_key: str = "metadata") -> bytes:
    """Zip-level and array-level mutants of an npz (motion or database)."""
    r = rng.random()
    if r < 0.2:
        return flip_bytes(data, rng)
    if r < 0.3:
        return truncate(data, rng)
    members = _npz_members(data)
    names = sorted(members)
    name = names[int(rng.integers(0, len(names)))]
    arr = np.load(io.BytesIO(members[name]), allow_pickle=False)
    if r < 0.45:                                   # header declares a huge shape
        header = io.BytesIO()
        shape = tuple(int(rng.choice([10 ** 6, 10 ** 9, 10 ** 12])) for _ in range(max(1, arr.ndim)))
        np.lib.format.write_array_header_1_0(header, {"descr": arr.dtype.str, "fortran_order": False,
                                                      "shape": shape})
        members[name] = header.getvalue() + members[name][-64:]
    elif r < 0.55:                                 # zip bomb: a constant array inflating 1000x
        big = np.zeros((int(rng.choice([10 ** 7, 5 * 10 ** 7])),), np.float32)
        members[name] = _npy(big)
    elif r < 0.7 and arr.dtype.kind == "f":        # numeric edge values
        arr = arr.astype(np.float64).copy()
        if arr.size:
            idx = rng.integers(0, arr.size, size=int(rng.integers(1, 8)))
            arr.reshape(-1)[idx] = float(rng.choice(["nan", "inf", "1e39", "1e-320", "5e38", "0"]))
        members[name] = _npy(arr)
    elif r < 0.8:                                  # deep or junk JSON metadata
        deep = "[" * 100_000 + "]" * 100_000
        text = deep if rng.random() < 0.5 else '{"a": ' + json.dumps([1e308] * 3) + "}"
        key = metadata_key + ".npy"
        if members.get(key, b"")[:6] == b"\x93NUMPY" and np.load(io.BytesIO(members[key])).dtype == np.uint8:
            members[key] = _npy(np.frombuffer(text.encode(), np.uint8))
        else:
            members[key] = _npy(np.asarray(text))
    elif r < 0.9:                                  # zero frames / empty arrays
        members[name] = _npy(np.zeros((0,) + arr.shape[1:], arr.dtype))
    else:                                          # a member removed
        members.pop(name)
    return _zip(members)


def mutants_safetensors(data: bytes, rng) -> bytes:
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    r = rng.random()
    if r < 0.2:
        return flip_bytes(data, rng)
    if r < 0.3:
        return truncate(data, rng)
    if r < 0.4:
        return (1 << int(rng.integers(20, 62))).to_bytes(8, "little") + data[8:]
    meta = header["__metadata__"]
    if r < 0.6:
        arch = json.loads(meta["architecture"])
        arch["hparams"]["hidden"] = [int(rng.choice([10 ** 5, 10 ** 6, 50_000]))] * int(rng.integers(1, 3))
        meta["architecture"] = json.dumps(arch)
    elif r < 0.7:
        meta[str(rng.choice(["config", "architecture", "training_state"]))] = "[" * 100_000 + "]" * 100_000
    elif r < 0.8:
        meta["config"] = "null"
    elif r < 0.9:                                  # NaN / inf weights
        body = bytearray(body)
        for _ in range(int(rng.integers(1, 5))):
            i = int(rng.integers(0, max(1, len(body) // 4))) * 4
            body[i:i + 4] = struct.pack("<f", float(rng.choice(["nan", "inf", "-inf"])))
        body = bytes(body)
    else:                                          # a tensor entry dropped from the header
        names = [k for k in header if k != "__metadata__"]
        header.pop(names[int(rng.integers(0, len(names)))])
    js = json.dumps(header).encode()
    js += b" " * (-len(js) % 8)
    return len(js).to_bytes(8, "little") + js + body


def mutants_bvh(data: bytes, rng) -> bytes:
    r = rng.random()
    if r < 0.25:
        return flip_bytes(data, rng)
    if r < 0.4:
        return truncate(data, rng)
    if r < 0.55:
        text = data.decode("latin-1")
        which = rng.choice(["Frame Time:", "Frames:"])
        i = text.find(which)
        j = text.find("\n", i)
        value = str(rng.choice(EDGE_NUMBERS + ["100000000", "0"])) if which == "Frame Time:" else \
            str(rng.choice(["0", "100000000000", "-1", "1"]))
        return (text[:i] + f"{which} {value}" + text[j:]).encode("latin-1")
    return edge_numbers_text(data, rng)


def mutants_fbx(data: bytes, rng) -> bytes:
    return truncate(data, rng) if rng.random() < 0.25 else flip_bytes(data, rng)


# ----------------------------------------------------------------------------- loading
def load_and_check(fmt: str, path: Path) -> str:
    """Load ``path`` as ``fmt``; "loaded", "bad_load", "rejected" or "non_kinema:<type>"."""
    from kinema.errors import KinemaError
    try:
        results = _load(fmt, path)
    except KinemaError as e:
        return "rejected" if str(path) in str(e) or path.name in str(e) else f"non_kinema:unnamed {type(e).__name__}"
    except Exception as e:  # noqa: BLE001 - what the fuzzer looks for
        return f"non_kinema:{type(e).__name__}: {str(e)[:80]}"
    return "loaded" if all(_valid(r) for r in results) else "bad_load"


def _load(fmt: str, path: Path) -> list:
    import kinema
    from kinema.io import fbx, gltf, npz
    if fmt == "bvh":
        return [kinema.load(path)]
    if fmt in ("glb", "gltf"):
        return [gltf.load(path), gltf.load_character(path, textures=True)]
    if fmt == "fbx":
        return [fbx.load(path)]
    if fmt == "npz":
        return [npz.load(path)]
    if fmt == "safetensors":
        from kinema.nn.checkpoint import load_checkpoint
        return [load_checkpoint(path)[0]]
    if fmt == "database":
        from kinema.matching.database import Database
        return [Database.load(path)]
    raise ValueError(fmt)


def _valid(result) -> bool:
    if hasattr(result, "num_frames"):
        return result.num_frames > 0 and bool(np.isfinite(result.rotations).all() and np.isfinite(result.positions).all())
    if hasattr(result, "meshes"):
        return bool(np.isfinite(result.bind_positions).all()) and all(np.isfinite(m.positions).all() for m in result.meshes)
    if hasattr(result, "features"):
        return result.rows > 0 and bool(np.isfinite(result.features).all())
    import torch
    return all(bool(torch.isfinite(p).all()) for p in result.parameters())


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def run_in_child(fmt: str, path: Path, timeout: float, mem_limit: int = 4 << 30) -> tuple[str, float]:
    """(outcome, peak resident growth in MB) of loading ``path`` in a forked child."""
    read, write = os.pipe()
    base = _rss_kb()
    pid = os.fork()
    if pid == 0:                                                     # child
        os.close(read)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
            outcome = load_and_check(fmt, path)
        except BaseException as e:  # noqa: BLE001
            outcome = f"non_kinema:{type(e).__name__}"
        os.write(write, outcome.encode()[:4000])
        os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], timeout)
    outcome = os.read(read, 4096).decode() if ready else ""
    os.close(read)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    if not ready:
        outcome = "hang"
    elif os.WIFSIGNALED(status) or not outcome:
        outcome = "crash"
    return outcome, max(0.0, (usage.ru_maxrss - base) / 1024.0)


@dataclass
class Tally:
    """Outcomes of one format."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    peak_mb: float = 0.0
    over_memory: int = 0
    examples: list[str] = field(default_factory=list)


MUTATORS: dict[str, Callable] = {"bvh": mutants_bvh, "glb": mutants_glb, "fbx": mutants_fbx, "npz": mutants_npz,
                                 "safetensors": mutants_safetensors,
                                 "database": lambda d, rng: mutants_npz(d, rng, "metadata")}


def fuzz(mutants: int | dict[str, int], seed: int = 0, formats: list[str] | None = None, timeout: float = 30.0,
         workdir: Path | None = None, log: Callable[[str], None] | None = None) -> dict[str, Tally]:
    """Run ``mutants`` mutants of each format (an int, or a count per format name);
    returns the tallies by format."""
    own = workdir is None
    tmp = tempfile.TemporaryDirectory() if own else None
    folder = Path(tmp.name) if own else workdir
    try:
        seeds = seed_files(folder)
        (folder / "secret.bin").write_bytes(b"\0" * 4096)
        formats = [f for f in (formats or list(seeds)) if f in seeds]
        tallies = {}
        for fmt in formats:
            rng = np.random.default_rng([seed, sorted(MUTATORS.keys() | {"gltf"}).index(fmt)])
            tally = Tally()
            data = seeds[fmt].read_bytes()
            count = mutants.get(fmt, 0) if isinstance(mutants, dict) else mutants
            for k in range(count):
                if fmt == "gltf":
                    target = seeds["gltf"].parent / f"mutant{k % 4}.gltf"
                    target.write_bytes(mutants_gltf(folder, seeds["gltf"], rng))
                else:
                    target = folder / f"mutant{k % 4}{seeds[fmt].suffix}"
                    target.write_bytes(MUTATORS[fmt](data, rng))
                size_mb = target.stat().st_size / 2 ** 20
                outcome, peak = run_in_child(fmt, target, timeout)
                key = outcome.split(":")[0]
                tally.counts[key] += 1
                tally.peak_mb = max(tally.peak_mb, peak)
                if peak > 20 * size_mb + 200:
                    tally.over_memory += 1
                if key not in ("rejected", "loaded") and len(tally.examples) < 5:
                    tally.examples.append(f"{fmt} #{k}: {outcome}")
            tallies[fmt] = tally
            if log:
                log(f"{fmt}: {tally.counts} peak {tally.peak_mb:.1f} MB")
        return tallies
    finally:
        if tmp is not None:
            tmp.cleanup()


def table(tallies: dict[str, Tally]) -> str:
    """Markdown table of the outcomes per format."""
    head = "| format | mutants | " + " | ".join(OUTCOMES) + " | peak MB | over 20x+200MB |"
    lines = [head, "|" + "---|" * (len(OUTCOMES) + 4)]
    for fmt, t in tallies.items():
        lines.append(f"| {fmt} | {sum(t.counts.values())} | " + " | ".join(str(t.counts[k]) for k in OUTCOMES)
                     + f" | {t.peak_mb:.1f} | {t.over_memory} |")
    examples = [e for t in tallies.values() for e in t.examples]
    if examples:
        lines += ["", "Failures (first few per format):", *[f"- {e}" for e in examples]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", type=int, default=1000, help="mutants per format (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--formats", default=None, help="comma-separated subset of bvh,glb,gltf,fbx,npz,safetensors,database")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds before a load counts as a hang")
    ap.add_argument("--out", help="also write the table (markdown) here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    tallies = fuzz(args.mutants, args.seed, args.formats.split(",") if args.formats else None, args.timeout,
                   log=lambda s: print(s, file=sys.stderr, flush=True))
    text = table(tallies) + f"\n\n{args.mutants} mutants per format, seed {args.seed}, {time.perf_counter() - t0:.0f} s."
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    bad = sum(t.counts[k] for t in tallies.values() for k in ("crash", "hang", "non_kinema", "bad_load"))
    return 1 if bad or any(t.over_memory for t in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
