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
    source = """\
        def k_count(x):
            world, weld = wp.tid()
            x[0] = weld
        """
    assert after_pruning(source) == ast.unparse(ast.parse(textwrap.dedent(source)))


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
