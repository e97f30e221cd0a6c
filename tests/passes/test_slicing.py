"""passes/slicing.py: a function cut down to what it must keep, as a before/after source pair (the count phase's
and the replay's own pairs: tests/passes/test_count_slice.py, tests/passes/test_two_phase.py)."""

import ast

from tests.support.pass_sources import parse
from warp_rewrite.passes.pruning import constructs
from warp_rewrite.passes.slicing import sliced_function


def test_what_only_computes_values_nothing_kept_reads_goes_and_so_does_an_if_left_empty():
    function = parse("""
        def f(a: wp.array[float], i: int, n: int) -> float:
            scale = wp.float32(2.0) * a[i]
            unused = wp.sin(a[i])
            if unused > 0.5:
                unused = unused * 2.0
            while n > 0:
                n = n - 1
            a[i] = scale
            return helper(a, i)
    """)
    sin = next(n for n in ast.walk(function) if isinstance(n, ast.Call) and ast.unparse(n.func) == "wp.sin")
    expected = parse("""
        def f(a: wp.array[float], i: int, n: int) -> float:
            scale = wp.float32(2.0) * a[i]
            while n > 0:
                n = n - 1
            a[i] = scale
            return helper(a, i)
    """)
    sliced = sliced_function(function, lambda call: call is sin or constructs(call))
    assert ast.unparse(sliced) == ast.unparse(expected)


def test_a_call_kept_for_what_it_does_keeps_an_assignment_to_a_name_marked_unused():
    """``_ = helper(a)``, whose value nothing reads, stays as written (the record kernel holds it so); an assignment
    to a name not so marked becomes the call alone."""
    function = parse("""
        def f(a: wp.array[float]):
            _ = helper(a)
            unused = helper(a)
    """)
    expected = parse("""
        def f(a: wp.array[float]):
            _ = helper(a)
            helper(a)
    """)
    assert ast.unparse(sliced_function(function, constructs)) == ast.unparse(expected)
