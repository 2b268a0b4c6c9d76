"""Every FBX in the shared data imports in a fresh ``python -X faulthandler`` process
with exit code 0: guards the ufbx 0.0.5 wrapper-lifetime crash (wrappers garbage-collected
while the scene is alive segfault or corrupt parent links)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

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
        rest = fbx.load(path) if not names else None
        # parent links from node.parent agree with the children lists, wrapper by wrapper
        s = fbx._Session(path)
        nodes = s.items(s.scene.nodes)
        by_id = {n.element_id: n for n in nodes}
        for n in nodes:
            for c in s.items(n.children):
                p = s.k(c.parent)
                assert p is not None and p.element_id == n.element_id, (c.name, n.name)
        s.close()
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
