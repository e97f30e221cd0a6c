"""Whole trees: ``wp-rewrite PATH... --in-place`` or ``--diff`` takes files and folders, with one runtime copy per
package root or folder of scripts (``-o DIR``: test_trees_out); ``--diff`` gives a patch that makes a tree that runs
(the module's changes and the runtime folder as new files), so ``patch -p0 < a.patch`` then ``python`` works.
Gradients of the rewritten modules are checked against finite differences of the original."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import warp as wp

from tests.support.emitted import import_file
from tests.support.harness import Case, check, f64, i32, original_or
from warp_rewrite.cli.main import main

N = 6
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1])


def compaction_args() -> list:
    return [f64(X, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)]


SIM = """import warp as wp


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid] * wp.float64(3.0)


def step(x, count, out):
    wp.launch(compact, x.shape[0], inputs=[x, count, out])
"""


def wp_rewrite_cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "warp_rewrite", *argv], cwd=cwd, capture_output=True, text=True, check=False
    )


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch(1)")
def test_the_diff_carries_the_runtime_and_the_patched_tree_runs(tmp_path):
    (tmp_path / "diffed.py").write_text(SIM)
    (tmp_path / "diffed_original.py").write_text(SIM)
    made = wp_rewrite_cli("diffed.py", "--diff", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "--- /dev/null\n+++ wp_rewrite_runtime/__init__.py\n" in made.stdout
    assert "+++ wp_rewrite_runtime/fingerprints.py\n" in made.stdout
    assert not (tmp_path / "wp_rewrite_runtime").exists()  # --diff writes nothing
    applied = subprocess.run(["patch", "-p0"], input=made.stdout, cwd=tmp_path, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    again = wp_rewrite_cli("diffed.py", "--diff", cwd=tmp_path)
    assert (again.returncode, again.stdout) == (0, "")  # rewritten, and the runtime beside it is current

    emitted, original = (
        import_file(tmp_path / "diffed.py", "diffed"),
        import_file(tmp_path / "diffed_original.py", "diffed_original"),
    )

    program = original_or(original.compact, N, lambda args: emitted.step(*args))
    check(Case(None, N, compaction_args, [2], [0], program=program))


def assert_matches_the_original(emitted, original) -> None:
    program = original_or(original.compact, N, lambda args: emitted.step(*args))
    check(Case(None, N, compaction_args, [2], [0], program=program))


def make_tree(root: Path) -> list[Path]:
    """A package with a subpackage, a folder of scripts, and a module without kernels."""
    modules = [root / "pkg" / "tree_a.py", root / "pkg" / "sub" / "tree_b.py", root / "scripts" / "tree_c.py"]
    for module in modules:
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(SIM)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "plain.py").write_text("x = 1\n")
    (root / "tree_original.py").write_text(SIM)
    return modules


def test_a_tree_is_rewritten_in_place_with_one_runtime_per_package_or_folder_of_scripts(tmp_path):
    modules = make_tree(tmp_path)
    made = wp_rewrite_cli("pkg", "scripts/tree_c.py", "--in-place", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert made.stderr.splitlines() == [
        f"{Path('pkg/sub/tree_b.py')}: rewrote 1 kernel (compact); 1 wp.launch call now calls the rewritten launch",
        f"{Path('pkg/tree_a.py')}: rewrote 1 kernel (compact); 1 wp.launch call now calls the rewritten launch",
        f"{Path('scripts/tree_c.py')}: rewrote 1 kernel (compact); 1 wp.launch call now calls the rewritten launch",
        "wp-rewrite: 3 files rewritten, 2 unchanged, 0 refused, 0 copied",
    ]  # files without kernels to rewrite are counted, not listed
    copies = sorted(path.parent.relative_to(tmp_path) for path in tmp_path.rglob("wp_rewrite_runtime/__init__.py"))
    # pkg/sub/ has no __init__.py: no subpackage but a folder of its own (test_trees_out has a subpackage)
    assert copies == [
        Path("pkg/sub/wp_rewrite_runtime"),
        Path("pkg/wp_rewrite_runtime"),
        Path("scripts/wp_rewrite_runtime"),
    ]
    assert (tmp_path / "pkg" / "plain.py").read_text() == "x = 1\n"
    again = wp_rewrite_cli("pkg", "scripts", "--in-place", cwd=tmp_path)
    assert again.returncode == 0 and again.stderr.count("nothing to change") == 3
    original = import_file(tmp_path / "tree_original.py", "tree_original")
    for module in modules:
        assert_matches_the_original(import_file(module, module.stem), original)


def test_a_tree_has_one_diff_that_patches_into_a_tree_that_runs(tmp_path):
    make_tree(tmp_path)
    made = wp_rewrite_cli(".", "--diff", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert made.stdout.count("+++ pkg/wp_rewrite_runtime/__init__.py\n") == 1
    assert made.stdout.count("+++ pkg/sub/wp_rewrite_runtime/__init__.py\n") == 1
    assert not any(tmp_path.rglob("wp_rewrite_runtime"))
    if shutil.which("patch") is not None:
        applied = subprocess.run(["patch", "-p0"], input=made.stdout, cwd=tmp_path, capture_output=True, text=True)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert wp_rewrite_cli(".", "--diff", cwd=tmp_path).stdout == ""


def test_several_paths_need_in_place_or_diff(tmp_path):
    make_tree(tmp_path)
    made = wp_rewrite_cli("pkg/tree_a.py", "scripts/tree_c.py", cwd=tmp_path)
    assert made.returncode == 2
    assert "several paths are rewritten with --in-place, --diff or -o DIR (stdout takes one file)" in made.stderr
    made = wp_rewrite_cli("pkg", cwd=tmp_path)
    assert made.returncode == 2 and made.stderr == (
        "wp-rewrite: error: pkg: a folder is rewritten with --in-place, --diff or -o DIR (stdout takes one file)\n"
    )


CLASS_KERNEL = """import warp as wp


class Holder:
    @wp.kernel
    def refused(count: wp.array[wp.int32], out: wp.array[wp.float64]):
        out[wp.atomic_add(count, 0, 1)] = wp.float64(1.0)
"""


def test_on_a_terminal_a_tree_rewrite_shows_its_progress_and_ends_with_a_summary(tmp_path, capsys, monkeypatch):
    """The line at the bottom of the terminal says how many files are done of how many, and which is at hand; it is
    cleared before every other line and at the end; a refused kernel counts its file as refused."""
    make_tree(tmp_path)
    (tmp_path / "pkg" / "refused.py").write_text(CLASS_KERNEL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    status = main(["pkg", "scripts", "--in-place"])
    err = capsys.readouterr().err
    assert status == 1
    shown = [line.rsplit("\r\x1b[K", 1)[-1] for line in err.split("\n")]
    progress = [part for part in err.split("\r\x1b[K") if part.startswith("[")]
    assert [part.split("] ")[0] for part in progress] == [f"[{done}/6" for done in range(6)]
    assert progress[0] == f"[0/6] {Path('pkg/__init__.py')}"
    assert shown[-2:] == ["wp-rewrite: 3 files rewritten, 2 unchanged, 1 refused, 0 copied (see above)", ""]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert main(["pkg", "scripts", "--diff"]) == 1
    err = capsys.readouterr().err
    assert "\r" not in err and err.endswith(
        "wp-rewrite: 0 files rewritten, 5 unchanged, 1 refused, 0 copied (see above)\n"
    )
