"""Bugs the fuzzer (tests/fuzz) found, each minimized by hand into a kernel of its own.

The first three were fixed in e298135; a bug still open is pinned with ``@pytest.mark.xfail(strict=True,
raises=..., reason=...)``, so that the test turns red as soon as the fix lands and the marker goes.
"""

import numpy as np
import pytest
import warp as wp

from tests.support.harness import Case, check, f64, i32, vec3d
from warp_rewrite import wp_rewrite

# --- vec3d min/max: each component has its own holder ------------------------------------------------


@wp.kernel
def lowest_so_far(values: wp.array[wp.vec3d], low: wp.array[wp.vec3d], out: wp.array[wp.float64]):
    tid = wp.tid()
    before = wp.atomic_min(low, 0, values[tid])
    out[tid] = before[0] + before[1] + before[2]


@wp.kernel
def highest_so_far(values: wp.array[wp.vec3d], high: wp.array[wp.vec3d], out: wp.array[wp.float64]):
    tid = wp.tid()
    before = wp.atomic_max(high, 0, values[tid])
    out[tid] = before[0] + before[1] + before[2]


@pytest.mark.parametrize(
    "kernel, sign", [(lowest_so_far, 1.0), (highest_so_far, -1.0)], ids=["atomic_min", "atomic_max"]
)
def test_vector_min_max_routes_each_component_to_its_own_holder(kernel, sign):
    """Found as fz_1_9 (55 of the 500 kernels of ``python -m tests.fuzz --seed 11 --count 500`` failed so).

    Thread 0 lowers only component 0, thread 1 only component 1; thread 2 returns (0.5, 0.25, 1.0), whose
    components come from thread 0's value, thread 1's value and the initial value. With out[2]'s adjoint 1,
    expected values.grad = [(1, 0, 0), (0, 1, 0), 0] and low.grad = (0, 0, 1); the bug gave values.grad[1] =
    (1, 1, 1) and nothing to values[0] or low. It needed adjoints on several components of the returned vector:
    consuming one component only, or the final value's adjoint, was routed right.
    """
    values = sign * np.array([[0.5, 3.0, 3.0], [3.0, 0.25, 3.0], [3.0, 3.0, 3.0]])
    make = lambda: [vec3d(values, True), vec3d(sign * np.ones((1, 3)), True), f64(np.zeros(3), True)]  # noqa: E731
    check(Case(kernel, 3, make, [1, 2], [0, 1]))


# --- a nested loop's variable, reused by a later loop ------------------------------------------------


@wp.kernel(module="unique")  # with the bug its generated module did not compile: keep it from the others'
def loop_name_reused(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    for i in range(2):
        for j in range(2):
            out[wp.atomic_add(count, 0, 1)] = x[tid] * wp.float64(i + j + 1)
    for j in range(2):
        out[wp.atomic_add(count, 0, 1)] = x[tid] * wp.float64(j + 2)


def test_inner_loop_variable_reused_by_a_later_loop():
    """Found as fz_1_72. The inner loop variable ``j`` was taken for an int carried by the outer loop: the record
    kernel read ``for i: record_returned(j, j_in_loop0, ...)`` before ``for j: ...`` defined it. The failure was
    a WarpCodegenKeyError (undefined symbol j) at the first launch, not a RewriteError, and it broke every
    rewritten kernel sharing the generated module.
    """
    make = lambda: [f64([0.5, -0.7], True), i32([0]), f64(np.zeros(12), True)]  # noqa: E731
    check(Case(loop_name_reused, 2, make, [2], [0]))


# --- a float return in a loop that runs zero times in the whole launch --------------------------------


@wp.kernel
def sum_over_trips(
    x: wp.array[wp.float64], trips: wp.array[wp.int32], acc: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    for _k in range(trips[tid]):
        before = wp.atomic_add(acc, 0, x[tid])
        out[tid] += before * x[tid]
    out[tid] += x[tid] * x[tid]


def test_float_return_in_a_loop_that_never_runs():
    """Found as fz_2026_23. The loop got 0 record slots, so the exact float return's 'returned' record was empty;
    its empty ``.grad`` is falsy, and ``tape.record_func`` (``if isinstance(a, wp.array) and a.grad``) raised
    ``RuntimeError: Array [] is not of type wp.array or is missing a gradient array`` in ``launch_two_phase``,
    after the record kernel had run forward. Int returns in such a loop, or one trip anywhere, were fine.
    """
    make = lambda: [f64([0.5, -0.7, 0.9], True), i32([0, 0, 0]), f64([0.25], True), f64(np.zeros(3), True)]  # noqa: E731
    check(Case(sum_over_trips, 3, make, [2, 3], [0, 2]))


# Rewrite every kernel of this file up front: their generated module then compiles once.
for _kernel in (lowest_so_far, highest_so_far, sum_over_trips):
    wp_rewrite(_kernel)


# --- a view of a written array in a kernel with exact float returns --------------------------------


@wp.kernel
def deposit_through_a_row(
    x: wp.array[wp.float64], total: wp.array[wp.float64], y: wp.array[wp.float64], grid: wp.array2d[wp.float64]
):
    tid = wp.tid()
    before = wp.atomic_sub(total, 0, x[tid] * wp.float64(0.674))
    y[tid] += wp.sin(before) * x[tid]
    row = grid[1]
    wp.atomic_add(row, tid, wp.sin(x[tid]) * wp.float64(1.151))


def test_a_view_of_a_written_array_beside_exact_float_returns():
    """Found as fz_2026_147 once the fuzzer bound locals to views (grammar ``local bound to memory``).

    The exact backward reaches the inputs through adjoint launches of the replay seeded with the operands' extra
    adjoints, giving each written array a zeroed adjoint of its own. A view the kernel makes (``row = grid[1]``)
    takes its adjoint from the array's own gradient instead, so the launch read ``grid.grad``'s seeds again and
    x.grad got cos(x) * 1.151 twice. The seeded launches now hand such arrays as twins whose gradient is that
    adjoint (``runtime/exact.py``, ``_with_gradient``)."""
    x = np.array([0.7, 1.3, 1.9, 0.4, 0.6])
    grid = lambda: wp.zeros((2, 5), dtype=wp.float64, requires_grad=True)  # noqa: E731
    check(
        Case(
            deposit_through_a_row,
            5,
            lambda: [f64(x, True), f64([1.0], True), f64(np.zeros(5), True), grid()],
            [2, 3],
            [0, 1],
        )
    )
