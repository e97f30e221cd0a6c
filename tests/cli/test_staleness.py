"""Stale generated blocks cannot be missed: a rewrite regenerates them, ``--check`` reports them (WR006) and the
emitted module refuses to import with one. The workflow it supports: rewrite ``sim.py --in-place``, edit the kernel
(``* 3.0`` becomes ``* 5.0``), run again. Gradients of the emitted code are checked against finite differences of
the edited original.
"""

from __future__ import annotations

import itertools
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


NAMES = itertools.count()

SIM = """import warp as wp

from sim_helpers import scaled


@wp.func
def take(count: wp.array[wp.int32]) -> wp.int32:
    return wp.atomic_add(count, 0, 1)


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[take(count)] = scaled(x[tid] * x[tid] * wp.float64(3.0))


def make(factor: float):
    @wp.kernel
    def tripled(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
        tid = wp.tid()
        out[wp.atomic_add(count, 0, 1)] = x[tid] * wp.float64(factor)

    return tripled


def step(x, count, out):
    wp.launch(compact, x.shape[0], inputs=[x, count, out])
"""
HELPERS = """import warp as wp


@wp.func
def scaled(value: wp.float64) -> wp.float64:
    return value * wp.float64(2.0)
"""


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def load(path: Path):
    """Import ``path`` under a fresh name, with its folder's sim_helpers.py as it is now."""
    sys.modules.pop("sim_helpers", None)
    if str(path.parent) in sys.path:
        sys.path.remove(str(path.parent))
    sys.path.insert(0, str(path.parent))
    return import_file(path, f"{path.stem}_{next(NAMES)}")


@pytest.fixture
def sim(tmp_path, capsys) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "sim_helpers.py").write_text(HELPERS)
    path = folder / "sim.py"
    path.write_text(SIM)
    status, _, err = run_cli(capsys, path, "--in-place")
    assert status == 0, err
    return path


def edit(path: Path, old: str, new: str) -> None:
    """Change the user's code, once: the first occurrence, which is above the generated copies."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def assert_matches_the_original(emitted, original) -> None:
    """``step`` of the emitted module against finite differences of the original kernel (as it is now)."""

    program = original_or(original.compact, N, lambda args: emitted.step(*args))
    check(Case(None, N, compaction_args, [2], [0], program=program))


def test_the_begin_marker_carries_a_fingerprint_and_a_current_file_rewrites_to_itself(sim, capsys):
    text = sim.read_text()
    assert "# ---- wp-rewrite: generated from kernel 'compact' above (fingerprint " in text
    assert "wp_rewrite_runtime.check_fingerprint(" in text
    status, _, err = run_cli(capsys, sim, "--in-place")
    assert status == 0 and sim.read_text() == text
    assert err.endswith(": already rewritten (compact, tripled): nothing to change\n")
    assert run_cli(capsys, "--check", "--select", "WR006", sim)[0] == 0


def test_an_edited_kernel_refuses_to_import_is_reported_and_is_regenerated(sim, capsys):
    edit(sim, "wp.float64(3.0)", "wp.float64(5.0)")
    with pytest.raises(Exception, match=r"kernel 'compact'.*re-run wp-rewrite") as raised:
        load(sim)
    assert type(raised.value).__name__ == "RewriteError"  # the copy's class, beside the module
    assert raised.value.location == f"{sim}:{sim.read_text().splitlines().index('@wp.kernel') + 2}:1"

    status, out, _ = run_cli(capsys, "--check", "--select", "WR006", sim)
    assert status == 1
    assert out.startswith(f"{sim}:") and " WR006 the block wp-rewrite generated for kernel 'compact'" in out
    assert out.count("WR006") == 1  # the factory's block is current

    status, _, err = run_cli(capsys, sim, "--in-place")
    assert status == 0
    assert err.endswith(": regenerated 1 stale block (compact: the kernel, a helper or the options changed since)\n")
    text = sim.read_text()
    assert text.count("wp.float64(5.0)") == 2 and "wp.float64(3.0)" not in text  # the kernel, its phases' definition
    assert "launch_compact(x.shape[0], inputs=[x, count, out])" in text and "launch_compact_1" not in text
    assert run_cli(capsys, "--check", "--select", "WR006", sim)[0] == 0

    original = sim.with_name("original.py")
    original.write_text(SIM.replace("wp.float64(3.0)", "wp.float64(5.0)"))
    assert_matches_the_original(load(sim), load(original))


def test_an_edited_helper_of_the_file_refuses_to_import(sim, capsys):
    edit(sim, "return wp.atomic_add(count, 0, 1)", "return wp.atomic_add(count, 0, 1) + 0")
    with pytest.raises(Exception, match="kernel 'compact'"):
        load(sim)
    assert "WR006" in run_cli(capsys, "--check", "--select", "WR006", sim)[1]


def test_an_edited_helper_of_another_file_is_reported_and_regenerated(sim, capsys):
    """The import takes the other file's helpers as the block has them; --check and a rewrite read them again."""
    helpers = sim.with_name("sim_helpers.py")
    helpers.write_text(HELPERS.replace("wp.float64(2.0)", "wp.float64(4.0)"))
    assert " WR006 " in run_cli(capsys, "--check", "--select", "WR006", sim)[1]
    status, _, err = run_cli(capsys, sim, "--in-place")
    assert status == 0 and "regenerated 1 stale block (compact" in err
    original = sim.with_name("original.py")
    original.write_text(SIM)
    assert_matches_the_original(load(sim), load(original))


ALIASED = """import warp as wp


@wp.func
def put_square(count: wp.array[wp.int32], out: wp.array[wp.float64], v: wp.float64):
    out[wp.atomic_add(count, 0, 1)] = v * v


@wp.func
def put_exp(count: wp.array[wp.int32], out: wp.array[wp.float64], v: wp.float64):
    out[wp.atomic_add(count, 0, 1)] = wp.exp(v)


put = put_square


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    put(count, out, x[wp.tid()])
"""


def test_a_helper_alias_bound_otherwise_since_refuses_to_import(tmp_path, capsys):
    """The block names the aliases the kernel calls a helper through beside the helpers (``(compact, put_square,
    put)``), with the source of the helper each was taken for: rebound since (``put = put_exp``), the import stops
    where it once launched the clone of ``put_square``, and ``--check`` calls the block stale."""
    path = tmp_path / "aliased.py"
    path.write_text(ALIASED)
    assert run_cli(capsys, path, "--in-place")[0] == 0
    assert "check_fingerprint(" in path.read_text() and ", (compact, put_square, put))" in path.read_text()
    original = tmp_path / "original.py"
    original.write_text(ALIASED)
    emitted = load(path)
    program = original_or(load(original).compact, N, lambda args: emitted.compact.launch(dim=N, inputs=args))
    check(Case(None, N, compaction_args, [2], [0], program=program))

    edit(path, "put = put_square", "put = put_exp")
    with pytest.raises(Exception, match=r"kernel 'compact'.*re-run wp-rewrite") as raised:
        load(path)
    assert type(raised.value).__name__ == "RewriteError"
    assert " WR006 the block wp-rewrite generated for kernel 'compact'" in run_cli(capsys, "--check", path)[1]


def test_a_factory_kernel_edited_refuses_when_the_factory_runs(sim, capsys):
    edit(sim, "x[tid] * wp.float64(factor)", "x[tid] * x[tid] * wp.float64(factor)")
    module = load(sim)  # the factory's block runs when the factory does
    with pytest.raises(Exception, match=r"kernel 'tripled'.*re-run wp-rewrite"):
        module.make(2.0)
    status, _, err = run_cli(capsys, sim, "--in-place")
    assert status == 0 and "regenerated 1 stale block (tripled" in err
    rewritten = load(sim).make(2.0)
    x, count, out = f64(X, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        rewritten.launch(N, inputs=[x, count, out], device="cpu")
    tape.backward(grads={out: wp.ones(N, dtype=wp.float64)})
    np.testing.assert_allclose(x.grad.numpy(), 4.0 * X)  # d(2 x^2)/dx, slot k = thread k on the CPU


def test_other_options_regenerate_and_the_marker_names_them(sim, capsys):
    status, _, err = run_cli(capsys, sim, "--in-place", "--max-records", "64", "--detach-returns")
    assert status == 0 and "regenerated 2 stale blocks (compact, tripled" in err
    text = sim.read_text()
    assert "above (fingerprint " in text and ", options --max-records 64 --detach-returns) ----\n" in text
    assert 'options="--max-records 64 --detach-returns",' in text  # the fingerprint check's (left out by default)
    assert (
        run_cli(capsys, "--check", "--select", "WR006", sim)[0] == 0
    )  # compared with the options the blocks were made with
    status, _, err = run_cli(capsys, sim, "--in-place", "--max-records", "64", "--detach-returns")
    assert status == 0 and sim.read_text() == text and "nothing to change" in err
    load(sim)


def test_a_marker_without_a_fingerprint_counts_as_stale(sim, capsys):
    text = sim.read_text()
    start = text.index("# ---- wp-rewrite: generated from kernel 'compact' above (")
    end = text.index("\n", start)
    sim.write_text(text[:start] + "# ---- wp-rewrite: generated from kernel 'compact' above ----" + text[end:])
    assert " WR006 " in run_cli(capsys, "--check", "--select", "WR006", sim)[1]
    status, _, err = run_cli(capsys, sim, "--in-place")
    assert status == 0 and "regenerated 1 stale block (compact" in err
    assert sim.read_text() == text


def test_a_kernel_that_no_longer_needs_its_block_loses_it_with_a_warning(sim, capsys):
    edit(sim, "out[take(count)] = ", "out[tid] = wp.float64(take(count)) + ")
    edit(sim, "    return wp.atomic_add(count, 0, 1)\n", "    wp.atomic_add(count, 0, 1)\n    return 0\n")
    status, _, err = run_cli(capsys, sim, "--in-place")
    assert status == 0
    assert "warning: kernel 'compact' no longer uses an atomic's returned value: its stale block is removed" in err
    assert "generated from kernel 'compact'" not in sim.read_text()


def test_crlf_files_and_helpers_defined_after_the_kernel_import(tmp_path, capsys):
    """The import-time check reads the source as Python does (\\n line endings); a helper defined after the kernel is
    not named by the block (it does not exist yet when the block runs) but is part of the fingerprint."""
    folder = tmp_path / "crlf"
    folder.mkdir()
    (folder / "sim_helpers.py").write_text(HELPERS)
    later = SIM.replace(
        "@wp.func\ndef take(count: wp.array[wp.int32]) -> wp.int32:\n    return wp.atomic_add(count, 0, 1)\n\n\n", ""
    ).replace(
        "def make(",
        "@wp.func\ndef take(count: wp.array[wp.int32]) -> wp.int32:\n"
        "    return wp.atomic_add(count, 0, 1)\n\n\ndef make(",
    )
    path = folder / "sim.py"
    path.write_bytes(later.replace("\n", "\r\n").encode())
    assert run_cli(capsys, path, "--in-place")[0] == 0
    assert b", (compact,)" in path.read_bytes() and b"\r\n" in path.read_bytes()
    load(path)
    assert run_cli(capsys, "--check", "--select", "WR006", path)[0] == 0
    edit(path, "    return wp.atomic_add(count, 0, 1)", "    return wp.atomic_add(count, 0, 2)")
    assert " WR006 " in run_cli(capsys, "--check", "--select", "WR006", path)[1]


OVERLOADED = """import warp as wp


@wp.func
def take(count: wp.array[wp.int32]) -> wp.int32:
    return wp.atomic_add(count, 0, 1)


@wp.func
def take(count: wp.array[wp.int32], step: wp.int32) -> wp.int32:
    return wp.atomic_add(count, 0, step)


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[take(count, 1)] = x[tid] * x[tid]
"""


def test_an_overloaded_helper_is_read_as_its_latest_definition(tmp_path, capsys):
    """Warp's object for an overloaded @wp.func is its first definition's, wrapped around the latest."""
    path = tmp_path / "overloaded.py"
    path.write_text(OVERLOADED)
    assert run_cli(capsys, path, "--in-place")[0] == 0
    assert ", (compact, take))" in path.read_text()
    load(path)
    edit(path, "    return wp.atomic_add(count, 0, step)", "    return wp.atomic_add(count, 0, step * 1)")
    with pytest.raises(Exception, match=r"kernel 'compact'.*re-run wp-rewrite"):
        load(path)


PACKAGE = {
    "__init__.py": "",
    "slots.py": """import warp as wp


@wp.func
def take(count: wp.array[wp.int32]) -> wp.int32:
    return wp.atomic_add(count, 0, 1)
""",
    "scale.py": """import warp as wp


@wp.func
def scaled(value: wp.float64) -> wp.float64:
    return value * wp.float64(2.0)


@wp.func
def halved(value: wp.float64) -> wp.float64:
    return value * wp.float64(0.5)
""",
    "kernels.py": """import warp as wp

from .scale import halved, scaled
from .slots import take


@wp.func
def twice(value: wp.float64) -> wp.float64:
    return scaled(value)


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[take(count)] = halved(twice(x[tid]))


@wp.kernel
def tally(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[take(count)] = x[tid]
""",
    "test_kernels.py": """import warp as wp

from pkg.kernels import twice
from pkg.scale import halved
from pkg.slots import take


def test_compact():
    @wp.kernel
    def local(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
        tid = wp.tid()
        out[take(count)] = halved(twice(x[tid]))

    return local
""",
}


def test_a_block_is_stale_only_if_its_own_sources_changed_whatever_the_order_and_spelling(
    tmp_path, capsys, monkeypatch
):
    """A package whose modules import each other's helpers, rewritten in place: --check finds no stale block with
    relative or absolute paths, from the project's folder or the package's, in any order of the files, and its helper
    that only rewritten kernels call is no hazard; after a helper's edit, exactly the blocks that reach it are stale,
    in every one of those runs."""
    package = tmp_path / "pkg"
    package.mkdir()
    for name, text in PACKAGE.items():
        (package / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    assert run_cli(capsys, "pkg", "--in-place")[0] == 0
    files = ["kernels.py", "test_kernels.py", "scale.py"]

    def spellings():
        for order in itertools.permutations(files):
            yield tmp_path, [f"pkg/{name}" for name in order]
            yield tmp_path, [str(package / name) for name in order]
            yield package, list(order)

    def stale_kernels() -> set[tuple[str, ...]]:
        found = set()
        for folder, paths in spellings():
            monkeypatch.chdir(folder)
            _, out, _ = run_cli(capsys, "--check", "--select", "WR006", *paths)
            found.add(tuple(sorted(line.split("kernel '")[1].split("'")[0] for line in out.splitlines())))
        return found

    assert stale_kernels() == {()}
    monkeypatch.chdir(tmp_path)
    status, out, _ = run_cli(capsys, "--check", "--select", "ALL", "pkg")  # the whole tree: no hazard left either
    assert status == 0 and out == (
        "pkg/slots.py:6:12: WR101 helper 'take' uses the value returned by wp.atomic_add(), but only kernels "
        "wp-rewrite rewrote call it: not a hazard, nothing to fix\n"
    )
    edit(package / "scale.py", "value * wp.float64(0.5)", "value * wp.float64(0.25)")
    assert stale_kernels() == {("compact", "local")}
