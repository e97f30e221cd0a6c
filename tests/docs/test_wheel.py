"""What a wheel install gets, read from a wheel built here (offline: ``--no-build-isolation``, with the setuptools of
the dev extra): every rule page, whose links all lead to pages in the wheel (a finding's ``url`` opens a page that
works after ``pip install``), the runtime, and ``warp_rewrite_launches.pth`` at its root, where ``site-packages``
gets it (``WP_REWRITE_LAUNCHES``)."""

from __future__ import annotations

import posixpath
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from warp_rewrite.cli.lint import CODES

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out), "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (path,) = out.glob("warp_rewrite-*.whl")
    return zipfile.ZipFile(path)


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the page's headings (as tests/docs/test_docs.py reads them)."""
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_every_rule_page_and_its_links_are_in_the_wheel(wheel):
    names = set(wheel.namelist())
    pages = {f"warp_rewrite/rules/{code}.md" for code in CODES}
    assert pages <= names
    for page in sorted(pages):
        text = re.sub(r"^```.*?^```$", "", wheel.read(page).decode(), flags=re.M | re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            assert not re.match(r"[a-z]+://", target), f"{page} links outside the package: {target}"
            path, _, anchor = target.partition("#")
            linked = posixpath.normpath(posixpath.join(posixpath.dirname(page), path)) if path else page
            assert linked in names, f"{page} links to {target}, which the wheel does not have"
            if anchor:
                assert anchor in anchors(wheel.read(linked).decode()), f"{page} links to {target}: no such heading"


def test_the_wheel_installs_the_pth_file_and_the_runtime(wheel):
    names = set(wheel.namelist())
    assert wheel.read("warp_rewrite_launches.pth").decode() == (
        'import os; os.environ.get("WP_REWRITE_LAUNCHES", "").strip() and __import__("warp_rewrite")\n'
    )
    record = next(name for name in names if name.endswith(".dist-info/RECORD"))
    assert "warp_rewrite_launches.pth," in wheel.read(record).decode()  # pip uninstall removes it
    assert {"warp_rewrite/runtime/hook.py", "warp_rewrite/switch.py", "warp_rewrite/cli/writes.py"} <= names
