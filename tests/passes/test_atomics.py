"""passes/atomics.py: which atomics the planner finds, and which of their returns a kernel consumes.

Nothing here compiles or launches a kernel.
"""

import ast

from tests.support.pass_sources import WARP, parse
from warp_rewrite.passes.atomics import find_atomic_calls


def test_consumed_and_unconsumed_atomics():
    kernel = parse("""
        def k(a: wp.array[int], b: wp.array[float]):
            wp.atomic_add(a, 0, 1)
            b[0] += 1.0
            s = wp.atomic_max(a, 1, 2)
            b[wp.atomic_sub(a, 2, 1)] = float(s)
            atomic_add(a, 3, 1) + 1
            wp.atomic_cas(a, 0, s, 3)
    """)
    calls = find_atomic_calls(kernel, WARP)
    assert [(c.op, c.consumed) for c in calls] == [
        ("add", False),
        ("max", True),
        ("sub", True),
        ("add", True),
        ("cas", False),
    ]
    cas = calls[-1]
    assert [ast.unparse(a) for a in cas.index_args] == ["0"]
    assert [ast.unparse(a) for a in cas.value_args] == ["s", "3"]
