"""passes.pruning: what leaving statements out of a generated function leaves behind is taken out (before/after);
assignments to names marked unused kept as written, end to end (``tests/support/unused_results.py``)."""

import ast
import textwrap
from pathlib import Path

import pytest

from tests.support import unused_results
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32
from warp_rewrite.passes.pruning import pruned

N = 3
X = [0.41, 0.63, 0.27]


def after_pruning(source: str) -> str:
    (function,) = ast.parse(textwrap.dedent(source)).body
    assert isinstance(function, ast.FunctionDef)
    return ast.unparse(pruned(function))


def test_an_unpacking_of_the_thread_index_nothing_reads_goes():
    """A count kernel of a 2-D launch that records nothing (Newton's kinematic weld): ruff's RUF059 flagged the
    unused ``coord0, coord1``."""
    assert (
        after_pruning("""\
        def k_count(x):
            coord0, coord1 = wp.tid()
            thread = coord0 * 4 + coord1
            world, weld = wp.tid()
            x[world] = weld
        """)
        == "def k_count(x):\n    world, weld = wp.tid()\n    x[world] = weld"
    )


def test_an_unpacking_one_of_whose_names_is_read_stays():
    assert (
        after_pruning("""\
        def k_count(x):
            world, weld = wp.tid()
            x[0] = weld
        """)
        == "def k_count(x):\n    _world, weld = wp.tid()\n    x[0] = weld"
    )


def test_a_dead_assignment_keeps_its_call_and_a_pass_beside_others_goes():
    assert (
        after_pruning("""\
        def k_replay(x):
            unused = helper(x)
            pass
            x[0] = 1.0
        """)
        == "def k_replay(x):\n    helper(x)\n    x[0] = 1.0"
    )


def test_a_loop_whose_variable_nothing_reads_any_more_counts_with_an_underscore():
    """Newton's xpbd restitution kernels: a replay whose loop no longer reads ``j`` (ruff's B007)."""
    assert after_pruning("""\
        def k_replay(x, n):
            for j in range(n):
                unused = x[j]
                x[0] = x[0] * 2.0
            for i in range(n):
                x[i] = 1.0
        """) == "\n".join(
        [
            "def k_replay(x, n):",
            "    for _j in range(n):",
            "        x[0] = x[0] * 2.0",
            "    for i in range(n):",
            "        x[i] = 1.0",
        ]
    )


def test_a_name_an_unpacking_leaves_unread_is_marked():
    """Newton's rasterized collisions: a replay that reads one of the three values a query unpacks (ruff's RUF059)."""
    assert (
        after_pruning("""\
        def k_replay(x):
            found, depth, normal = query(x)
            x[0] = depth
        """)
        == "def k_replay(x):\n    _found, depth, _normal = query(x)\n    x[0] = depth"
    )


def test_an_assignment_to_names_marked_unused_keeps_its_call_as_written():
    """Newton's test kernels call a library helper as ``_ = export_and_reduce_contact(...)``: the replay keeps the
    assignment as the record kernel holds it, so that the command line defines the two phases once."""
    assert (
        after_pruning("""\
        def k_replay(x):
            _ = helper(x)
            _a, _b = pair(x)
            x[0] = 1.0
        """)
        == "def k_replay(x):\n    _ = helper(x)\n    _a, _b = pair(x)\n    x[0] = 1.0"
    )


KERNELS = {
    "discard_the_slot": Pattern(lambda: [f64(X, True), i32([0]), f64([0.0] * N, True)], [2], [0]),
    "discard_both_results": Pattern(lambda: [f64(X, True), i32([0]), f64([0.0] * N, True)], [2], [0]),
}
emitted = emitted_fixture(unused_results)
test_through_the_api, test_through_the_command_line = end_to_end_tests(unused_results, N, KERNELS)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_command_line_defines_the_phases_of_a_kernel_dropping_results_once(emitted, name):
    """The call stands once in the kernel's factory, in no ``if wp.static(record):``: both phases hold it as written."""
    text = Path(emitted.__file__).read_text()
    factory = text[text.index(f"def {name}_phases(") : text.index(f"return {name}_phase\n")]
    assert "wp.static(record)" not in factory
    assert factory.count("claim(") + factory.count("claim_pair(") == 1, factory
