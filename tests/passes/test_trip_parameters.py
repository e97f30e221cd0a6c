"""passes/trip_parameters.py: each loop's room for records (compiled in or passed), the launch's status, and the
trip parameters a cloned helper takes. Plans only: nothing compiles."""

import ast

from tests.support.pass_sources import NAMES, Unit, frontend_of, plan_of
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.plan import Planner
from warp_rewrite.passes.plan_types import FunctionPlan, KernelPlan
from warp_rewrite.passes.trip_parameters import (
    clone_trip_parameters,
    compiled_room,
    has_status,
    trip_capacities,
    trip_parameters,
)

TWO_LOOPS = """
    @wp.kernel
    def gather(x: wp.array[float], count: wp.array[int], out: wp.array[float], n: int):
        tid = wp.tid()
        for i in range(4):
            slot = wp.atomic_add(count, 0, 1)
            out[slot] = x[tid]
        for j in range(n):
            s = wp.atomic_add(count, 0, 1)
            out[s] = x[tid] * x[tid]
"""

CALLER = """
    @wp.kernel
    def caller(x: wp.array[float], count: wp.array[int], out: wp.array[float], n: int):
        tid = wp.tid()
        for i in range(n):
            slot = wp.atomic_add(count, 0, 1)
            out[slot] = x[tid]
        HELPER_CALL
"""

TAKE_N = Unit("""
    @wp.func
    def take(count: wp.array[int], out: wp.array[float], v: float, n: int):
        for j in range(n):
            s = wp.atomic_add(count, 0, 1)
            out[s] = v
""")

TAKE_FOUR = Unit("""
    @wp.func
    def take(count: wp.array[int], out: wp.array[float], v: float):
        for j in range(4):
            s = wp.atomic_add(count, 0, 1)
            out[s] = v
""")


def _helper(plan: KernelPlan, name: str) -> FunctionPlan:
    return next(function for function in plan.root.walk() if function.name == name)


def test_a_constant_range_has_its_room_compiled_in_and_a_dynamic_one_takes_it_from_the_launch():
    plan = plan_of(TWO_LOOPS)
    constant, dynamic = plan.loops
    assert (compiled_room(constant, None), compiled_room(dynamic, None)) == (4, None)
    assert trip_capacities(plan.loops, NAMES, None) == {0: "4", 1: "trip_capacity1"}
    assert trip_parameters(plan, NAMES, None) == ("trip_capacity1", "status")


def test_a_fixed_max_records_is_compiled_in_and_the_status_still_reports_overflow():
    plan = plan_of(TWO_LOOPS)
    assert trip_capacities(plan.loops, NAMES, 8) == {0: "4", 1: "8"}
    assert trip_parameters(plan, NAMES, 8) == ("status",)  # a launch that outgrows 8 trips is refused


def test_a_kernel_without_loops_or_exact_returns_takes_no_trip_parameters():
    plan = plan_of("""
        @wp.kernel
        def compact(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
            tid = wp.tid()
            slot = wp.atomic_add(count, 0, 1)
            out[slot] = x[tid]
    """)
    assert not has_status(plan)
    assert trip_parameters(plan, NAMES, None) == ()


def test_exact_float_returns_take_the_status_for_the_exact_backwards_checks():
    frontend = frontend_of("""
        @wp.kernel
        def running(x: wp.array[wp.float64], total: wp.array[wp.float64], y: wp.array[wp.float64]):
            tid = wp.tid()
            before = wp.atomic_add(total, 0, x[tid])
            y[tid] = before * x[tid]
    """)
    namer = Namer.for_tree(ast.Module([frontend.kernel.tree], []), {"wp"})
    plan = Planner(frontend, namer, exact_targets=frozenset({"total"})).plan()
    assert has_status(plan)
    assert trip_parameters(plan, NAMES, None) == ("status",)


def test_a_clone_takes_only_its_own_loops_capacity_number_and_the_status():
    """Not the kernel's loop 0: the clone reads the same in every kernel that calls the helper."""
    plan = plan_of(CALLER.replace("HELPER_CALL", "take(count, out, x[tid], n)"), {"take": TAKE_N})
    passed = trip_parameters(plan, NAMES, None)
    assert passed == ("trip_capacity0", "trip_capacity1", "status")
    assert clone_trip_parameters(_helper(plan, "take"), passed, NAMES) == ("trip_capacity1", "loop1", "status")


def test_a_clone_whose_loop_has_its_room_compiled_in_takes_no_trip_parameters():
    plan = plan_of(CALLER.replace("HELPER_CALL", "take(count, out, x[tid])"), {"take": TAKE_FOUR})
    passed = trip_parameters(plan, NAMES, None)
    assert passed == ("trip_capacity0", "status")
    assert clone_trip_parameters(_helper(plan, "take"), passed, NAMES) == ()
