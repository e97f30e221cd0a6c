"""``wp-rewrite FILE``: call sites, kernels made by factories, one refusal among rewritable kernels, generated
blocks that come back after deletion, emitted files that pass ruff, atomic writes, encodings, closed pipes.

The kernels are written for these tests. The emitted module is imported from a temporary folder and launched
as its own code launches it; gradients are checked against finite differences of the original kernels.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import warp_rewrite.runtime
from tests.support.harness import Case, check, f64, i32
from warp_rewrite.cli import main as cli
from warp_rewrite.cli.emit import emit_module, runtime_import
from warp_rewrite.cli.main import main

TESTS = Path(__file__).parents[1]
REPO = TESTS.parent
PATTERNS = TESTS / "support" / "patterns.py"
N = 8
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1, 2.3, -2.1])
RUFF = Path(sys.executable).with_name("ruff")


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def import_file(path: Path, name: str):
    from tests.support.emitted import import_file as load  # the same loader as the pattern tests

    return load(path, name)


ADOPTION = '''"""A user's simulation module: kernels, factories, and the code that launches them."""

import warp
import warp as wp
from warp import launch


@wp.func
def write_slot(count: wp.array[wp.int32], out: wp.array[wp.float64], value: wp.float64):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = value


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    if x[tid] > wp.float64(0.0):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid]


@wp.kernel
def through_static(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    wp.static(write_slot)(count, out, wp.sin(x[tid]))


@wp.kernel
def signed_totals(x: wp.array[wp.float64], acc: wp.array[wp.float64], count: wp.array[wp.int32],
                  out: wp.array[wp.float64]):
    """Atomics in a conditional expression used as a statement: their values are discarded, not recorded."""
    tid = wp.tid()
    wp.atomic_add(acc, 0, x[tid] * x[tid]) if x[tid] > wp.float64(0.0) else wp.atomic_sub(acc, 1, x[tid])
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * wp.float64(2.0)


@wp.kernel
def scale(x: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[tid] = x[tid] * wp.float64(2.0)


def make_compact(dtype):
    """A factory: the closure's dtype in annotations and in the body, a helper of its own."""

    @wp.func
    def take(count: wp.array[wp.int32]) -> wp.int32:
        return wp.atomic_add(count, 0, 1)

    @wp.kernel
    def compact_typed(x: wp.array(dtype=dtype), count: wp.array[wp.int32], out: wp.array(dtype=dtype)):
        tid = wp.tid()
        out[take(count)] = x[tid] * x[tid] + dtype(1.0)

    return compact_typed


def make_and_launch(x, count, out):
    """A factory that launches its kernel itself."""

    @wp.kernel
    def tripled(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
        tid = wp.tid()
        out[wp.atomic_add(count, 0, 1)] = x[tid] * wp.float64(3.0)

    wp.launch(tripled, x.shape[0], inputs=[x, count, out])
    return tripled


def step(x, count, out, other_count, extra):
    wp.launch(compact, x.shape[0], inputs=[x, count, out])  # the positional form
    warp.launch(
        kernel=through_static,  # the keyword form, over lines, through another alias
        dim=x.shape[0],
        inputs=[x, other_count, extra],
        device="cpu",
    )


def kept(x, count, out, doubled, options):
    launch(scale, x.shape[0], inputs=[out, doubled])  # not rewritten: nothing to rewrite
    wp.launch(compact, x.shape[0], [x, count, out], [], [], [], "cpu")  # adjoint arguments by position
    wp.launch(compact, x.shape[0], inputs=[x, count, out], **options)  # unknown keywords: kept


def shadowed(compact, x, count, out):
    wp.launch(compact, x.shape[0], inputs=[x, count, out])  # a parameter named like the kernel: kept
'''


@pytest.fixture(scope="module")
def adoption(tmp_path_factory):
    folder = tmp_path_factory.mktemp("adoption")
    source, out = folder / "adoption.py", folder / "adoption_rewritten.py"
    source.write_text(ADOPTION)
    status = main([str(source), "-o", str(out), "-q"])
    assert status == 0
    return import_file(out, "adoption_rewritten")


def test_call_sites_launch_the_rewritten_kernels_keeping_the_users_text(adoption):
    text = Path(adoption.__file__).read_text()
    assert "    launch_compact(x.shape[0], inputs=[x, count, out])  # the positional form\n" in text
    assert (
        "    launch_through_static(\n"
        '        dim=x.shape[0],\n        inputs=[x, other_count, extra],\n        device="cpu",\n    )\n'
    ) in text
    assert "    launch(scale, x.shape[0], inputs=[out, doubled])" in text
    assert '    launch_compact(x.shape[0], [x, count, out], [], [], [], "cpu")' in text  # wp.launch's own positions
    assert "    wp.launch(compact, x.shape[0], inputs=[x, count, out], **options)" in text
    assert "def shadowed(compact, x, count, out):\n    wp.launch(compact, x.shape[0]" in text


def test_a_block_names_its_spec_and_keeps_its_statements_together(adoption):
    """The launch spec is a statement of its own, ``compact_spec = KernelSpec(...)``, which the ``RewrittenKernel``
    names; after the phases' definitions, the block's statements follow one another without blank lines, up to its
    end marker (a factory's block alike, one level in)."""
    text = Path(adoption.__file__).read_text()
    assert "\ncompact_spec = wp_rewrite_runtime.KernelSpec(\n" in text
    assert (
        "compact_rewritten = wp_rewrite_runtime.RewrittenKernel(\n"
        "    compact, wp_rewrite_runtime.KernelPair(compact_record, compact_replay, compact_spec)\n"
        ")\n"
        "launch_compact = compact_rewritten.launch  # takes wp.launch's arguments\n"
        "compact = compact_rewritten  # every name of compact now launches both phases\n"
        "# ---- wp-rewrite: end of the code generated from kernel 'compact' ----\n"
    ) in text
    blocks = text.split("# ---- wp-rewrite: generated from kernel ")[1:]
    assert len(blocks) >= 3
    for block in blocks:
        block = block[: block.index("# ---- wp-rewrite: end of the code")]
        tail = block[block.rindex("_spec = wp_rewrite_runtime.KernelSpec(") :]
        assert "\n\n" not in tail, tail


def test_rewritten_call_sites_give_finite_difference_gradients(adoption):
    """``step`` as the emitted file has it: its launches of compact and of through_static (which calls a helper
    through wp.static) run both phases; the original kernels give the ground truth."""

    def program(args, launcher):
        x, count, out, other_count, extra = args
        if launcher.__name__ == "launch_original":
            wp.launch(adoption.compact, N, inputs=[x, count, out], device="cpu")
            wp.launch(adoption.through_static, N, inputs=[x, other_count, extra], device="cpu")
        else:
            adoption.step(*args)

    def make():
        out, extra = (wp.zeros(N, dtype=wp.float64, requires_grad=True) for _ in range(2))
        return [f64(X, True), i32([0]), out, i32([0]), extra]

    check(Case(None, N, make, [2, 4], [0], program=program))


def test_discarded_conditional_atomics_keep_their_gradients(adoption):
    text = Path(adoption.__file__).read_text()
    statement = (
        "    wp.atomic_add(acc, 0, x[tid] * x[tid]) if x[tid] > wp.float64(0.0) else wp.atomic_sub(acc, 1, x[tid])\n"
    )
    assert text.count(statement) == 1  # the kernel; the one definition of both phases keeps it, laid out as ruff would
    laid_out = (
        "        wp.atomic_add(acc, 0, x[tid] * x[tid]) if x[tid] > wp.float64(\n"
        "            0.0\n"
        "        ) else wp.atomic_sub(acc, 1, x[tid])\n"
    )
    assert text.count(laid_out) == 1
    replay_parameters = text.split("def signed_totals_phase(")[1].split("):")[0]
    assert replay_parameters.count("_records") == 1  # the slot's: nothing recorded for the discarded ones

    def program(args, launcher):
        if launcher.__name__ == "launch_original":
            wp.launch(adoption.signed_totals, N, inputs=args, device="cpu")
        else:
            adoption.launch_signed_totals(N, inputs=args, device="cpu")

    def make():
        acc, out = wp.zeros(2, dtype=wp.float64, requires_grad=True), wp.zeros(N, dtype=wp.float64, requires_grad=True)
        return [f64(X, True), acc, i32([0]), out]

    check(Case(None, N, make, [1, 3], [0], program=program))


@pytest.mark.parametrize("dtype", [wp.float64, wp.float32])
def test_factory_kernel_is_rewritten_inside_its_factory(adoption, dtype):
    """What make_compact returns is the rewritten kernel; its closure's dtype and helper are the original's."""
    rewritten = adoption.make_compact(dtype)
    assert isinstance(rewritten, adoption.wp_rewrite_runtime.RewrittenKernel)

    def program(args, launcher):
        if launcher.__name__ == "launch_original":
            wp.launch(rewritten.kernel, N, inputs=args, device="cpu")
        else:
            rewritten.launch(N, inputs=args, device="cpu")

    def make():
        return [wp.array(X, dtype=dtype, requires_grad=True), i32([0]), wp.zeros(N, dtype=dtype, requires_grad=True)]

    if dtype is wp.float64:
        check(Case(None, N, make, [2], [0], program=program))
    else:  # the thread order on the CPU is fixed: out[k] = x_k^2 + 1
        x, count, out = make()
        tape = wp.Tape()
        with tape:
            rewritten.launch(N, inputs=[x, count, out], device="cpu")
        tape.backward(grads={out: wp.ones(N, dtype=dtype)})
        np.testing.assert_allclose(x.grad.numpy(), 2.0 * X.astype(np.float32), rtol=1e-6)


def test_factory_that_launches_its_kernel_launches_the_rewritten_one(adoption):
    text = Path(adoption.__file__).read_text()
    assert "    tripled = tripled_rewritten  # every name of tripled now launches both phases\n" in text
    assert "    tripled.launch(x.shape[0], inputs=[x, count, out])\n    return tripled\n" in text
    x, count, out = f64(X, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        adoption.make_and_launch(x, count, out)
    tape.backward(grads={out: wp.array(np.arange(N, dtype=np.float64), dtype=wp.float64)})
    np.testing.assert_allclose(x.grad.numpy(), 3.0 * np.arange(N))  # thread k writes slot k on the CPU


def test_rewritten_file_rewrites_to_itself_and_says_so(adoption, capsys, tmp_path):
    again = tmp_path / "again.py"
    status, _, err = run_cli(capsys, adoption.__file__, "-o", again)
    assert status == 0 and again.read_text() == Path(adoption.__file__).read_text()
    assert err.endswith(
        ": already rewritten (compact, through_static, signed_totals, compact_typed, tripled): nothing to change\n"
    )


REFUSED_AND_FINE = """import warp as wp


@wp.kernel
def pick(a: wp.array[int], b: wp.array[int], flag: int, out: wp.array[float]):
    counter = a
    if flag > 0:
        counter = b
    out[wp.atomic_add(counter, 0, 1)] = 1.0


@wp.kernel
def fine(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 2.0


@wp.kernel(**{"enable_backward": True})
def hidden_options(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 3.0


class Holder:
    @wp.kernel
    def in_a_class(count: wp.array[int], out: wp.array[float]):
        out[wp.atomic_add(count, 0, 1)] = 4.0
"""


def test_refused_kernels_are_listed_and_the_others_rewritten(capsys, tmp_path):
    source, out = tmp_path / "mixed.py", tmp_path / "mixed_rewritten.py"
    source.write_text(REFUSED_AND_FINE)
    status, _, err = run_cli(capsys, source, "-o", out)
    assert status == 1
    lines = err.splitlines()
    assert sorted(line.split(": ", 2)[:2][0] + ": " + line.split(": ", 2)[1] for line in lines[:-1]) == [
        f"{source}:24:5: kernel 'in_a_class'",
        f"{source}:9:23: kernel 'pick'",
    ]
    assert "a kernel defined in a class body cannot be rewritten to a file" in err
    assert lines[-1] == f"{source} -> {out}: rewrote 2 kernels (fine, hidden_options); 2 kernels refused (see above)"
    text = out.read_text()
    assert "\nlaunch_fine = fine_rewritten.launch" in text and "pick_record" not in text
    record = 'hidden_options_record = wp.kernel(\n    **{**{"enable_backward": True}, "enable_backward": False}\n)('
    assert record + "hidden_options_phases(record=True))" in text
    assert (tmp_path / "wp_rewrite_runtime" / "__init__.py").exists()


# --- generated blocks: deleting one and running again brings it back -------------------------------------------------

BLOCK = re.compile(
    r"(?ms)^[ \t]*# ---- wp-rewrite: generated from kernel '(\w+)' above \(fingerprint [^\n]*\) ----\n.*?"
    r"^[ \t]*# ---- wp-rewrite: end of the code generated from kernel '\1' ----\n"
)


def assert_each_block_comes_back(path: Path, at_once: int = 1) -> int:
    """Delete each generated block of ``path`` (from its begin marker to its end marker), rewrite, and compare;
    returns how many there are. ``at_once``: blocks deleted together, of those ``len(blocks) // at_once`` apart, so
    that the blocks beside each deleted one stay (each rewrite of a file of many kernels takes seconds)."""
    text = path.read_text()
    blocks = list(BLOCK.finditer(text))
    stride = max(1, len(blocks) // at_once)
    for first in range(stride):
        cut, end = "", 0
        for block in blocks[first::stride]:
            cut, end = cut + text[end : block.start()], block.end()
        restored = emit_module(path, path.name, cut + text[end:]).text
        assert restored == text, f"blocks of {[block.group(1) for block in blocks[first::stride]]} not restored"
    return len(blocks)


def test_each_block_of_the_pattern_kernels_comes_back(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # as test_cli runs it: the helpers' module is found from the repository
    out = tmp_path / "patterns_rewritten.py"
    assert main([str(PATTERNS), "-o", str(out), "-q"]) == 0
    assert assert_each_block_comes_back(out, at_once=4) == 38


def test_each_block_of_a_file_with_two_kernels_and_a_factory_comes_back(adoption):
    assert assert_each_block_comes_back(Path(adoption.__file__)) == 5


def test_runtime_import_comes_back_too(adoption, tmp_path):
    text = Path(adoption.__file__).read_text()
    cut = text.replace("\n" + runtime_import("wp_rewrite_runtime"), "", 1)
    path = tmp_path / "adoption_rewritten.py"
    assert emit_module(path, path.name, cut).text == text


# --- emitted files and ruff --------------------------------------------------------------------------------------


def ruff_findings(path: Path, cwd: Path) -> list[tuple[str, str]]:
    """(code, the reported line's text) for each finding of ``ruff check`` with its default rules."""
    result = subprocess.run(
        [str(RUFF), "check", "--isolated", "--output-format", "concise", "--no-cache", str(path)],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    lines = path.read_text().splitlines()
    found = []
    for line in result.stdout.splitlines():
        match = re.match(r".*?:(\d+):\d+: ([A-Z]+\d+)", line)
        if match:
            found.append((match.group(2), lines[int(match.group(1)) - 1].strip()))
    return found


@pytest.mark.skipif(not RUFF.exists(), reason="ruff (a dev dependency) is not installed")
def test_emitted_files_pass_ruffs_default_rules(adoption, tmp_path, monkeypatch):
    """The emitted file has no finding its input does not have, with ruff run from the folder wp-rewrite ran in
    (the default first-party detection) and from the output's folder with a ruff configuration there."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "adoption.py"
    source.write_text(ADOPTION)
    assert main([str(source), "--in-place", "-q"]) == 0
    assert ruff_findings(source, tmp_path) == []
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.ruff]\n")
    (project / "adoption.py").write_text(ADOPTION)
    monkeypatch.chdir(REPO)
    assert main([str(project / "adoption.py"), "--in-place", "-q"]) == 0
    assert ruff_findings(project / "adoption.py", project) == []
    assert "from warp import launch\n\n" + runtime_import("wp_rewrite_runtime") in (project / "adoption.py").read_text()


@pytest.mark.skipif(not RUFF.exists(), reason="ruff (a dev dependency) is not installed")
def test_emitted_pattern_kernels_add_no_ruff_finding(tmp_path, monkeypatch):
    """Findings of the emitted pattern kernels are those of the input's own lines (Warp needs ``int(0)``): the
    generated code adds none (what leaving statements out leaves behind is pruned, passes.pruning.pruned)."""
    monkeypatch.chdir(REPO)
    out = tmp_path / "patterns_rewritten.py"
    assert main([str(PATTERNS), "-o", str(out), "-q"]) == 0
    original = set(ruff_findings(PATTERNS, REPO))
    added = [f for f in ruff_findings(out, REPO) if f not in original]
    assert added == []


def test_package_output_imports_the_runtime_beside_it(capsys, tmp_path, monkeypatch):
    package = tmp_path / "simpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sim.py").write_text(
        ADOPTION.replace("from warp import launch\n", "from warp import launch\n\nfrom . import other\n")
    )
    (package / "other.py").write_text("")
    assert run_cli(capsys, package / "sim.py", "--in-place")[0] == 0
    text = (package / "sim.py").read_text()
    assert "from warp import launch\n\nfrom . import other\n\n" + runtime_import("wp_rewrite_runtime") in text
    assert (package / "wp_rewrite_runtime" / "__init__.py").exists()
    monkeypatch.syspath_prepend(str(tmp_path))
    import simpkg.sim  # imported as a package module, with the runtime beside it

    assert simpkg.sim.launch_compact.__self__.pair is not None


# --- files: atomic writes, the runtime, encodings -------------------------------------------------------------------


SMALL = """import warp as wp


@wp.kernel
def compact(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid]
"""


@pytest.mark.parametrize("where", ["in-place", "output", "runtime"])
def test_a_failed_write_leaves_every_file_as_it_was(capsys, tmp_path, monkeypatch, where):
    source, out, runtime = tmp_path / "small.py", tmp_path / "out.py", tmp_path / "wp_rewrite_runtime.py"
    source.write_text(SMALL)
    out.write_text("# the output of an earlier run\n")
    runtime.write_text("# an older runtime\n")

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli.os, "fsync", full_disk)
    argv = [source, "--in-place"] if where == "in-place" else [source, "-o", out]
    status, _, err = run_cli(capsys, *argv)
    assert status == 2 and "No space left on device" in err and "Traceback" not in err
    assert source.read_text() == SMALL and out.read_text() == "# the output of an earlier run\n"
    assert runtime.read_text() == "# an older runtime\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.py", "small.py", "wp_rewrite_runtime.py"]


def test_a_failed_write_of_the_runtime_leaves_an_older_copy_as_it_was(capsys, tmp_path, monkeypatch):
    source, copy = tmp_path / "small.py", tmp_path / "wp_rewrite_runtime"
    source.write_text(SMALL)
    copy.mkdir()
    (copy / "__init__.py").write_text("# an older runtime\n")

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli.os, "fsync", full_disk)
    status, _, err = run_cli(capsys, source, "-o", tmp_path / "out.py")
    assert status == 2 and "No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.py", "wp_rewrite_runtime"]
    assert [p.name for p in copy.iterdir()] == ["__init__.py"] and "older" in (copy / "__init__.py").read_text()


def runtime_files() -> dict[str, bytes]:
    """The runtime package's files: what a copy beside an emitted module holds, byte for byte."""
    return {path.name: path.read_bytes() for path in Path(warp_rewrite.runtime.__file__).parent.glob("*.py")}


def copied_files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.glob("*.py")}


def test_writes_keep_the_files_mode_and_replace_an_older_single_file_runtime(capsys, tmp_path):
    """Earlier versions wrote the runtime as one file, ``wp_rewrite_runtime.py``, where the folder goes now: a
    re-run writes the folder and removes the file (the folder would shadow it at import)."""
    source, single_file = tmp_path / "small.py", tmp_path / "wp_rewrite_runtime.py"
    source.write_text(SMALL)
    source.chmod(0o640)
    single_file.write_text('"""warp-rewrite\'s runtime: ..."""\n__version__ = "0.0.1"\n')
    assert run_cli(capsys, source, "--in-place")[0] == 0
    assert stat.S_IMODE(source.stat().st_mode) == 0o640 and "launch_compact" in source.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.py", "wp_rewrite_runtime"]
    assert copied_files(tmp_path / "wp_rewrite_runtime") == runtime_files()
    abi = (tmp_path / "wp_rewrite_runtime" / "abi.py").read_text()
    assert f'__version__ = "{warp_rewrite.runtime.__version__}"' in abi
    assert all(code.startswith(b"# SPDX-License-Identifier: Apache-2.0\n") for code in runtime_files().values())


def test_a_rerun_updates_an_older_runtime_folder(capsys, tmp_path):
    """An older copy's files are replaced, and one the runtime no longer has goes; an up-to-date copy is left alone."""
    source, copy = tmp_path / "small.py", tmp_path / "wp_rewrite_runtime"
    source.write_text(SMALL)
    copy.mkdir()
    (copy / "abi.py").write_text('__version__ = "0.0.1"\n')
    (copy / "gone.py").write_text("")
    assert run_cli(capsys, source, "--in-place")[0] == 0
    assert copied_files(copy) == runtime_files()
    before = {path.name: path.stat().st_mtime_ns for path in copy.glob("*.py")}
    assert run_cli(capsys, source, "--in-place")[0] == 0
    assert {path.name: path.stat().st_mtime_ns for path in copy.glob("*.py")} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.py", "wp_rewrite_runtime"]


@pytest.mark.parametrize("encoding", ["latin-1", "utf-8-sig"])
def test_a_file_is_read_and_written_in_its_own_encoding(capsys, tmp_path, encoding):
    cookie = "# -*- coding: latin-1 -*-\n" if encoding == "latin-1" else ""
    text = cookie + SMALL.replace("    tid = wp.tid()\n", "    tid = wp.tid()  # the thread's index, déjà vu\n")
    source, out = tmp_path / "accented.py", tmp_path / "out.py"
    source.write_bytes(text.encode(encoding))
    assert run_cli(capsys, source, "-o", out)[0] == 0
    written = out.read_bytes().decode(encoding)
    assert written.startswith(cookie + "import warp as wp\n") and "déjà vu" in written and "launch_compact" in written
    assert out.read_bytes().startswith(b"\xef\xbb\xbf") == (encoding == "utf-8-sig")


def test_a_closed_pipe_ends_the_run_quietly(tmp_path):
    """``wp-rewrite FILE --diff | head -1``: no traceback, the status of a closed pipe."""
    process = subprocess.Popen(
        [sys.executable, "-m", "warp_rewrite", str(PATTERNS), "--diff"],
        cwd=TESTS,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait() == 141 and first.startswith(b"---")
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr
    process = subprocess.Popen(
        [sys.executable, "-m", "warp_rewrite", "--check", str(TESTS)],
        cwd=TESTS,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()  # before anything was written
    assert process.wait() == 141 and "Traceback" not in process.stderr.read().decode()


def test_new_files_get_the_usual_mode(capsys, tmp_path):
    source, out = tmp_path / "small.py", tmp_path / "new.py"
    source.write_text(SMALL)
    umask = os.umask(0o022)
    try:
        assert run_cli(capsys, source, "-o", out)[0] == 0
    finally:
        os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


# --- kernels a file makes of plain functions when it runs ----------------------------------------------------------

MADE_AT_RUN_TIME = '''"""Kernels made of plain functions when the module runs, as Warp's own tests make them."""

from typing import Any

import warp as wp

made = {}


def getkernel(func, suffix=""):
    key = func.__name__ + "_" + suffix
    if key not in made:
        made[key] = wp.Kernel(func=func, key=key)
    return made[key]


def compact_squares(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    if x[tid] > wp.float64(0.0):
        out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid]


by_class = wp.Kernel(func=compact_squares, key="compact_squares_by_class")


def compact_sines(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = wp.sin(x[tid])


by_call = wp.kernel(compact_sines)


def compact_shifted(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid] * x[tid] + wp.float64(1.0)


by_options = wp.kernel(enable_backward=True)(compact_shifted)


def counted_any(x: wp.array[wp.float64], count: wp.array(dtype=Any), out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, count.dtype(1))
    out[int(slot)] = x[tid] * x[tid] + wp.float64(2.0)


by_call_of_any = wp.kernel(counted_any)  # its rewrite also takes the variant an int count runs (detached=)


def make_compact_scaled(dtype):
    def compact_scaled(x: wp.array(dtype=dtype), count: wp.array[wp.int32], out: wp.array(dtype=dtype)):
        tid = wp.tid()
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * dtype(3.0)

    kernel = getkernel(compact_scaled, suffix=dtype.__name__)
    return kernel
'''
WAYS = {
    "wp.Kernel(func=f)": (
        "by_class",
        'by_class = rewrite_compact_squares(wp.Kernel(func=compact_squares, key="compact_squares_by_class"))\n',
    ),
    "wp.kernel(f)": ("by_call", "by_call = rewrite_compact_sines(wp.kernel(compact_sines))\n"),
    "wp.kernel(...)(f)": (
        "by_options",
        "by_options = rewrite_compact_shifted(wp.kernel(enable_backward=True)(compact_shifted))\n",
    ),
    "wp.kernel(f), a target of any dtype": (
        "by_call_of_any",
        "by_call_of_any = rewrite_counted_any(wp.kernel(counted_any))",
    ),
    "getkernel(f)": (
        "make_compact_scaled",
        "    kernel = rewrite_compact_scaled(getkernel(compact_scaled, suffix=dtype.__name__))\n",
    ),
}


@pytest.fixture(scope="module")
def made_at_run_time(tmp_path_factory):
    folder = tmp_path_factory.mktemp("made")
    source, out = folder / "made.py", folder / "made_rewritten.py"
    source.write_text(MADE_AT_RUN_TIME)
    assert main([str(source), "-o", str(out), "-q"]) == 0
    return import_file(out, "made_rewritten")


@pytest.mark.parametrize("way", WAYS)
def test_kernels_made_at_run_time_are_rewritten_where_they_are_made(made_at_run_time, way):
    """The function is kept as it is, its block follows it, and the call that makes the kernel gives the
    rewritten kernel; gradients equal finite differences of the original kernel (``.kernel``, what the call made)."""
    name, wrapped = WAYS[way]
    text = Path(made_at_run_time.__file__).read_text()
    assert wrapped in text
    functions = [chunk for chunk in MADE_AT_RUN_TIME.split("\n\n\n") if chunk.startswith("def compact")]
    assert len(functions) == 3 and all(function in text for function in functions)  # kept as written
    made = getattr(made_at_run_time, name)
    rewritten = made(wp.float64) if callable(made) and not hasattr(made, "launch") else made
    assert isinstance(rewritten, made_at_run_time.wp_rewrite_runtime.RewrittenKernel)
    assert rewritten.record_kernel is not None
    assert (rewritten.detached() is not None) == (name == "by_call_of_any")  # (its int count runs that variant)

    def program(args, launcher):
        if launcher.__name__ == "launch_original":
            wp.launch(rewritten.kernel, N, inputs=args, device="cpu")
        else:
            wp.launch(rewritten, N, inputs=args, device="cpu")  # as the file's own code launches it

    def make():
        return [f64(X, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)]

    check(Case(None, N, make, [2], [0], program=program))


def test_a_kernel_made_by_a_helper_in_a_factory_keeps_the_factorys_closure(made_at_run_time):
    rewritten = made_at_run_time.make_compact_scaled(wp.float32)
    x, count, out = wp.array(X, dtype=wp.float32, requires_grad=True), i32([0]), wp.zeros(N, dtype=wp.float32)
    out.requires_grad = True
    tape = wp.Tape()
    with tape:
        wp.launch(rewritten, N, inputs=[x, count, out], device="cpu")
    tape.backward(grads={out: wp.array(np.arange(N, dtype=np.float32), dtype=wp.float32)})
    np.testing.assert_allclose(x.grad.numpy(), 3.0 * np.arange(N))  # thread k writes slot k on the CPU


def test_kernels_made_at_run_time_rewrite_to_themselves_come_back_and_check_clean(made_at_run_time, capsys, tmp_path):
    path = Path(made_at_run_time.__file__)
    again = tmp_path / "again.py"
    status, _, err = run_cli(capsys, path, "-o", again)
    assert status == 0 and again.read_text() == path.read_text()
    assert err.endswith(
        "already rewritten (compact_squares, compact_sines, compact_shifted, counted_any, compact_scaled): nothing to "
        "change\n"
    )
    assert assert_each_block_comes_back(path) == 5
    status, out, _ = run_cli(capsys, "--check", path)
    assert (status, out) == (0, "")


def test_a_new_call_making_a_rewritten_kernel_is_wrapped_too(made_at_run_time, capsys, tmp_path):
    text = Path(made_at_run_time.__file__).read_text() + "\n\nanother = wp.kernel(compact_sines)\n"
    source, out = tmp_path / "more.py", tmp_path / "more_rewritten.py"
    source.write_text(text)
    status, _, err = run_cli(capsys, source, "-o", out)
    assert status == 0 and err.endswith(": 1 call making a kernel now gives the rewritten one\n")
    assert out.read_text() == text.replace(
        "= wp.kernel(compact_sines)\n", "= rewrite_compact_sines(wp.kernel(compact_sines))\n"
    )


REFUSED_CONSTRUCTIONS = """import warp as wp

registered = []


def register(func):
    registered.append(wp.Kernel(func=func))


def counted(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0


register(counted)


def optioned(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 2.0


def build(options):
    return wp.kernel(optioned, module=options["module"])


def twice(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 3.0


plain = wp.kernel(twice)
unique = wp.Kernel(twice, options={"enable_backward": True})
"""


def test_kernels_made_at_run_time_are_refused_only_for_what_was_seen(capsys, tmp_path):
    source, out = tmp_path / "refused.py", tmp_path / "refused_rewritten.py"
    source.write_text(REFUSED_CONSTRUCTIONS)
    status, _, err = run_cli(capsys, source, "-o", out)
    assert status == 1
    lines = err.splitlines()
    assert lines[0] == (
        f"{source}:10:1: kernel 'counted': it is made a kernel by register(counted) ({source}:14:1), and 'register' "
        "does not return the kernel it makes (at every return), so wp-rewrite cannot hand on the rewritten one. "
        "Make 'register' return the kernel, decorate the function with @wp.kernel, or rewrite the kernel at run "
        "time with wp_rewrite()"
    )
    assert lines[1].startswith(
        f"{source}:17:1: kernel 'optioned': it is made a kernel by wp.kernel(optioned, module=options['module']) "
        f"({source}:22:12) with its module=options['module'], which wp-rewrite cannot give the generated kernels. "
        "Write the options as literals in that call"
    )
    assert lines[2].startswith(
        f"{source}:25:1: kernel 'twice': it is made a kernel by wp.kernel(twice) ({source}:29:9) and by "
        f"wp.Kernel(twice, options={{'enable_backward': True}}) ({source}:30:10) with other options: one pair of "
        "generated kernels cannot serve both. Give both calls the same options"
    )
    assert "wp.Kernel(func)" not in err and lines[-1].endswith(": 3 kernels refused (see above)")


def test_a_function_made_a_kernel_and_named_elsewhere_is_warned_about(capsys, tmp_path):
    source, out = tmp_path / "listed.py", tmp_path / "listed_rewritten.py"
    source.write_text(MADE_AT_RUN_TIME + "\n\nlisted = [compact_sines]\nnamed = compact_sines.__name__\n")
    status, _, err = run_cli(capsys, source, "-o", out)
    assert status == 0
    listed = MADE_AT_RUN_TIME.count("\n") + 3  # the line of ``listed = [...]``
    assert err.splitlines()[0] == (
        f"{source}:{listed}:11: warning: kernel 'compact_sines' is a plain function named here, where wp-rewrite "
        "cannot tell whether a kernel is made of it: one made through here launches the original, whose gradients are "
        "wrong"
    )


def test_nothing_generated_depends_on_the_working_directory(tmp_path, capsys, monkeypatch):
    """One file of a package, whose helper (with the consumed atomic) is in another file of a namespace subpackage,
    rewritten from the project's folder, from the file's own folder and by absolute path: the same module, whose
    locations in other files are their paths from the folder of their top-level package."""
    package = tmp_path / "project" / "pkg"
    (package / "_src" / "slots").mkdir(parents=True)  # _src: a namespace package, as Newton's
    (package / "__init__.py").write_text("")
    (package / "_src" / "slots" / "__init__.py").write_text("")
    (package / "_src" / "slots" / "take.py").write_text(
        "import warp as wp\n\n\n@wp.func\ndef take(count: wp.array(dtype=wp.int32)) -> wp.int32:\n"
        "    return wp.atomic_add(count, 0, 1)\n"
    )
    (package / "sim.py").write_text(
        "import warp as wp\n\nfrom ._src.slots.take import take\n\n\n@wp.kernel\n"
        "def compact(x: wp.array(dtype=float), count: wp.array(dtype=wp.int32), out: wp.array(dtype=float)):\n"
        "    out[take(count)] = x[wp.tid()]\n"
    )
    outputs = set()
    for folder, path in [
        (tmp_path / "project", "pkg/sim.py"),
        (package, "sim.py"),
        (tmp_path, str(package / "sim.py")),
    ]:
        monkeypatch.chdir(folder)
        status, out, _ = run_cli(capsys, path)
        assert status == 0
        outputs.add(out)
    (emitted,) = outputs
    assert '"pkg/_src/slots/take.py:6:12")' in emitted and 'location="sim.py:12:1"' in emitted


def test_a_specs_sites_records_and_loops_are_a_line_each_whatever_the_line_numbers(tmp_path, capsys):
    """Where they fit; the layout is decided with each location's line number at its widest, so a kernel further
    down a file gets a block of as many lines (the line numbers are only known once the blocks are laid out)."""
    kernel = (
        "@wp.kernel\ndef take(x: wp.array(dtype=float), count: wp.array(dtype=wp.int32), out: wp.array(dtype=float)):\n"
        "    for i in range(count[1]):\n"
        "        out[wp.atomic_add(count, 0, 1)] = x[i]\n"
    )
    blocks = []
    for filler in (0, 99_990):
        (tmp_path / str(filler)).mkdir()
        source = tmp_path / str(filler) / "sim.py"
        source.write_text("import warp as wp\n" + "#\n" * filler + "\n\n" + kernel)
        status, out, _ = run_cli(capsys, source)
        assert status == 0
        blocks.append(out[out.index("# ---- wp-rewrite: generated") :])
    assert blocks[0].count("\n") == blocks[1].count("\n")
    assert "options=" not in blocks[0]  # the fingerprint check's: '' by default
    for block in blocks:
        assert re.search(r'^ +wp_rewrite_runtime\.Op\.ADD\("count", "\d+:13"\),$', block, re.M)
        assert re.search(r'^ +loops=\(wp_rewrite_runtime\.LoopSpec\(0, "\d+:5", counted=True\),\),$', block, re.M)
        assert re.search(r'^ +"count_reads", target="count", loops=\(0,\)$', block, re.M)  # (88 wide: ruff's)


@pytest.mark.skipif(not RUFF.exists(), reason="ruff (a dev dependency) is not installed")
def test_a_block_is_laid_out_as_ruff_keeps_it_whatever_the_kernels_name(tmp_path):
    """The ABI check: on one line where it fits with its location's line number at its widest; its arguments on a
    line of their own where they fit and no line number would let ruff join them; else one argument a line. And the
    rest of the block too: the launch spec in parentheses where even ``name_spec = ...KernelSpec(`` is too long (but
    not where its first argument, the name, would not fit a level further in), a factory's single parameter with its
    comma, the fingerprint check's tuple of one kernel broken with its comma."""
    layouts = set()
    for length in range(20, 100):
        name = "k" * length
        source = tmp_path / f"{length}" / "sim.py"
        source.parent.mkdir()
        source.write_text(
            f"import warp as wp\n\n\n@wp.kernel\ndef {name}(\n"
            "    x: wp.array(dtype=float),\n    c: wp.array(dtype=int),\n):\n    x[wp.atomic_add(c, 0, 1)] = 1.0\n"
        )
        assert main([str(source), "--in-place", "-q"]) == 0
        formatted = subprocess.run(
            [str(RUFF), "format", "--isolated", "--check", "--diff", "--no-cache", str(source)],
            capture_output=True,
            text=True,
        )
        assert formatted.returncode == 0, formatted.stdout
        check = re.search(r"require_abi\((\n    )?\d+,( |\n)", source.read_text())
        assert check is not None
        layouts.add({(None, " "): "a line", ("\n    ", " "): "arguments' line"}.get(check.groups(), "item a line"))
    assert layouts == {"a line", "arguments' line", "item a line"}


@pytest.mark.skipif(not RUFF.exists(), reason="ruff (a dev dependency) is not installed")
def test_a_site_or_loop_in_the_emitted_file_is_laid_out_as_ruff_keeps_it_at_every_width(tmp_path):
    """Its line number is measured at its widest: where the site or loop would fit on fewer lines with its own, it
    takes one item a line (kept so by the trailing comma), never the arguments' line, which ruff would join; where
    not even a line number of one digit lets it fit a line, its arguments take a line of their own."""
    layouts = set()
    for width, length in itertools.product((88, 120), range(1, 46)):  # (the kernel's own lines fit 88 columns)
        name = "c" * length
        source = tmp_path / f"{width}_{length}" / "sim.py"
        source.parent.mkdir()
        (source.parent / "pyproject.toml").write_text(f"[tool.ruff]\nline-length = {width}\n")
        source.write_text(
            "import warp as wp\n\n\n@wp.kernel\ndef take(\n    x: wp.array(dtype=float),\n"
            f"    {name}: wp.array(dtype=int),\n    {name}_n: int,\n):\n"
            f"    for i in range({name}_n):\n        x[wp.atomic_add({name}, 0, 1)] = 1.0\n"
        )
        assert main([str(source), "--in-place", "-q"]) == 0
        formatted = subprocess.run(
            [str(RUFF), "format", "--check", "--diff", "--no-cache", str(source)],
            capture_output=True,
            text=True,
            cwd=source.parent,
        )
        assert formatted.returncode == 0, formatted.stdout
        loop = re.search(r"LoopSpec\((\n *)?0,( |\n)", source.read_text())
        assert loop is not None
        layouts.add("arguments' line" if loop.groups() == ("\n            ", " ") else "item a line")
    assert layouts == {"arguments' line", "item a line"}  # (with its argument range, never one line at 120)
