"""The documentation: every tutorial's (and the quickstart's) Python blocks run, in order,
in one namespace per page; the site builds with ``mkdocs build --strict``."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [DOCS / "quickstart.md", *sorted((DOCS / "tutorials").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: Path) -> list[str]:
    return BLOCK.findall(page.read_text())


def test_every_tutorial_has_code():
    assert len(PAGES) >= 6
    for page in PAGES:
        assert python_blocks(page), f"{page.name} has no python block"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_tutorial_code_runs(page, shared_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for i, block in enumerate(python_blocks(page)):
        try:
            exec(compile(block, f"{page.name}[block {i}]", "exec"), namespace)
        except Exception as exc:  # name the page and block in the failure
            raise AssertionError(f"{page.name} block {i} failed: {exc!r}\n{block}") from exc


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocstrings")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site" / "tutorials" / "tracking" / "index.html").exists()
    api = (tmp_path / "site" / "api" / "serve" / "index.html").read_text()
    assert "MotionViewer" in api and "ServedClip" in api     # rendered from docstrings
    api = (tmp_path / "site" / "api" / "retargeting" / "index.html").read_text()
    assert "character_pose_world" in api and "character_skin" in api
