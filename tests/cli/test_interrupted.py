"""An interrupted rewrite leaves every file it would change as it was, or, interrupted while it puts its finished
files in place, all of them there: never a half-written module, a partial runtime folder or a tree half copied.
Interrupted at one write after another (in the process: a ``KeyboardInterrupt`` as SIGINT raises it), and by a
real SIGTERM before and during the renames (in a subprocess)."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_trees_out import PACKAGE, make_tree
from warp_rewrite.cli import writes
from warp_rewrite.cli.main import main


def snapshot(root: Path) -> dict[str, bytes | str | None]:
    """Every file (its bytes), link (its target) and folder (None) below ``root``, bytecode aside."""
    found: dict[str, bytes | str | None] = {}
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        key = str(path.relative_to(root))
        found[key] = os.readlink(path) if path.is_symlink() else None if path.is_dir() else path.read_bytes()
    return found


def leftovers(root: Path) -> list[str]:
    """Hidden files and folders a run makes before it renames them into place (``.NAME.XXXX.tmp``,
    ``.wp_rewrite_runtime.XXXX``)."""
    return [str(p) for p in root.rglob(".*") if p.name.endswith(".tmp") or p.name.startswith(".wp_rewrite_runtime")]


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    """The input tree, and what an uninterrupted run makes of it with ``-o`` and ``--in-place``."""
    root = tmp_path_factory.mktemp("interrupted")
    make_tree(root / "input")
    for mode in ("out", "in_place"):
        shutil.copytree(root / "input", root / mode, symlinks=True)
    os.chdir(root / "out")
    try:
        assert main([PACKAGE, "scripts", "-o", "written", "-q"]) == 0
        os.chdir(root / "in_place")
        assert main([PACKAGE, "scripts", "--in-place", "-q"]) == 0
    finally:
        os.chdir(root)
    return {"root": root, "input": root / "input", "out": root / "out", "in_place": root / "in_place"}


class Interrupt:
    """Raises ``KeyboardInterrupt`` at the ``at``-th write a run makes (a staged module, a runtime file, a copied
    data file), counting them all where ``at`` is None."""

    def __init__(self, at: int | None):
        self.at, self.count = at, 0

    def wrap(self, function):
        def interrupted(*args, **kwargs):
            self.count += 1
            if self.count == self.at:
                raise KeyboardInterrupt
            return function(*args, **kwargs)

        return interrupted


def run_interrupted(monkeypatch, folder: Path, argv: list[str], at: int | None) -> tuple[int, int]:
    interrupt = Interrupt(at)
    with monkeypatch.context() as patched:
        patched.chdir(folder)
        patched.setattr(writes, "write_temporary", interrupt.wrap(writes.write_temporary))
        patched.setattr(pathlib.Path, "write_bytes", interrupt.wrap(pathlib.Path.write_bytes))
        patched.setattr(shutil, "copyfile", interrupt.wrap(shutil.copyfile))
        status = main(argv)
    return status, interrupt.count


@pytest.mark.parametrize("mode", ["out", "in_place"])
def test_interrupted_at_each_write_nothing_is_written(trees, tmp_path, monkeypatch, capsys, mode):
    argv = [PACKAGE, "scripts", "-q", *(["-o", "written"] if mode == "out" else ["--in-place"])]
    scratch = tmp_path / "scratch"
    shutil.copytree(trees["input"], scratch, symlinks=True)
    status, writes_made = run_interrupted(monkeypatch, scratch, argv, None)
    assert status == 0 and writes_made > 20  # modules, runtime files, data files
    assert snapshot(scratch) == snapshot(trees[mode])
    points = {1, 2, 3, writes_made - 1, writes_made, *range(6, writes_made, 6)}  # modules, runtimes, data files
    for at in sorted(points):
        shutil.rmtree(scratch)
        shutil.copytree(trees["input"], scratch, symlinks=True)
        status, _ = run_interrupted(monkeypatch, scratch, argv, at)
        assert status == 130, at
        assert snapshot(scratch) == snapshot(trees["input"]), at  # no output folder, no file changed
        assert leftovers(scratch) == []
    assert capsys.readouterr().err.count("wp-rewrite: interrupted: nothing was written\n") == len(points)


DRIVER = """
import os, signal, sys
from warp_rewrite.cli import main, writes

where, at = sys.argv[1], int(sys.argv[2])
original = getattr(writes, where)
calls = 0


def terminating(*args, **kwargs):
    global calls
    result = original(*args, **kwargs)
    calls += 1
    if calls == at:
        os.kill(os.getpid(), signal.SIGTERM)
    return result


setattr(writes, where, terminating)
sys.argv = ["wp-rewrite", *sys.argv[3:]]
main.command()
"""


@pytest.mark.parametrize(("where", "at"), [("write_temporary", 1), ("write_temporary", 6), ("_replace_folder", 1)])
def test_sigterm_leaves_the_input_untouched_or_the_complete_result(trees, tmp_path, where, at):
    """SIGTERM while the run makes its files: nothing written (exit 143); while it renames them into place: held
    off until all are there (exit 143 still, the result complete)."""
    scratch = tmp_path / "scratch"
    shutil.copytree(trees["input"], scratch, symlinks=True)
    ran = subprocess.run(
        [sys.executable, "-c", DRIVER, where, str(at), PACKAGE, "scripts", "-o", "written", "-q"],
        cwd=scratch,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 128 + signal.SIGTERM, ran.stderr
    written = where == "_replace_folder"  # renaming a runtime copy into place: the renames have begun
    assert ran.stderr.endswith(f"interrupted: {'after every file was written' if written else 'nothing was written'}\n")
    assert snapshot(scratch) == snapshot(trees["out"] if written else trees["input"])
    assert leftovers(scratch) == []
