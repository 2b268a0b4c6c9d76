"""ufbx 0.0.5's wrappers hold no reference to their scene; a garbage collection that walks
one after its scene is freed crashes the process. FBX files are therefore read in a forked
child. Loading them in random order under a collector that runs on nearly every allocation
crashed the in-process reader for these seeds (exit 139); it must not crash now."""
from __future__ import annotations

import subprocess
import sys

import pytest

CODE = """
import gc, pathlib, random, sys
import kinema
files = sorted(pathlib.Path(sys.argv[1]).glob('**/*.fbx'))
assert len(files) >= 4, files
rng = random.Random(int(sys.argv[2]))
gc.set_threshold(1, 1, 1)
junk = []
for i in range(60):
    f = rng.choice(files)
    ch = kinema.load_character(f)
    m = kinema.load(f)
    assert ch.skeleton.num_joints > 1 and m.num_frames >= 1
    junk = (junk + [[[] for _ in range(rng.randint(0, 2000))]])[-5:]
    if i % 7 == 0:
        gc.collect()
print('ok', len(files))
"""


@pytest.mark.parametrize("seed", [2])   # seeds 1, 2 and 4 all crashed the in-process reader
def test_fbx_loads_survive_aggressive_garbage_collection(shared_data, seed):
    res = subprocess.run([sys.executable, "-X", "faulthandler", "-c", CODE, str(shared_data), str(seed)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.startswith("ok")
