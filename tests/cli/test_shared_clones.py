"""A file whose kernels call the same helpers gets one definition of each variant of their clones, not one per
kernel and call site (``warp_rewrite.cli.shared_clones``): those several blocks use go into one block at module
level, the others stay in their block, once. The emitted kernels' gradients are checked against finite differences
of the original; the file stays a file ``--check`` passes and a run rewrites to itself, and where one block is made
again (an edited kernel, a deleted block), all are, as a first run makes them."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import warp as wp

from tests.support.emitted import import_file, run_cli
from tests.support.harness import Case, check, f64, i32, original_or

N = 5
X = np.array([0.5, -1.5, 2.0, 0.25, 1.25])

SOURCE = '''import warp as wp

SCALE = wp.constant(wp.float64(2.0))


@wp.func
def take(count: wp.array(dtype=wp.int32)) -> wp.int32:
    """Claim the next slot."""
    return wp.atomic_add(count, 0, 1)


@wp.func
def take_first(count: wp.array(dtype=wp.int32), limit: wp.int32) -> wp.int32:
    for _ in range(limit):
        slot = take(count)
        if slot >= 0:
            return slot
    return 0


@wp.kernel
def compact_squares(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    out[take_first(count, 3)] = x[tid] * x[tid]


@wp.kernel
def compact_twice(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    out[take_first(count, 3)] = x[tid] * SCALE
    out[take_first(count, 3)] = x[tid]


def make(factor: float):
    @wp.kernel
    def compact_scaled(
        x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)
    ):
        tid = wp.tid()
        out[take_first(count, 3)] = x[tid] * wp.float64(factor)

    return compact_scaled


def make_steps(step: int):
    @wp.func
    def take_steps(count: wp.array(dtype=wp.int32)) -> wp.int32:
        return wp.atomic_add(count, 0, step) // step

    @wp.kernel
    def compact_steps(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
        tid = wp.tid()
        out[take_steps(count)] = x[tid] * x[tid]
        out[take_steps(count)] = x[tid]

    return compact_steps
'''
NAMES = itertools.count()


def rewritten(tmp_path: Path, capsys, text: str = SOURCE) -> tuple[Path, str]:
    folder = tmp_path / f"shared_{next(NAMES)}"
    folder.mkdir()
    path = folder / "kernels.py"
    path.write_text(text)
    status, _, err = run_cli(capsys, path, "--in-place")
    assert status == 0, err
    return path, path.read_text()


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shared")
    (folder / "shared_original.py").write_text(SOURCE)
    (folder / "shared_kernels.py").write_text(SOURCE)
    from warp_rewrite.cli.main import main

    assert main([str(folder / "shared_kernels.py"), "--in-place", "-q"]) == 0
    original = import_file(folder / "shared_original.py", "shared_original")
    return original, import_file(folder / "shared_kernels.py", "shared_kernels"), (folder / "shared_kernels.py")


def definitions(text: str) -> list[str]:
    """The functions defined, and the phases a factory's function is bound to (``rewrite/cli/weave.py``)."""
    return re.findall(r"^[ ]*def (\w+)\(", text, re.M) + re.findall(r"^[ ]*(\w+) = .*\b\w+_phases\(", text, re.M)


def region(text: str, begin: str, end: str) -> str:
    return text.split(begin, 1)[1].split(end, 1)[0]


def test_each_variant_is_defined_once(emitted):
    """``take`` and ``take_first`` as the record, count and replay kernels of compact_squares, compact_twice and
    compact_scaled call them: one definition each, at module level before the first kernel that calls them, without
    their helpers' docstrings; those blocks define no clone of their own. compact_twice's two calls record into
    loops of their own, numbered apart: a clone takes its loops' numbers and capacities as parameters, so both calls
    are the one variant the other kernels call. The factory's own helper reads its closure: its clone stays in its
    block, one for its two call sites."""
    _, _, path = emitted
    text = path.read_text()
    shared = region(text, "helpers the generated blocks below share ----\n", "# ---- wp-rewrite: end of the helpers")
    assert text.index("helpers the generated blocks below share") < text.index("def compact_squares(")
    assert sorted(definitions(shared)) == [
        "take_count",  # the dry run's (a loop of unknown length: take_first's) counts trips with these
        "take_first_count",
        "take_first_phase",  # the one definition of the record and the replay phase, in its factory
        "take_first_phases",
        "take_first_record",
        "take_first_replay",
        "take_phase",
        "take_phases",
        "take_record",
        "take_replay",
    ]
    assert "Claim the next slot" not in shared and text.count('"""Claim the next slot."""') == 1
    for kernel in ("compact_squares", "compact_twice", "compact_scaled"):
        block = region(text, f"generated from kernel '{kernel}'", f"end of the code generated from kernel '{kernel}'")
        assert not [name for name in definitions(block) if name.startswith("take")]
    steps = region(
        text, "generated from kernel 'compact_steps'", "end of the code generated from kernel 'compact_steps'"
    )
    assert sorted(name for name in definitions(steps) if name.startswith("take")) == [
        "take_steps_1_phase",
        "take_steps_1_phases",
        "take_steps_1_record",
        "take_steps_1_replay",
    ]
    everywhere = definitions(text)
    assert len(everywhere) == len(set(everywhere))


def test_a_spec_value_several_blocks_hold_is_defined_once_beside_the_shared_clones(emitted):
    """compact_squares, compact_twice and compact_scaled claim through the one site of ``take``, and compact_squares
    and compact_scaled record the same way through ``take_first``: their records, which take more than a line, are
    defined once, in the shared block, named after the first kernel (``SharedSpecValues``); compact_twice's records
    differ (two calls), and a value on one line, measured as it is written, stays in its spec (the site and the loop,
    in the emitted file, are ``line:col``)."""
    _, _, path = emitted
    text = path.read_text()
    shared = region(text, "helpers the generated blocks below share ----\n", "# ---- wp-rewrite: end of the helpers")
    assert re.findall(r"^(\w+) = \(", shared, re.M) == ["compact_squares_records"]
    blocks = {
        kernel: region(text, f"generated from kernel '{kernel}'", f"end of the code generated from kernel '{kernel}'")
        for kernel in ("compact_squares", "compact_twice", "compact_scaled")
    }
    site = re.search(r'sites=\(wp_rewrite_runtime\.Op\.ADD\("count", "\d+:12"\),\),', blocks["compact_squares"])
    assert site is not None and all(site[0] in block for block in blocks.values())
    for kernel in ("compact_squares", "compact_scaled"):
        assert "records=compact_squares_records," in blocks[kernel]
        assert re.search(r'loops=\(wp_rewrite_runtime\.LoopSpec\(0, "\d+:5", counted=True\),\),', blocks[kernel])
        assert 'location="shared_kernels.py:' in blocks[kernel]
    assert "records=compact_squares" not in blocks["compact_twice"]
    assert 'written=("count", "out"),' in blocks["compact_twice"]


@pytest.mark.parametrize("kernel", ["compact_squares", "compact_twice", "compact_scaled", "compact_steps"])
def test_the_emitted_kernels_match_finite_differences(emitted, kernel):
    original, module, _ = emitted
    made = {"compact_scaled": lambda m: m.make(3.0), "compact_steps": lambda m: m.make_steps(2)}
    get = made.get(kernel, lambda m: getattr(m, kernel))
    plain, rewritten = get(original), get(module)
    rewritten_kernel = rewritten

    def program(args):
        wp.launch(rewritten_kernel, N, inputs=args, device="cpu")

    make = lambda: [f64(X, True), i32([0]), wp.zeros(2 * N, dtype=wp.float64, requires_grad=True)]  # noqa: E731
    check(Case(None, N, make, [2], [0], program=original_or(plain, N, program)))


def test_the_emitted_file_is_the_same_in_every_process(tmp_path):
    """Which shared definitions come first followed a set's order, which Python draws anew in each process
    (``PYTHONHASHSEED``): two runs of the command line on one file wrote the definitions in other orders."""
    (tmp_path / "shared_kernels.py").write_text(SOURCE)
    texts = set()
    for seed in ("1", "2", "3"):
        (tmp_path / seed).mkdir()
        out = tmp_path / seed / "shared_kernels.py"
        command = [sys.executable, "-m", "warp_rewrite", str(tmp_path / "shared_kernels.py"), "-o", str(out), "-q"]
        subprocess.run(command, check=True, env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True)
        texts.add(out.read_text())
    assert len(texts) == 1


def test_the_file_passes_the_check_and_rewrites_to_itself(tmp_path, capsys):
    path, text = rewritten(tmp_path, capsys)
    assert run_cli(capsys, "--check", path)[:2] == (0, "")
    status, out, _ = run_cli(capsys, "--check", "--select", "ALL", path)
    assert status == 0 and all(" WR101 helper 'take" in line for line in out.splitlines())
    status, _, err = run_cli(capsys, path, "--in-place")
    assert status == 0 and path.read_text() == text and "nothing to change" in err


def test_one_block_made_again_makes_all_as_a_first_run_does(tmp_path, capsys):
    line, edited_line = (
        "    out[take_first(count, 3)] = x[tid] * x[tid]\n",
        "    out[take_first(count, 3)] = x[tid] * 3.0\n",
    )
    path, text = rewritten(tmp_path, capsys)
    path.write_text(text.replace(line, edited_line, 1))  # compact_squares, above every generated line
    status, _, err = run_cli(capsys, path, "--in-place")
    assert status == 0 and "regenerated 1 stale block (compact_squares:" in err
    assert path.read_text() == rewritten(tmp_path, capsys, SOURCE.replace(line, edited_line))[1]

    begin = "# ---- wp-rewrite: helpers the generated blocks below share ----\n"
    end = "# ---- wp-rewrite: end of the helpers the generated blocks below share ----\n"
    made = path.read_text()
    path.write_text(made[: made.index(begin)] + made[made.index(end) + len(end) :])  # the shared block deleted
    assert run_cli(capsys, path, "--in-place")[0] == 0
    assert path.read_text() == made
