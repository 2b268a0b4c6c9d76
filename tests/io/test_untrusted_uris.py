"""A glTF from anywhere must not read local files: buffer and image URIs are relative
paths inside the file's folder (no absolute path, no '..' or symlink escape, no URL
scheme), regular files only, read up to ``byteLength``; data URIs are bounded."""
from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from kinema.errors import FormatError
from kinema.io import gltf
from kinema.io.external import read_inside
from kinema.limits import Limits

# one triangle: 3 float32 VEC3 positions = 36 bytes
TRIANGLE = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32).tobytes()


def _gltf(folder: Path, buffer_uri: str, byte_length: int = 36, image_uri: str | None = None,
          name: str = "mesh.gltf") -> Path:
    """A one-triangle .gltf in ``folder`` whose buffer 0 (and optional image 0) use the URIs."""
    doc = {
        "asset": {"version": "2.0"},
        "buffers": [{"uri": buffer_uri, "byteLength": byte_length}],
        "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": 36}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3",
                       "min": [0, 0, 0], "max": [1, 1, 0]}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}}]}],
        "nodes": [{"name": "tri", "mesh": 0}],
        "scenes": [{"nodes": [0]}],
    }
    if image_uri is not None:
        doc["images"] = [{"uri": image_uri}]
        doc["textures"] = [{"source": 0}]
        doc["materials"] = [{"pbrMetallicRoughness": {"baseColorTexture": {"index": 0}}}]
        doc["meshes"][0]["primitives"][0]["material"] = 0
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def _refused(path: Path, match: str, textures: bool = False) -> None:
    with pytest.raises(FormatError, match=match) as e:
        gltf.load_character(path, textures=textures)
    assert str(path) in str(e.value)


@pytest.fixture
def folder(tmp_path) -> Path:
    """tmp/asset/ holds the glTF; tmp/secret.bin lies outside it."""
    (tmp_path / "secret.bin").write_bytes(TRIANGLE * 4)
    asset = tmp_path / "asset"
    asset.mkdir()
    return asset


def test_relative_buffer_inside_the_folder_loads(folder):
    (folder / "sub").mkdir()
    (folder / "sub" / "tri.bin").write_bytes(TRIANGLE + b"trailing bytes ignored")
    c = gltf.load_character(_gltf(folder, "sub/tri%2Ebin"))          # percent-encoded '.'
    np.testing.assert_array_equal(c.meshes[0].positions, np.frombuffer(TRIANGLE, np.float32).reshape(3, 3))
    # '..' that stays inside the folder is fine
    assert gltf.load_character(_gltf(folder, "sub/../sub/tri.bin")).meshes[0].num_vertices == 3


def test_absolute_buffer_uri_is_refused(folder):
    _refused(_gltf(folder, "/etc/passwd"), "buffer 0: absolute path '/etc/passwd' refused")
    _refused(_gltf(folder, str(folder.parent / "secret.bin")), "absolute path")
    _refused(_gltf(folder, "C:\\Windows\\win.ini"), "absolute path")


def test_url_schemes_are_refused(folder):
    _refused(_gltf(folder, "file:///etc/passwd"), "URI scheme 'file' refused")
    _refused(_gltf(folder, "https://example.com/x.bin"), "URI scheme 'https' refused")


def test_dotdot_escape_is_refused(folder):
    _refused(_gltf(folder, "../secret.bin"), r"'\.\./secret\.bin' resolves to .*outside the file's folder")
    _refused(_gltf(folder, "sub/..%2F..%2Fsecret.bin"), "outside the file's folder")
    _refused(_gltf(folder, "..\\secret.bin"), "outside the file's folder")


def test_symlink_escape_is_refused(folder):
    (folder / "link.bin").symlink_to(folder.parent / "secret.bin")
    _refused(_gltf(folder, "link.bin"), "outside the file's folder")
    (folder / "zero.bin").symlink_to("/dev/zero")
    _refused(_gltf(folder, "zero.bin"), "outside the file's folder")


def test_dev_zero_is_refused_without_reading(folder):
    _refused(_gltf(folder, "/dev/zero", byte_length=36), "absolute path")
    _refused(_gltf(folder, "../../../../../../../../dev/zero"), "outside the file's folder")


def test_non_regular_files_inside_the_folder_are_refused(folder):
    os.mkfifo(folder / "pipe.bin")                    # opening a FIFO for reading would block
    _refused(_gltf(folder, "pipe.bin"), "'pipe.bin' is not a regular file")
    (folder / "dir.bin").mkdir()
    _refused(_gltf(folder, "dir.bin"), "buffer 0")


def test_read_at_most_byte_length(folder):
    (folder / "big.bin").write_bytes(TRIANGLE + b"\0" * 1_000_000)
    doc = gltf.gd.open_document(_gltf(folder, "big.bin"))
    assert len(doc.buffers[0]) == 36                  # not the megabyte after it
    _refused(_gltf(folder, "big.bin", byte_length=2_000_000), "holds 1000036 bytes, fewer than the declared 2000000")
    _refused(_gltf(folder, "big.bin", byte_length=-1), "invalid byteLength -1")
    with pytest.raises(FormatError, match="over the limit"):
        gltf.gd.open_document(_gltf(folder, "big.bin", byte_length=500_000), limits=Limits(max_external_bytes=1000))


def test_data_uri_is_bounded(folder):
    uri = "data:application/octet-stream;base64," + base64.b64encode(TRIANGLE).decode()
    assert gltf.load_character(_gltf(folder, uri)).meshes[0].num_vertices == 3
    small = Limits(max_data_uri_bytes=100)
    big = "data:application/octet-stream;base64," + "A" * 4000
    with pytest.raises(FormatError, match=r"mesh.gltf: buffer 0: data URI decodes to about 3000 bytes, over the limit of 36"):
        gltf.gd.open_document(_gltf(folder, big), limits=small)
    with pytest.raises(FormatError, match="byteLength 3000 is over the limit of 100"):
        gltf.gd.open_document(_gltf(folder, big, byte_length=3000), limits=small)


def test_image_uris_follow_the_same_rule(folder):
    import imageio.v3 as iio

    (folder / "tri.bin").write_bytes(TRIANGLE)
    png = io.BytesIO()
    iio.imwrite(png, np.full((4, 4, 3), 200, np.uint8), extension=".png")
    (folder / "ok.png").write_bytes(png.getvalue())
    (folder.parent / "secret.png").write_bytes(png.getvalue())
    c = gltf.load_character(_gltf(folder, "tri.bin", image_uri="ok.png"))
    assert c.meshes[0].texture.shape == (4, 4, 4) and c.meshes[0].texture[0, 0, 0] == 200
    _refused(_gltf(folder, "tri.bin", image_uri="/etc/passwd"), "image 0: absolute path", textures=True)
    _refused(_gltf(folder, "tri.bin", image_uri="../secret.png"), "image 0: .*outside", textures=True)


def test_read_inside_directly(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"hello")
    assert read_inside("a.txt", tmp_path, tmp_path / "x.fbx", "texture", 100) == b"hello"
    with pytest.raises(FormatError, match=r"x.fbx: texture: 'a.txt' is 5 bytes, over the limit of 4"):
        read_inside("a.txt", tmp_path, tmp_path / "x.fbx", "texture", 4)
    with pytest.raises(FormatError, match="empty or invalid"):
        read_inside("a\0.txt", tmp_path, tmp_path / "x.fbx", "texture", 100)
