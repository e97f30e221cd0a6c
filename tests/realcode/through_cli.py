"""``wp-rewrite FILE -o OUT`` on every file of a tree that ``--check`` has findings in, written into a copy of the
installed package so that the emitted modules import as part of it (relative imports, ``from . import
wp_rewrite_runtime``); then, in a Python whose ``sys.path`` starts at the copy, each emitted module is imported and
its Warp module compiled on the CPU, with the factories defined in it called (``load_emitted.py``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import warp as wp
from outcomes import CRASH, LEFT, LEFT_WARNING, ORIGINAL_FAILS, REFUSED, REWRITTEN, Outcome
from through_api import import_quietly
from trees import Tree, module_name

from warp_rewrite.cli.main import main

WAY = "wp-rewrite"
HERE = Path(__file__).parent
REFUSAL = re.compile(r"^\S+?:\d+:\d+: kernel '(?P<kernel>[^']+)': (?P<reason>.+)$")
REWROTE = re.compile(r": rewrote \d+ kernels? \((?P<names>[^)]*)\)")


def copy_package(tree: Tree, root: Path) -> None:
    """The tree's package under ``root`` (once per package), without caches; Warp's ``bin`` (native libraries,
    350 MB) is linked rather than copied."""
    target = root / tree.package
    if target.exists():
        return
    source = tree.site_packages / tree.package
    shutil.copytree(
        source, target, ignore=lambda folder, names: {"__pycache__"} | ({"bin"} if folder == str(source) else set())
    )
    if (source / "bin").exists():
        (target / "bin").symlink_to(source / "bin")


@dataclass(frozen=True)
class Rewrite:
    """One file through ``wp-rewrite``: its exit status (None: an exception escaped) and what it printed."""

    file: str
    status: int | None
    stderr: str
    changed: bool

    @property
    def module(self) -> str:
        return module_name(self.file)

    @property
    def rewritten(self) -> list[str]:
        found = REWROTE.search(self.stderr)
        return found["names"].split(", ") if found else []

    @property
    def refusals(self) -> list[tuple[str, str]]:
        return [(m["kernel"], m["reason"]) for m in map(REFUSAL.match, self.stderr.splitlines()) if m]

    @property
    def left(self) -> list[tuple[str, str]]:
        """The kernels left as plain Warp, each with why."""
        return [(m["kernel"], m["reason"]) for m in map(LEFT_WARNING.search, self.stderr.splitlines()) if m]


def rewrite_file(tree: Tree, file: str, root: Path) -> Rewrite:
    source, output = tree.site_packages / file, root / file
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            status = main([str(source), "-o", str(output)])
    except Exception:
        return Rewrite(file, None, traceback.format_exc(), False)
    changed = output.read_bytes() != source.read_bytes()
    return Rewrite(file, status, stderr.getvalue(), changed)


def load_emitted(tree: Tree, modules: list[str], root: Path) -> dict[str, dict]:
    """Import and compile the emitted modules in a Python whose ``newton``/``warp`` is the copy under ``root``."""
    if not modules:
        return {}
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(HERE)])}
    command = [sys.executable, str(HERE / "load_emitted.py"), str(root), tree.name, *modules]
    finished = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    results = {}
    for line in finished.stdout.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
            results[result["module"]] = result
    for module in modules:  # the loader itself failed
        results.setdefault(
            module, {"ok": False, "error": f"loader exited {finished.returncode}: {finished.stderr[-2000:]}"}
        )
    return results


def outcomes(tree: Tree, rewrites: list[Rewrite], loaded: dict[str, dict]) -> list[Outcome]:
    found = []
    for rewrite in rewrites:
        if rewrite.status not in (0, 1):
            found.append(
                Outcome(tree.name, WAY, rewrite.module, CRASH, f"exit status {rewrite.status}: {rewrite.stderr}")
            )
        found += [
            Outcome(tree.name, WAY, f"{rewrite.module}.{kernel}", REFUSED, reason)
            for kernel, reason in rewrite.refusals
        ]
        found += [
            Outcome(tree.name, WAY, f"{rewrite.module}.{kernel}", LEFT, reason) for kernel, reason in rewrite.left
        ]
        if not rewrite.changed:
            continue
        load = loaded[rewrite.module]
        result, detail = REWRITTEN, ""
        if not load["ok"]:
            result, detail = _original_compiles(rewrite.module), load["error"]
        names = rewrite.rewritten or ["(module)"]  # changed without a kernel rewritten: the module itself
        found += [Outcome(tree.name, WAY, f"{rewrite.module}.{name}", result, detail) for name in names]
    return sorted(found)


def _original_compiles(module: str) -> str:
    """CRASH if the installed module compiles on the CPU, ORIGINAL_FAILS if it does not."""
    try:
        import_quietly(module)
        wp.get_module(module).load(wp.get_device("cpu"))
    except Exception:
        return ORIGINAL_FAILS
    return CRASH
