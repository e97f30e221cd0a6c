"""Where the command line writes: never over something that is not a regular file, through a symbolic link into the
file it points to (with the runtime beside that file, where Python looks), no runtime copy left behind by a failed
write; ``--check`` over a folder with broken links reports them and exits as for its findings."""

from __future__ import annotations

import os

import numpy as np
import pytest
import warp as wp

from tests.support.emitted import import_file
from tests.support.harness import Case, check, f64, i32, original_or
from warp_rewrite.cli import writes
from warp_rewrite.cli.emit import RUNTIME_FOLDER
from warp_rewrite.cli.main import main

N = 6
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1])


def compaction_args() -> list:
    return [f64(X, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)]


SIM = """import warp as wp


@wp.kernel
def compact_cubes(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid] * x[tid]
"""


def run(capsys, *argv) -> tuple[int, str]:
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_output_onto_a_fifo_is_refused_and_the_fifo_kept(tmp_path, capsys):
    (tmp_path / "sim.py").write_text(SIM)
    fifo = tmp_path / "out.py"
    os.mkfifo(fifo)
    status, err = run(capsys, tmp_path / "sim.py", "-o", fifo, "-q")
    assert status == 2 and "not a regular file" in err
    assert fifo.is_fifo() and not (tmp_path / RUNTIME_FOLDER).exists()


def test_in_place_through_a_link_rewrites_the_file_it_points_to(tmp_path, capsys):
    real, links = tmp_path / "real", tmp_path / "links"
    real.mkdir()
    links.mkdir()
    (real / "sim_linked.py").write_text(SIM)
    (links / "sim_linked.py").symlink_to(real / "sim_linked.py")
    assert run(capsys, links / "sim_linked.py", "--in-place", "-q")[0] == 0
    assert (links / "sim_linked.py").is_symlink() and "compact_cubes_rewritten" in (real / "sim_linked.py").read_text()
    assert (real / RUNTIME_FOLDER).is_dir() and not (links / RUNTIME_FOLDER).exists()
    emitted = import_file(real / "sim_linked.py", "sim_linked")

    program = original_or(
        emitted.compact_cubes.kernel, N, lambda args: wp.launch(emitted.compact_cubes, N, inputs=args, device="cpu")
    )
    check(Case(None, N, compaction_args, [2], [0], program=program))


def test_a_failed_write_leaves_no_runtime_copy(tmp_path, capsys, monkeypatch):
    (tmp_path / "sim.py").write_text(SIM)
    write = writes.write_temporary

    def failing(temporary, data, mode):
        if temporary.name.startswith(".out.py."):
            raise OSError(28, "No space left on device")
        write(temporary, data, mode)

    monkeypatch.setattr(writes, "write_temporary", failing)
    status, err = run(capsys, tmp_path / "sim.py", "-o", tmp_path / "out.py", "-q")
    assert status == 2 and "No space left on device" in err
    assert not (tmp_path / "out.py").exists() and not (tmp_path / RUNTIME_FOLDER).exists()


def test_check_reports_broken_links_and_exits_for_its_findings(tmp_path, capsys):
    (tmp_path / "sim.py").write_text(SIM)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "missing.py")
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to(tmp_path)
    status, err = run(capsys, "--check", tmp_path)
    assert status == 1  # the finding in sim.py; the links are warnings
    assert "dangling.py: a symbolic link to no file, skipped" in err and "loop.py: a symbolic link" in err
    (tmp_path / "sim.py").write_text("import warp as wp\n")
    assert run(capsys, "--check", tmp_path)[0] == 0
