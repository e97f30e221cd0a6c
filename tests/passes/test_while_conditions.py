"""passes/while_conditions.py: a while condition that calls an atomic moves into the loop's body.

Nothing here compiles or launches a kernel.
"""

import ast

from tests.support.pass_sources import WARP, parse, same_code
from warp_rewrite.passes.while_conditions import hoist_conditions


def hoisted(source: str) -> str:
    """The function with its while conditions that call an atomic hoisted, or 'unchanged'."""
    tree = hoist_conditions(parse(source), lambda call: WARP.atomic_op(call) is not None)
    return "unchanged" if tree is None else ast.unparse(tree)


def test_a_while_condition_that_calls_an_atomic_moves_into_the_loop():
    same_code(
        hoisted("""
            def k(budget: wp.array[int], count: wp.array[int], n: int):
                while wp.atomic_sub(budget, 0, 1) > 0:
                    slot = wp.atomic_add(count, 0, 1)
                    if slot % 2 == 1:
                        continue  # jumps to the test, which is now the body's first statement
                    while n > 0:  # nothing to hoist
                        n = n - 1
        """),
        """
        def k(budget: wp.array[int], count: wp.array[int], n: int):
            while True:
                if not wp.atomic_sub(budget, 0, 1) > 0:
                    break
                slot = wp.atomic_add(count, 0, 1)
                if slot % 2 == 1:
                    continue
                while n > 0:
                    n = n - 1
        """,
    )
    assert "if wp.atomic_add(count, 0, -1):\n            pass\n        else:\n            break" in hoisted("""
        def k(count: wp.array[int]):
            while wp.atomic_add(count, 0, -1):  # not a bool: Warp's 'not' takes no float
                pass
    """)
    assert (
        hoisted("""
        def k(count: wp.array[int]):
            while wp.atomic_add(count, 0, -1) > 0:
                pass
            else:  # Warp never runs it: the planner refuses such a loop around an atomic
                pass
    """)
        == "unchanged"
    )
