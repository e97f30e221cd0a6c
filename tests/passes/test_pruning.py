"""passes.pruning: what leaving statements out of a generated function leaves behind is taken out (before/after)."""

import ast
import textwrap

from warp_rewrite.passes.pruning import pruned


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
