"""Package trees through the command line: relative imports, star imports and re-exports, helpers imported through
the package's ``__init__`` (a copied helper's own helper then imported from its file, which the module did not
import), one kernel defined once and launched from several modules and a script, and two modules defining a kernel
(and its helper) of one name. Each launch of the tree rewritten with ``wp-rewrite TREE -o OUT``
and with ``--in-place`` is checked against finite differences of the original tree's forward (``PKG_original``, a
copy left as it is)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support import harness
from tests.support.emitted import import_file, run_cli
from tests.support.harness import Case, check, f64, i32

N = 5
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])

TREE = {
    "PKG/__init__.py": """\
from .helpers import *
from .helpers import take_slot as claim
from .kernels import compact
from . import sub
""",
    "PKG/helpers.py": """\
import warp as wp

__all__ = ["weigh", "take_slot"]


@wp.func
def _square(v: wp.float64) -> wp.float64:
    return v * v


@wp.func
def weigh(v: wp.float64) -> wp.float64:
    return _square(v) + wp.float64(0.5) * v


@wp.func
def _first() -> int:
    return 0


@wp.func
def take_slot(count: wp.array(dtype=wp.int32)) -> int:
    return wp.atomic_add(count, 0, 1) + _first()


@wp.func
def not_exported(count: wp.array(dtype=wp.int32)) -> int:
    return count[0]
""",
    "PKG/kernels.py": """\
import warp as wp

from . import take_slot, weigh


@wp.kernel
def compact(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = take_slot(count)
    out[slot] = weigh(x[tid]) * wp.float64(slot + 1)
""",
    "PKG/more.py": """\
import warp as wp

from .helpers import *


@wp.kernel
def gather(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = take_slot(count)
    out[slot] = weigh(x[tid]) + x[tid] * wp.float64(slot)


def step(x, count, out):
    wp.launch(gather, x.shape[0], inputs=[x, count, out])
""",
    "PKG/chain.py": """\
import warp as wp

from . import *


@wp.kernel
def chained(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = claim(count)
    out[slot] = weigh(x[tid]) * x[tid] * wp.float64(slot + 2)


def step(x, count, out):
    wp.launch(chained, x.shape[0], inputs=[x, count, out])
""",
    "PKG/absolute.py": """\
import warp as wp

from PKG import take_slot, weigh


@wp.kernel
def absolute(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = take_slot(count)
    out[slot] = weigh(x[tid]) - x[tid] * wp.float64(slot)


def step(x, count, out):
    wp.launch(absolute, x.shape[0], inputs=[x, count, out])
""",
    "PKG/sub/__init__.py": "",
    "PKG/sub/stepper.py": """\
import warp as wp

from ..kernels import *
from .. import compact as again


def step(x, count, out):
    wp.launch(compact, x.shape[0], inputs=[x, count, out])


def step_again(x, count, out):
    wp.launch(again, dim=x.shape[0], inputs=[x, count], outputs=[out])
""",
    "PKG/driver.py": """\
import warp as wp

from PKG import compact


def step(x, count, out):
    wp.launch(compact, x.shape[0], inputs=[x, count, out])
""",
    "PKG/left.py": """\
import warp as wp


@wp.func
def scale(v: wp.float64) -> wp.float64:
    return v * wp.float64(2.0)


@wp.kernel
def twin(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = scale(x[tid]) * x[tid] + wp.float64(slot)


def step(x, count, out):
    wp.launch(twin, x.shape[0], inputs=[x, count, out])
""",
    "scripts/go.py": """\
import warp as wp

import PKG
from PKG.sub.stepper import step as imported_step


def step(x, count, out):
    wp.launch(PKG.compact, x.shape[0], inputs=[x, count, out])
""",
}
TREE["PKG/right.py"] = TREE["PKG/left.py"].replace("v * wp.float64(2.0)", "v * v * wp.float64(-3.0)")
STEPS = [  # (module, function) of each launch checked
    ("PKG.sub.stepper", "step"),
    ("PKG.sub.stepper", "step_again"),
    ("PKG.driver", "step"),
    ("go", "step"),
    ("go", "imported_step"),
    ("PKG.more", "step"),
    ("PKG.chain", "step"),
    ("PKG.absolute", "step"),
    ("PKG.left", "step"),
    ("PKG.right", "step"),
]


def write_tree(root: Path, package: str) -> None:
    for relative, text in TREE.items():
        path = root / relative.replace("PKG", package)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("PKG", package))


def steps(root: Path, package: str) -> dict[tuple[str, str], object]:
    """Each function of ``STEPS`` in the tree at ``root``, imported as its own folder's code would be."""
    sys.path.insert(0, str(root))
    try:
        found = {}
        for module, function in STEPS:
            if module == "go":
                imported = import_file(root / "scripts" / "go.py", f"{package}_go")
            else:
                imported = importlib.import_module(module.replace("PKG", package))
            found[module, function] = getattr(imported, function)
        return found
    finally:
        sys.path.remove(str(root))


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("original")
    write_tree(root, "ptree_original")
    return steps(root, "ptree_original")


def compaction_args() -> list:
    return [f64(X, True), i32([0]), f64(np.zeros(N), True)]


def check_every_step(rewritten: dict, original: dict) -> None:
    for key, step in rewritten.items():
        original_step = original[key]

        def program(args, launcher, original_step=original_step, step=step):
            (original_step if launcher is harness.launch_original else step)(*args)

        check(Case(None, N, compaction_args, [2], [0], program=program))


def test_a_tree_written_elsewhere(tmp_path, capsys, monkeypatch, original):
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path, "ptree_out")
    status, _, err = run_cli(capsys, "ptree_out", "scripts", "-o", "out")
    assert status == 0, err
    for kernel in ("kernels.py: rewrote 1 kernel (compact)", "more.py: rewrote 1 kernel (gather)", "(chained)"):
        assert kernel in err
    # _first came with take_slot, through __init__: imported from its file as the module spells its imports, where
    # isort puts it
    kernels = (tmp_path / "out" / "ptree_out" / "kernels.py").read_text()
    assert "from . import take_slot, weigh\nfrom .helpers import _first\n" in kernels
    absolute = (tmp_path / "out" / "ptree_out" / "absolute.py").read_text()
    assert "from ptree_out import take_slot, weigh\nfrom ptree_out.helpers import _first\n" in absolute
    for module in ("kernels.py", "absolute.py"):
        isort = [sys.executable, "-m", "ruff", "check", "--select", "I", "--no-cache", f"out/ptree_out/{module}"]
        assert subprocess.run(isort, capture_output=True, check=False).returncode == 0
    check_every_step(steps(tmp_path / "out", "ptree_out"), original)


def test_a_tree_rewritten_in_place(tmp_path, capsys, monkeypatch, original):
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path, "ptree_inplace")
    status, _, err = run_cli(capsys, "ptree_inplace", "scripts", "--in-place")
    assert status == 0, err
    check_every_step(steps(tmp_path, "ptree_inplace"), original)


def test_the_check_follows_helpers_through_star_imports_and_reexports(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path, "ptree_checked")
    status, out, _ = run_cli(capsys, "--check", "ptree_checked")
    assert status == 1
    found = {line.split(" WR003 kernel ")[1].split()[0] for line in out.splitlines() if " WR003 " in line}
    assert found == {"'compact'", "'gather'", "'chained'", "'absolute'"}
