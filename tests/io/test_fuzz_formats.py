"""Seeded fuzz of every loader in forked child processes (benchmarks/fuzz.py's engine on
a few hundred mutants): truncation, byte flips, numeric edge cases, deep JSON, size bombs
and hostile URIs never crash, hang, raise a non-KinemaError, load zero frames or
non-finite values, or use more than 20x the file size + 200 MB. The hypothesis tests in
test_bvh_fuzz.py and test_gltf_fuzz.py mutate in-process; this one covers every format
(npz, safetensors, database and FBX too) with the process isolation a crash needs."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("kinema_bench_fuzz", ROOT / "benchmarks" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


COUNTS = {"bvh": 60, "glb": 50, "gltf": 40, "npz": 60, "safetensors": 50, "database": 40, "fbx": 20}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks children and reads /proc")
def test_mutants_of_every_format_fail_cleanly(tmp_path):
    fuzz = _fuzz_module()
    # each mutant is its own child with a 20-s hang timeout (counted as "hang" below); the
    # total time is no assertion: it measures the machine's load, not the loaders
    tallies = fuzz.fuzz(COUNTS, seed=18, timeout=20.0, workdir=tmp_path)
    report = fuzz.table(tallies)
    for fmt, t in tallies.items():
        assert sum(t.counts.values()) == COUNTS[fmt]
        for bad in ("crash", "hang", "non_kinema", "bad_load"):
            assert t.counts[bad] == 0, f"{fmt}: {bad}\n{report}"
        assert t.over_memory == 0, report
        assert t.counts["rejected"] > 0, report          # the mutants reach the checks
    loaded = sum(t.counts["loaded"] for t in tallies.values())
    assert loaded > 0, report                            # and some stay valid files
    assert {"bvh", "glb", "gltf", "npz", "safetensors", "database"} <= set(tallies)


def test_hostile_uri_mutants_are_refused_not_read(tmp_path):
    """Every glTF whose buffer URI is hostile is rejected (none loads with foreign bytes)."""
    fuzz = _fuzz_module()
    seeds = fuzz.seed_files(tmp_path)
    import json
    for uri in fuzz.HOSTILE_URIS[:-1]:                    # the last one is a (short) data: URI
        doc = json.loads(seeds["gltf"].read_text())
        doc["buffers"][0]["uri"] = uri
        target = seeds["gltf"].parent / "hostile.gltf"
        target.write_text(json.dumps(doc))
        assert fuzz.run_in_child("gltf", target, 20.0)[0] == "rejected", uri
