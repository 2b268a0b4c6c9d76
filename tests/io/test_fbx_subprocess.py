"""Every FBX in the shared data imports in a fresh ``python -X faulthandler`` process
with exit code 0: guards the ufbx 0.0.5 wrapper-lifetime crash (wrappers garbage-collected
while the scene is alive segfault or corrupt parent links)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kinema.data import shared_root

SCRIPT = textwrap.dedent("""
    import gc, sys
    import numpy as np
    from pathlib import Path
    from kinema.io import fbx
    path = Path(sys.argv[1])
    for _ in range(3):
        names = fbx.animation_names(path)
        info = fbx.info(path)
        assert info["animations"] == names
        character = fbx.load_character(path)
        gc.collect()
        for i in range(len(names)):
            m = fbx.load(path, animation=i, fps=15)
            assert np.isfinite(m.rotations).all() and m.num_joints == character.skeleton.num_joints
            gc.collect()
        if not names:
            rest = fbx.load(path)
            assert rest.num_frames == 1 and rest.metadata["bind_pose"]
        # parent links from node.parent agree with the children lists, wrapper by wrapper
        # (inside a function: no ufbx wrapper may outlive the session that made it)
        def check_parents(s):
            nodes = s.items(s.scene.nodes)
            for n in nodes:
                for c in s.items(n.children):
                    p = s.k(c.parent)
                    assert p is not None and p.element_id == n.element_id, (c.name, n.name)
            return len(nodes)
        assert fbx._with_session(path, check_parents) > 0
        gc.collect()
    print("ok", len(names), character.skeleton.num_joints, sum(m.num_vertices for m in character.meshes))
""")


def _fbx_files():
    root = shared_root()
    return sorted(root.rglob("*.fbx")) if root is not None else []


@pytest.mark.parametrize("path", _fbx_files(), ids=lambda p: p.name)
def test_fbx_import_survives_in_a_fresh_process(path):
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", SCRIPT, str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert proc.stdout.startswith("ok ")


def test_every_shared_fbx_is_covered(shared_data):
    names = {p.name for p in _fbx_files()}
    assert {"geno.fbx", "geno_bind.fbx", "dog.fbx", "cranberry.fbx", "flair.fbx"} <= names


ERRORS = textwrap.dedent("""
    import gc, sys
    from pathlib import Path
    from kinema.errors import FormatError
    from kinema.io import fbx
    bad, good = Path(sys.argv[1]), Path(sys.argv[2])
    kept = []
    for _ in range(5):
        try:
            fbx.load_character(bad)
        except FormatError as e:
            kept.append(e)            # the caller keeps the exception and its traceback
        fbx.load(good)
        gc.collect()
    print("ok", len(kept))
""")


def test_failed_imports_leave_no_wrappers_behind(shared_data, tmp_path):
    """An error raised on a broken file keeps no ufbx wrapper alive in its traceback once
    the scene is freed: later imports and garbage collections run clean."""
    good = shared_data / "characters" / "dog" / "dog.fbx"
    truncated = tmp_path / "truncated.fbx"
    truncated.write_bytes(good.read_bytes()[:40000])
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", ERRORS, str(truncated), str(good)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok 5"


MUTANTS = textwrap.dedent("""
    import gc, sys
    import numpy as np
    from pathlib import Path
    from kinema.errors import KinemaError
    from kinema.io import fbx
    outcomes = {"ok": 0, "error": 0}
    for p in sorted(Path(sys.argv[1]).glob("*.fbx")):
        for fn in (fbx.load, lambda q: fbx.load_character(q, textures=False)):
            try:
                out = fn(p)
            except KinemaError as e:
                assert str(p) in str(e), str(e)
                outcomes["error"] += 1
                continue
            if hasattr(out, "num_frames"):
                assert out.num_frames > 0 and out.num_joints > 0
            else:
                assert out.skeleton.num_joints > 0
            outcomes["ok"] += 1
        gc.collect()
    print("ok", outcomes["ok"], outcomes["error"])
""")


def test_mutated_fbx_files_give_results_or_format_errors(shared_data, tmp_path):
    """40 byte-mutated and truncated copies of a real FBX (fixed seed), all read in one
    faulthandler process: each gives a result or a FormatError naming the file."""
    src = (shared_data / "characters" / "geno" / "geno.fbx").read_bytes()
    rng = np.random.default_rng(7)
    for k in range(40):
        data = bytearray(src)
        for i in rng.integers(0, len(data), size=int(rng.integers(1, 20))):
            data[i] = int(rng.integers(0, 256))
        if k % 4 == 0:
            data = data[: int(rng.integers(0, len(data)))]
        (tmp_path / f"mutant{k:02d}.fbx").write_bytes(bytes(data))
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", MUTANTS, str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok, errors = map(int, proc.stdout.split()[1:])
    assert ok + errors == 80 and errors > 0


def test_a_reader_killed_by_a_signal_is_retried_then_reported(shared_data, tmp_path, monkeypatch):
    """A forked reader that dies by a signal is tried again (and last in a freshly spawned
    interpreter); one that dies every time is a FormatError naming the exit code, never a
    crash of the caller."""
    import faulthandler
    import os
    import signal

    from kinema.errors import FormatError
    from kinema.io import fbx

    path = next(iter(sorted((shared_data / "characters").rglob("*.fbx"))), None)
    assert path is not None, "no FBX in the shared data"
    real = fbx._session_result
    marker = tmp_path / "attempts"

    def segfault():                         # quietly: pytest's faulthandler would print the stack
        faulthandler.disable()
        os.kill(os.getpid(), signal.SIGSEGV)

    def crash_first(p, fn, close=True):     # runs in the forked child
        n = len(marker.read_text()) if marker.exists() else 0
        marker.write_text("x" * (n + 1))
        if n == 0:
            segfault()
        return real(p, fn, close)

    monkeypatch.setattr(fbx, "_session_result", crash_first)
    assert fbx.info(path)["has_mesh"] and marker.read_text() == "xx"

    def always(p, fn, close=True):          # every forked child dies
        segfault()

    monkeypatch.setattr(fbx, "_session_result", always)
    # the spawned interpreter does not inherit the patch: the last attempt reads the file
    assert fbx.info(path)["has_mesh"]
    calls = []

    def dead(p, fn, method="fork"):
        calls.append(method)
        return "crash", None, -11

    monkeypatch.setattr(fbx, "_read_in_child", dead)
    with pytest.raises(FormatError, match=r"exit code -11, 4 attempts"):
        fbx.info(path)
    assert calls == ["fork", "fork", "fork", "spawn"]
