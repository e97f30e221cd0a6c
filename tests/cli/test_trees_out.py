"""Whole trees written elsewhere: ``wp-rewrite PATH... -o DIR`` writes the rewritten tree into
DIR with the input's layout (a folder named keeps its name, as ``cp -r`` has it), every Python file written (copied
where there is nothing to rewrite), one runtime copy per package root or folder of scripts. The emitted modules run
both imported as the package's modules and run as scripts; their gradients are checked against finite differences
of the original kernel."""

from __future__ import annotations

import importlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.cli.test_trees import SIM, X, assert_matches_the_original
from tests.support.emitted import import_file, run_cli

PACKAGE = "outtree_pkg"  # a name of its own: the test imports it
SCRIPT_MAIN = """

if __name__ == "__main__":
    x = wp.array(XS, dtype=wp.float64, requires_grad=True)
    count = wp.zeros(1, dtype=wp.int32)
    out = wp.zeros(x.shape[0], dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        step(x, count, out)
    tape.backward(grads={out: wp.array(np.arange(1.0, x.shape[0] + 1.0), dtype=wp.float64)})
    print(" ".join(repr(float(g)) for g in x.grad.numpy()))
"""


def make_tree(root: Path) -> None:
    """A package with a subpackage (a module that imports the package relatively, one that also runs as a script),
    a module without kernels, data files (binary and executable ones, ``py.typed``, a licence, a link, a hidden
    file, an empty folder, bytecode not copied), and a folder of scripts."""
    package = root / PACKAGE
    (package / "sub").mkdir(parents=True)
    (package / "assets" / "empty").mkdir(parents=True)
    (package / "__pycache__").mkdir()
    (root / "scripts").mkdir()
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "plain.py").write_text("SCALE = 3.0\n")
    (package / "data.txt").write_text("not Python\n")
    (package / "py.typed").write_text("")
    (package / "LICENSE").write_text("Apache-2.0\n")
    (package / ".hidden").write_text("kept\n")
    (package / "assets" / "mesh.npy").write_bytes(bytes(range(256)))
    (package / "assets" / "build.sh").write_text("#!/bin/sh\n")
    (package / "assets" / "build.sh").chmod(0o755)
    (package / "assets" / "data.txt").symlink_to("../data.txt")
    (package / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"stale")
    (root / "scripts" / "README.md").write_text("# scripts\n")
    (package / "core.py").write_text(SIM)
    deep = SIM.replace("import warp as wp\n", "import numpy as np\nimport warp as wp\n\nfrom .. import plain\n")
    (package / "sub" / "deep.py").write_text(deep.replace("wp.float64(3.0)", "wp.float64(plain.SCALE)"))
    script = SIM.replace("import warp as wp\n", "import numpy as np\nimport warp as wp\n")
    script += SCRIPT_MAIN.replace("XS", repr(X.tolist()))
    (root / "scripts" / "run.py").write_text(script)
    (package / "sub" / "tool.py").write_text(script)  # a module of the package that also runs as a script
    (root / "tree_original.py").write_text(SIM)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    before = {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}
    status = subprocess.run(
        [sys.executable, "-m", "warp_rewrite", PACKAGE, "scripts", "-o", "out"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert status.returncode == 0, status.stderr
    assert {path: path.read_bytes() for path in before} == before  # the input is left as it was
    return root, status.stderr


def test_the_tree_keeps_its_layout_with_one_runtime_per_package_root_or_folder_of_scripts(written):
    root, stderr = written
    out = root / "out"
    python = sorted(str(p.relative_to(out)) for p in out.rglob("*.py") if "wp_rewrite_runtime" not in p.parts)
    assert python == [
        f"{PACKAGE}/__init__.py",
        f"{PACKAGE}/core.py",
        f"{PACKAGE}/plain.py",
        f"{PACKAGE}/sub/__init__.py",
        f"{PACKAGE}/sub/deep.py",
        f"{PACKAGE}/sub/tool.py",
        "scripts/run.py",
    ]
    assert (out / PACKAGE / "plain.py").read_bytes() == (root / PACKAGE / "plain.py").read_bytes()  # copied
    copies = sorted(str(p.parent.relative_to(out)) for p in out.rglob("wp_rewrite_runtime/__init__.py"))
    assert copies == [f"{PACKAGE}/wp_rewrite_runtime", "scripts/wp_rewrite_runtime"]
    assert stderr.splitlines() == [
        f"{Path(PACKAGE, 'core.py')} -> {Path('out', PACKAGE, 'core.py')}: rewrote 1 kernel (compact); "
        "1 wp.launch call now calls the rewritten launch",
        f"{Path(PACKAGE, 'sub', 'deep.py')} -> {Path('out', PACKAGE, 'sub', 'deep.py')}: rewrote 1 kernel (compact); "
        "1 wp.launch call now calls the rewritten launch",
        f"{Path(PACKAGE, 'sub', 'tool.py')} -> {Path('out', PACKAGE, 'sub', 'tool.py')}: rewrote 1 kernel (compact); "
        "1 wp.launch call now calls the rewritten launch",
        f"{Path('scripts', 'run.py')} -> {Path('out', 'scripts', 'run.py')}: rewrote 1 kernel (compact); "
        "1 wp.launch call now calls the rewritten launch",
        "wp-rewrite: 4 files rewritten, 3 unchanged, 0 refused, 8 copied",
    ]  # files without kernels to rewrite are copied without a line of their own


def test_every_other_file_is_copied_as_cp_r_copies_it(written, tmp_path):
    """Data files, py.typed, licences, hidden files, empty folders, permissions and links as links; not bytecode."""
    root, _ = written
    reference = tmp_path / "reference"
    reference.mkdir()
    for name in (PACKAGE, "scripts"):
        subprocess.run(["cp", "-r", str(root / name), str(reference / name)], check=True)

    def others(top: Path) -> dict[str, tuple]:
        found = {}
        for path in sorted(top.rglob("*")):
            relative = path.relative_to(top)
            if path.suffix == ".py" or {"__pycache__", "wp_rewrite_runtime"} & set(relative.parts):
                continue
            if path.is_symlink():
                found[str(relative)] = ("link", os.readlink(path))
            elif path.is_dir():
                found[str(relative)] = ("folder",)
            else:
                found[str(relative)] = (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
        return found

    copied = others(root / "out")
    assert copied == {key: value for key, value in others(reference).items()}
    assert f"{PACKAGE}/assets/empty" in copied and copied[f"{PACKAGE}/assets/build.sh"][1] == 0o755
    assert not (root / "out" / PACKAGE / "__pycache__").exists()


def test_the_emitted_package_imports_and_matches_finite_differences(written):
    root, _ = written
    sys.path.insert(0, str(root / "out"))
    try:
        core = importlib.import_module(f"{PACKAGE}.core")
        deep = importlib.import_module(f"{PACKAGE}.sub.deep")
    finally:
        sys.path.remove(str(root / "out"))
    assert Path(deep.wp_rewrite_runtime.__file__).parent == root / "out" / PACKAGE / "wp_rewrite_runtime"
    original = import_file(root / "tree_original.py", "outtree_original")
    assert_matches_the_original(core, original)
    assert_matches_the_original(deep, original)


@pytest.mark.parametrize("script", ["scripts/run.py", f"{PACKAGE}/sub/tool.py"])
def test_a_module_run_as_a_script_finds_the_runtime_copy(written, script):
    root, _ = written
    ran = subprocess.run([sys.executable, str(root / "out" / script)], capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    # d(sum_i w_i * 3 x_i^2)/dx_i, the slots in thread order on the CPU, w_i = i + 1: what the original gives
    expected = 6.0 * X * np.arange(1.0, len(X) + 1.0)
    np.testing.assert_allclose([float(g) for g in ran.stdout.splitlines()[-1].split()], expected, rtol=1e-12)


def test_one_file_into_a_folder_and_refused_outputs(tmp_path, capsys, monkeypatch):
    """One file into an existing folder writes there the rewritten module and its runtime copy, and nothing else
    (what was there stays); ``-o`` naming a file for several inputs or a folder is refused, naming ``-o``, before
    anything is written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sim.py").write_text(SIM)
    (tmp_path / "into" / "inner").mkdir(parents=True)
    (tmp_path / "into" / "kept.txt").write_text("kept\n")
    (tmp_path / "into" / "__init__.py").write_text("")
    status, _, err = run_cli(capsys, "sim.py", "-o", "into")
    assert status == 0, err
    assert sorted(str(p.relative_to(tmp_path / "into")) for p in (tmp_path / "into").iterdir()) == [
        "__init__.py",
        "inner",
        "kept.txt",
        "sim.py",
        "wp_rewrite_runtime",
    ]
    assert not any((tmp_path / "into" / "inner").iterdir()) and (tmp_path / "into" / "kept.txt").read_text() == "kept\n"
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "sim.py").write_text(SIM)
    before = sorted(tmp_path.rglob("*"))
    refused = {
        ("tree", "-o", "sim.py"): "-o sim.py: not a folder: several files or a folder are written into a folder "
        "(-o DIR)",
        ("sim.py", "tree/sim.py", "-o", "one.py"): "-o one.py: names a file: several files or a folder are written "
        "into a folder (-o DIR)",
        ("sim.py", "tree/sim.py", "-o", "sim.py"): "-o sim.py: not a folder: several files or a folder are written "
        "into a folder (-o DIR)",
        ("tree", "-o", "."): "-o .: this is the folder of the input; use --in-place (without -o) to rewrite it",
        ("tree", "-o", "missing/out"): "-o missing/out: cannot write: there is no folder missing",
    }
    for argv, message in refused.items():
        assert run_cli(capsys, *argv) == (2, "", f"wp-rewrite: error: {message}\n")
    assert sorted(tmp_path.rglob("*")) == before


def test_a_subpackage_written_alone_is_the_root_of_the_tree_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for folder in ("pkg", "pkg/sub"):
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "sim.py").write_text(SIM)
    status, _, err = run_cli(capsys, "pkg/sub", "-o", "out")
    assert status == 0, err
    assert (tmp_path / "out" / "sub" / "wp_rewrite_runtime").is_dir()  # out/ has no __init__.py: sub/ is the root
    assert "    from . import wp_rewrite_runtime\n" in (tmp_path / "out" / "sub" / "sim.py").read_text()
    status, _, err = run_cli(capsys, "pkg/sub/sim.py", "--in-place")  # in place, the package's root is pkg/
    assert status == 0, err
    assert "    from .. import wp_rewrite_runtime\n" in (tmp_path / "pkg" / "sub" / "sim.py").read_text()
    assert (tmp_path / "pkg" / "wp_rewrite_runtime").is_dir() and not (
        tmp_path / "pkg" / "sub" / "wp_rewrite_runtime"
    ).exists()


def test_a_file_that_does_not_parse_is_reported_and_copied_and_the_output_folder_is_not_input(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "broken.py").write_text("def f(:\n")
    (tmp_path / "tree" / "plain.py").write_text("x = 1\n")
    status, _, err = run_cli(capsys, "tree", "-o", "tree/out")
    assert status == 2 and "E999 SyntaxError" in err
    assert (tmp_path / "tree" / "out" / "tree" / "broken.py").read_text() == "def f(:\n"  # the tree stays whole
    status, _, err = run_cli(capsys, "tree", "-o", "tree/out")  # its own output, inside it, is not read again
    assert status == 2 and not (tmp_path / "tree" / "out" / "tree" / "out").exists()
