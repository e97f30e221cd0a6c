"""passes/loop_returns.py: returns from loops Warp does not unroll become flags and breaks.

Nothing here compiles or launches a kernel.
"""

import ast

import pytest

from tests.support.pass_sources import parse, same_code
from warp_rewrite.passes.loop_hazards import unrolled_by_warp
from warp_rewrite.passes.loop_returns import lower_returns


def lowered(source: str) -> str:
    tree = lower_returns(parse(source), "wp", 16)
    return "unchanged" if tree is None else ast.unparse(tree)


def test_a_return_from_a_loop_warp_does_not_unroll_becomes_a_flag_and_breaks():
    same_code(
        lowered("""
            def take(count: wp.array[int], n: int) -> int:
                while True:
                    for k in range(n):
                        if wp.atomic_add(count, 0, 1) > k:
                            return k
                    if n > 3:
                        return -1
                    n = n + 1
                for k in range(3):  # unrolled: its return is left alone
                    if k == n:
                        return k
                return 0
        """),
        """
        def take(count: wp.array[int], n: int) -> int:
            returned = wp.bool(False)
            returned_value = wp.int32(0)
            while True:
                for k in range(n):
                    if wp.atomic_add(count, 0, 1) > k:
                        returned_value = wp.int32(k)
                        returned = True
                        break
                if returned:
                    break
                if n > 3:
                    returned_value = wp.int32(-1)
                    returned = True
                    break
                n = n + 1
            if returned:
                return returned_value
            for k in range(3):
                if k == n:
                    return k
            return 0
        """,
    )
    assert (
        lowered("""
        def first(count: wp.array[int], x: wp.array[float], n: int) -> float:
            for i in range(n):
                if wp.atomic_add(count, 0, 1) == i:
                    return x[i]  # a float: left for the planner to refuse
            return 0.0
    """)
        == "unchanged"
    )


def test_a_tuple_return_from_a_loop_gets_a_local_per_element():
    same_code(
        lowered("""
            def pop(items: wp.array[int], head: wp.array[int]) -> tuple[bool, int]:
                while True:
                    current = wp.atomic_add(head, 0, 0)
                    if current >= items.shape[0]:
                        return False, 0
                    if wp.atomic_cas(head, 0, current, current + 1) == current:
                        return True, items[current]
        """),
        """
        def pop(items: wp.array[int], head: wp.array[int]) -> tuple[bool, int]:
            returned = wp.bool(False)
            returned_value = wp.bool(False)
            returned_value_1 = wp.int32(0)
            while True:
                current = wp.atomic_add(head, 0, 0)
                if current >= items.shape[0]:
                    returned_value = wp.bool(False)
                    returned_value_1 = wp.int32(0)
                    returned = True
                    break
                if wp.atomic_cas(head, 0, current, current + 1) == current:
                    returned_value = wp.bool(True)
                    returned_value_1 = wp.int32(items[current])
                    returned = True
                    break
            if returned:
                return (returned_value, returned_value_1)
        """,
    )
    same_code(
        lowered("""
            def claim(flags: wp.array[int], n: int) -> typing.Tuple[wp.int64, wp.bool]:
                for i in range(n):
                    if wp.atomic_cas(flags, i, 0, 1) == 0:
                        return wp.int64(i), True
                return wp.int64(-1), False
        """),
        """
        def claim(flags: wp.array[int], n: int) -> typing.Tuple[wp.int64, wp.bool]:
            returned = wp.bool(False)
            returned_value = wp.int64(0)
            returned_value_1 = wp.bool(False)
            for i in range(n):
                if wp.atomic_cas(flags, i, 0, 1) == 0:
                    returned_value = wp.int64(wp.int64(i))
                    returned_value_1 = wp.bool(True)
                    returned = True
                    break
            if returned:
                return (returned_value, returned_value_1)
            return (wp.int64(-1), False)
        """,
    )


def test_a_bool_return_from_a_loop_gets_a_bool_local():
    same_code(
        lowered("""
            def mark(marks: wp.array[int], n: int) -> bool:
                for i in range(n):
                    if wp.atomic_cas(marks, i, 0, 1) == 0:
                        return True
                return False
        """),
        """
        def mark(marks: wp.array[int], n: int) -> bool:
            returned = wp.bool(False)
            returned_value = wp.bool(False)
            for i in range(n):
                if wp.atomic_cas(marks, i, 0, 1) == 0:
                    returned_value = wp.bool(True)
                    returned = True
                    break
            if returned:
                return returned_value
            return False
        """,
    )


@pytest.mark.parametrize(
    ("returns", "value"),
    [
        ("tuple[bool, int]", "pair"),  # a tuple-valued expression: no elements to assign
        ("tuple[bool, int]", "pop(count)"),
        ("tuple[bool, int]", "True, i, 0"),  # not the declared arity
        ("tuple[bool, float]", "True, 0.5"),  # a float element
        ("tuple[bool, wp.vec3]", "True, wp.vec3()"),
        ("tuple", "True, i"),  # no element types
        ("int", "i, i"),
        ("float", "0.5"),
    ],
)
def test_returns_from_a_loop_the_annotation_types_no_local_for_are_left_to_the_planner(returns, value):
    assert (
        lowered(f"""
        def take(count: wp.array[int], pair: tuple[bool, int], n: int) -> {returns}:
            for i in range(n):
                if wp.atomic_add(count, 0, 1) == i:
                    return {value}
            return pair
    """)
        == "unchanged"
    )


@pytest.mark.parametrize(
    ("loop", "max_unroll", "unrolled"),
    [
        ("for i in range(4):\n    pass", 16, True),
        ("for i in range(4):\n    pass", 3, False),  # the module's max_unroll
        ("for i in range(n):\n    pass", 16, False),
        ("for i in range(4):\n    if i > n:\n        break", 16, False),
        # Warp puts a wp.static()'s value in place first, which the rewrite cannot tell: counted as a loop
        ("for i in range(wp.static(N + 1)):\n    pass", 16, False),
        ("for i in range(4):\n    y = wp.static(N)", 0, False),
        # one reading the loop's variable is left for the unrolled trips: Warp unrolls the loop whatever its length
        ("for i in range(40):\n    y = x[wp.static(i % 4)]", 16, True),
        ("for i in range(wp.static(N)):\n    for j in range(2):\n        y = wp.static(i + j)", 0, True),
        ("for i in range(N):\n    pass", 16, False),  # a global's value is not looked up
        ("while i < 4:\n    pass", 16, False),
    ],
)
def test_which_loops_warp_unrolls(loop, max_unroll, unrolled):
    assert unrolled_by_warp(ast.parse(loop).body[0], max_unroll) == unrolled
