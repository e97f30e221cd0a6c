"""The real code the suite runs on: trees of installed packages no one here wrote, and what ``--check`` says of them.

Newton is installed by ``make realcode`` (the ``realcode`` extra pins the version docs/realcode.md describes);
``warp/examples`` and ``warp/tests`` ship inside the warp-lang wheel this project depends on anyway.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from warp_rewrite.cli.main import main


@dataclass(frozen=True)
class Tree:
    """A folder of an installed distribution: ``newton`` or ``warp/tests`` (package ``warp``, wheel warp-lang)."""

    name: str
    distribution: str

    @property
    def package(self) -> str:
        return self.name.split("/")[0]

    @property
    def installed(self) -> bool:
        return importlib.util.find_spec(self.package) is not None

    @property
    def site_packages(self) -> Path:
        return Path(importlib.util.find_spec(self.package).origin).parent.parent

    @property
    def folder(self) -> Path:
        return self.site_packages / self.name

    @property
    def version(self) -> str:
        return importlib.metadata.version(self.distribution)

    def __str__(self) -> str:
        return self.name


NEWTON = Tree("newton", "newton")
WARP_EXAMPLES = Tree("warp/examples", "warp-lang")
WARP_TESTS = Tree("warp/tests", "warp-lang")
TREES = (NEWTON, WARP_EXAMPLES, WARP_TESTS)


@dataclass(frozen=True)
class Finding:
    """One ``--check`` finding; ``file`` relative to site-packages (``newton/_src/geometry/kernels.py``)."""

    file: str
    row: int
    column: int
    code: str
    message: str

    @property
    def subject(self) -> str:
        """The kernel or helper the finding is about (its messages start ``kernel 'k' ...`` / ``helper 'h' ...``)."""
        return re.match(r"(?:kernel|helper) '([^']+)'", self.message)[1]

    @property
    def module(self) -> str:
        return module_name(self.file)


@dataclass(frozen=True)
class CheckRun:
    status: int
    findings: tuple[Finding, ...]
    stderr: str

    @property
    def files(self) -> list[str]:
        return sorted({finding.file for finding in self.findings})


@cache
def check(tree: Tree) -> CheckRun:
    """``wp-rewrite --check TREE --select ALL`` (informational codes too), as JSON, run once per session."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(["--check", str(tree.folder), "--select", "ALL", "--output-format", "json", "-q"])
    findings = tuple(
        Finding(
            Path(item["filename"]).relative_to(tree.site_packages).as_posix(),
            item["location"]["row"],
            item["location"]["column"],
            item["code"],
            item["message"],
        )
        for item in json.loads(stdout.getvalue())
    )
    return CheckRun(status, findings, stderr.getvalue())


def require(tree: Tree) -> None:
    """Skip the test when the tree's package is not installed (``make test`` does not install Newton)."""
    import pytest

    if not tree.installed:
        pytest.skip(f"{tree.package} is not installed: make realcode installs it")


def module_name(file: str) -> str:
    """``newton/_src/geometry/kernels.py`` -> ``newton._src.geometry.kernels``."""
    return file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
