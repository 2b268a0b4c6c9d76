"""Writes are atomic and honour the umask (GLB, npz, BVH); `kinema convert` skips outputs
newer than their input unless --force; the FBX child reader's wait is bounded."""
from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

import kinema
from kinema.cli.main import main
from kinema.io import atomic, fbx, gltf, npz


@pytest.fixture
def umask027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_written_files_honour_the_umask(tmp_path, sample_data, umask027):
    motion = kinema.load(sample_data / "games105" / "walk60.bvh")
    for name in ("m.npz", "m.glb", "m.bvh"):
        kinema.save(motion, tmp_path / name)
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bvh", "m.glb", "m.npz"]   # no temporaries


def test_failed_write_removes_its_temporary_and_keeps_the_old_file(tmp_path):
    target = tmp_path / "f.bin"
    atomic.write_bytes(target, b"old")
    with pytest.raises(ZeroDivisionError):
        with atomic.open_atomic(target) as f:
            f.write(b"half of the new")
            raise ZeroDivisionError
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f.bin"]


GLB_KILL = textwrap.dedent("""
    import sys
    import kinema
    from kinema.io import gltf
    m = kinema.load(sys.argv[2])
    k = 0
    while True:
        gltf.save(m, sys.argv[1])
        print(k, flush=True)
        k += 1
""")


def test_glb_save_is_never_seen_half_written(tmp_path, sample_data):
    """A reader polling the file while another process rewrites it in a loop only ever sees
    complete GLBs (header length == file length), and a SIGKILL leaves a loadable file.
    (A plain open(path, "wb") truncates first: readers catch it empty or half-written.)"""
    import struct

    from kinema.motion.motion import concatenate

    long = concatenate([kinema.load(sample_data / "games105" / "walk60.bvh")] * 40)
    kinema.save(long, tmp_path / "long.npz")
    gltf.save(long, tmp_path / "ref.glb")
    expected = gltf.load(tmp_path / "ref.glb").num_frames
    target = tmp_path / "big.glb"
    proc = subprocess.Popen([sys.executable, "-c", GLB_KILL, str(target), str(tmp_path / "long.npz")],
                            stdout=subprocess.PIPE, text=True)
    reads = torn = 0
    try:
        assert proc.stdout.readline().strip() == "0"            # one complete write done
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end:
            data = target.read_bytes()
            reads += 1
            if len(data) < 12 or struct.unpack_from("<I", data, 8)[0] != len(data):
                torn += 1
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert reads > 50 and torn == 0, f"{torn} of {reads} reads saw a half-written GLB"
    assert gltf.load(target).num_frames == expected             # complete after the kill too


def test_convert_skips_up_to_date_outputs_unless_forced(tmp_path, sample_data, capsys):
    src = tmp_path / "in"
    src.mkdir()
    for name in ("walk60.bvh", "idle.bvh"):
        shutil.copy(sample_data / "games105" / name, src)
    out = tmp_path / "out"
    assert main(["convert", str(src), "-o", str(out), "-q", "-j", "1"]) == 0
    first = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert set(first) == {"walk60.npz", "idle.npz"}
    capsys.readouterr()
    assert main(["convert", str(src), "-o", str(out), "-q", "-j", "1"]) == 0
    assert "2 up to date, skipped" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == first          # nothing rewritten
    later = time.time() + 5
    os.utime(src / "idle.bvh", (later, later))                                      # the input changed
    assert main(["convert", str(src), "-o", str(out), "-q", "-j", "1"]) == 0
    now = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert now["walk60.npz"] == first["walk60.npz"] and now["idle.npz"] != first["idle.npz"]
    assert main(["convert", str(src), "-o", str(out), "-q", "-j", "1", "--force"]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()}["walk60.npz"] != first["walk60.npz"]
    assert npz.load(out / "walk60.npz").num_frames > 0


def test_fbx_reader_wait_is_bounded():
    assert 0 < fbx.READ_TIMEOUT_S <= 600
