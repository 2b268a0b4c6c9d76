"""Character import time per MB: every GLB and FBX in the shared data folder.

For each file kinema's ``load_character`` (meshes, skins, textures decoded; and with
``textures=False``) and ``load`` (the first animation, or the rest pose) are timed; GLB
files are also loaded with ``trimesh.load`` (scene with meshes; trimesh reads no skins
or animations and leaves images to PIL's lazy decoding) as the peer, measured in the same
run and compared with kinema's texture-free character import. FBX has no pip-installable
peer that reads skins, so FBX rows compare with ufbx's bare parse of the same file (the
floor kinema's FBX import builds on). Report, do not gate.

    .venv/bin/python benchmarks/bench_import.py [--repeat 3]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from common import print_table, timeit
from kinema.data import shared_root
from kinema.io import fbx, gltf


def _trimesh():
    try:
        import trimesh
        return lambda p: trimesh.load(str(p), force="scene", process=False)
    except ImportError:
        print("note: trimesh not installed (pip install 'kinema[bench]'); GLB peer skipped")
        return None


def _ufbx_parse(path: Path) -> int:
    """Parse only: ufbx.load_file with the options kinema uses (C code, no Python walk)."""
    import ufbx
    scene = ufbx.load_file(str(path), target_axes=ufbx.axes_right_handed_y_up, target_unit_meters=1.0,
                           space_conversion=ufbx.SpaceConversion.MODIFY_GEOMETRY,
                           generate_missing_normals=True)
    n = len(scene.nodes)     # the list wrapper dies before the scene (see kinema.io.fbx)
    return n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    root = shared_root()
    if root is None:
        print("shared data folder not found (set KINEMA_DATA); nothing to measure")
        return
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in (".glb", ".gltf", ".fbx"))
    peer = _trimesh()
    rows = []
    for path in files:
        mb = path.stat().st_size / 1e6
        module = gltf if path.suffix.lower() in (".glb", ".gltf") else fbx
        t_char = timeit(lambda: module.load_character(path), repeat=args.repeat)
        t_notex = timeit(lambda: module.load_character(path, textures=False), repeat=args.repeat)
        t_motion = timeit(lambda: module.load(path), repeat=args.repeat)
        row = [str(path.relative_to(root)), round(mb, 2), t_char / mb * 1e3, t_notex / mb * 1e3,
               t_motion / mb * 1e3]
        if peer is not None and module is gltf:
            t_peer = timeit(lambda: peer(path), repeat=args.repeat)
            row += [t_peer / mb * 1e3, t_peer / t_notex]
        elif module is fbx:
            # no FBX peer reads skins; ufbx's own parse (same options) is the floor we add to
            t_parse = timeit(lambda: _ufbx_parse(path), repeat=args.repeat)
            row += [f"ufbx parse {t_parse / mb * 1e3:.2f}", t_parse / t_notex]
        else:
            row += ["-", "-"]
        rows.append(row)
    print_table("Import time per MB (ms/MB, median of runs; ratio > 1: kinema faster)",
                ["file", "MB", "kinema character", "kinema character, no textures",
                 "kinema load (motion)", "peer (GLB: trimesh.load)", "peer / kinema (no textures)"], rows)


if __name__ == "__main__":
    main()
