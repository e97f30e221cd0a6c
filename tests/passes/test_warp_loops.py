"""What the loop replay relies on in Warp's own code generation (``warp/_src/codegen.py``: ``get_unroll_range``,
``begin_for``/``end_for``, ``begin_while``/``end_while``, ``materialize_redefinitions``), each checked on plain
Warp, so that an upgrade of Warp that changes one fails here first. docs/design.md lists them, with these tests.

Each kernel runs on one thread; the gradient it should get is worked out by hand in its test."""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest
import warp as wp

from warp_rewrite.passes.constant_ranges import known_bounds
from warp_rewrite.passes.loop_hazards import unrolled_by_warp

R, C = 2, 2  # module-level names: range(R * C) is a loop Warp does not unroll
N = 4  # a module-level name on its own: range(N) is unrolled
SEVENTEEN = 17


@wp.kernel
def sum_of_16(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    acc = wp.float64(0.0)
    for j in range(16):
        acc += x[j % 4]
    y[0] = acc * acc


@wp.kernel
def sum_of_17(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    acc = wp.float64(0.0)
    for j in range(17):
        acc += x[j % 4]
    y[0] = acc * acc


@wp.kernel
def product_over_a_static_17(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    acc = wp.float64(1.0)
    for j in range(wp.static(17)):
        acc = acc * x[j % 4]
    y[0] = acc


@wp.kernel
def product_with_a_later_static_17(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    acc = wp.float64(1.0)
    for j in range(17):
        acc = acc * x[wp.static(j % 4)]
    y[0] = acc


@wp.kernel
def product_over_a_static_name_17(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    acc = wp.float64(1.0)
    for j in range(wp.static(SEVENTEEN)):
        acc = acc * x[j % 4]
    y[0] = acc


@wp.kernel
def sum_over_a_static_expression(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    acc = wp.float64(0.0)
    for j in range(wp.static(R * C)):
        acc += x[j]
    y[0] = acc * acc


@wp.kernel
def sum_over_a_name(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    acc = wp.float64(0.0)
    for j in range(N):
        acc += x[j]
    y[0] = acc * acc


@wp.kernel
def sum_over_an_expression(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    acc = wp.float64(0.0)
    for j in range(R * C):
        acc += x[j]
    y[0] = acc * acc


@wp.kernel
def sum_that_breaks(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    acc = wp.float64(0.0)
    for j in range(4):
        if j == 5:
            break
        acc += x[j]
    y[0] = acc * acc


@wp.kernel
def per_trip_stores(x: wp.array[wp.float64], n: wp.array[wp.int32], y: wp.array[wp.float64]):
    for j in range(n[0]):
        y[j] = x[j] * x[j] * wp.float64(j + 1)


@wp.kernel
def while_loop(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    k = int(0)
    while k < 4:
        y[k] = x[k] * x[k]
        k += 1


@wp.kernel
def continues(x: wp.array[wp.float64], n: wp.array[wp.int32], y: wp.array[wp.float64]):
    for j in range(n[0]):
        y[j] = x[j] * x[j]
        if j == 1:
            continue
        y[j] = y[j] * wp.float64(2.0)


@wp.kernel
def first_assigned_inside(x: wp.array[wp.float64], n: wp.array[wp.int32], y: wp.array[wp.float64]):
    for j in range(n[0]):
        inner = x[j] * wp.float64(2.0)
    y[0] = inner


@wp.func
def restore(value: wp.float64, records: wp.array[wp.float64], index: int) -> wp.float64:
    return records[index]


@wp.func_grad(restore)
def restore_adjoint(value: wp.float64, records: wp.array[wp.float64], index: int, adj_ret: wp.float64):
    wp.adjoint[value] += adj_ret


@wp.kernel
def restored_product(
    x: wp.array[wp.float64], n: wp.array[wp.int32], trips: wp.array[wp.float64], y: wp.array[wp.float64]
):
    """The replay's shape: a carried local restored at each trip's start by a function whose adjoint passes the
    gradient on, then used nonlinearly; the records hold the forward's values (x = 2: 1, 2, 4; after: 8)."""
    p = wp.float64(1.0)
    for j in range(n[0]):
        p = restore(p, trips, j)
        p = p * x[0]
    p = restore(p, trips, n[0])
    y[0] = p * p


@wp.kernel
def sums_used_linearly(x: wp.array[wp.float64], n: wp.array[wp.int32], scale: wp.float64, y: wp.array[wp.float64]):
    """Sums carried out of a loop Warp does not unroll, each only added to and then used linearly: stored, added,
    scaled by a literal or by a value parameter (x = 1, 2, 3: a = 14, b = -6, c = 6)."""
    a = wp.float64(0.0)
    b = wp.float64(0.0)
    c = wp.float64(0.0)
    for j in range(n[0]):
        a += x[j] * x[j]
        b = b - x[j]
        if j > 0:
            c = x[j] * wp.float64(2.0) + c
    y[0] = a
    y[1] = wp.float64(2.0) * b + x[0]
    y[2] = scale * (c - a)


@wp.kernel
def count_then_square(
    x: wp.array[wp.float64], n: wp.array[wp.int32], found: wp.array[wp.int32], y: wp.array[wp.float64]
):
    """A count Warp's backward sees wrong (0: its replay leaves the loop out), stored into an int array."""
    k = int(0)
    for j in range(n[0]):
        if x[j] > wp.float64(1.5):
            k += 1
    found[0] = k
    y[0] = x[0] * x[0]


def gradient(kernel: wp.Kernel, x: list[float], *more: wp.array) -> np.ndarray:
    xs = wp.array(np.array(x), dtype=wp.float64, requires_grad=True, device="cpu")
    y = wp.zeros(4, dtype=wp.float64, requires_grad=True, device="cpu")
    with wp.Tape() as tape:
        wp.launch(kernel, 1, inputs=[xs, *more, y], device="cpu")
    tape.backward(grads={y: wp.ones(4, dtype=wp.float64, device="cpu")})
    return xs.grad.numpy()


def count(n: int) -> wp.array:
    return wp.array([n], dtype=wp.int32, device="cpu")


X = [1.0, 2.0, 3.0, 4.0]


def test_a_constant_range_of_max_unroll_trips_is_unrolled_and_one_more_is_not():
    """Unrolled, the loop is straight code to backward: y = (sum)^2 gets 2 * sum * trips-per-element. One trip
    over ``max_unroll`` (16) makes a loop, which backward's replay leaves out: the sum stays 0 there."""
    np.testing.assert_allclose(gradient(sum_of_16, X), [2 * 40.0 * 4] * 4)
    assert not np.any(gradient(sum_of_17, X))


def test_a_static_range_is_a_constant_range_and_one_reading_the_loop_variable_forces_the_unroll():
    """Warp puts a ``wp.static(...)``'s value in its place before it decides: ``range(wp.static(17))`` is a loop like
    ``range(17)``, which backward gets wrong; a ``wp.static(...)`` reading the loop's variable is evaluated only as
    the loop is unrolled, which it then is past ``max_unroll``: its product gets its gradient with no record.
    y = x0^5 x1^4 x2^4 x3^4 (17 trips over 4 elements) = 331776 at X."""
    y = 331776.0
    right = [5 * y, 4 * y / 2, 4 * y / 3, 4 * y / 4]
    np.testing.assert_allclose(gradient(product_with_a_later_static_17, X), right)
    assert not np.allclose(gradient(product_over_a_static_17, X), right)


def test_a_range_over_a_module_level_name_is_unrolled_and_over_an_expression_is_not():
    np.testing.assert_allclose(gradient(sum_over_a_name, X), [20.0] * 4)
    assert not np.any(gradient(sum_over_an_expression, X))


def test_a_static_of_module_level_names_is_read_as_its_value():
    """``range(wp.static(R * C))`` is ``range(4)``, unrolled; ``range(wp.static(SEVENTEEN))`` is a loop."""
    np.testing.assert_allclose(gradient(sum_over_a_static_expression, X), [20.0] * 4)
    right = [np.prod([X[j % 4] for j in range(17)]) * sum(j % 4 == i for j in range(17)) / X[i] for i in range(4)]
    assert not np.allclose(gradient(product_over_a_static_name_17, X), right)


def test_a_constant_range_that_breaks_is_a_loop():
    assert not np.any(gradient(sum_that_breaks, X))


def test_the_reverse_pass_replays_each_trip_with_its_loop_variable():
    """Nothing carried: each trip's adjoint sees its own ``j`` (``iter_reverse``), so the gradient is right. The
    replay's coordinates (``thread * room + trip``) rest on this."""
    np.testing.assert_allclose(gradient(per_trip_stores, X, count(3)), [2.0, 8.0, 18.0, 0.0])


def test_a_while_loops_condition_is_evaluated_again_in_backward():
    """Backward runs the loop again from the replay's state (``k`` as before the loop: its replay left the loop out),
    and each replayed trip advances ``k`` before the trip's adjoint reads it: every element's gradient lands on the
    next one (right: 2 x = [2, 4, 6, 8]). The rewrite replays a while loop as a for loop over its recorded trips."""
    np.testing.assert_allclose(gradient(while_loop, X), [0.0, 2.0, 4.0, 6.0])


def test_a_replayed_continue_jumps_past_its_trips_adjoint():
    """Trip 1 continues before its second store: backward's replay of that trip jumps to the next trip before the
    trip's adjoint, and ``x[1]`` gets nothing (the rewrite lowers break and continue to a flag in the replay)."""
    np.testing.assert_allclose(gradient(continues, X, count(3)), [4.0, 0.0, 12.0, 0.0])


def test_a_loops_own_locals_lose_their_adjoint_at_each_replayed_trip():
    """``inner``, first assigned in the loop and read after it, has its adjoint zeroed at each trip of the reverse
    pass: what flowed into it after the loop is lost (the rewrite refuses a float first assigned in the loop and read
    after it)."""
    assert not np.any(gradient(first_assigned_inside, X, count(3)))


def test_a_restored_local_passes_its_gradient_from_trip_to_trip():
    """Locals assigned before the loop keep their adjoint across the reverse trips, and a custom gradient of a
    concrete ``@wp.func`` replaces its adjoint: restored from records, p = x^3 gets d(p^2)/dx = 6 x^5 = 192."""
    trips = wp.array([1.0, 2.0, 4.0, 8.0], dtype=wp.float64, device="cpu")
    np.testing.assert_allclose(gradient(restored_product, [2.0, 0.0, 0.0, 0.0], count(3), trips), [192.0, 0, 0, 0])


def test_a_sum_carried_out_of_a_loop_and_used_linearly_gets_its_gradient():
    """A local assigned before the loop keeps its adjoint across the reverse trips, and a sum passes it on unchanged
    from trip to trip: each trip's term gets it, whatever value the replay gives the sum (0 here). So a sum used
    only linearly after the loop needs no record (``passes.loop_hazards``): y0 = a, y1 = -2 sum x + x0 and
    y2 = 3 (2 (x1 + x2) - sum x^2) give [2 - 2 + 1 - 3 * 2, 4 - 2 + 3 * (2 - 4), 6 - 2 + 3 * (2 - 6), 0]."""
    scale = wp.float64(3.0)
    np.testing.assert_allclose(gradient(sums_used_linearly, X, count(3), scale), [-5.0, -4.0, -8.0, 0.0])


def test_a_store_runs_once_and_backward_does_not_store_again():
    """Warp's replay skips ``array_store``: a value its backward sees wrong and stores only into an int array changes
    nothing, neither memory nor any gradient (``passes.loop_hazards`` leaves such a loop out)."""
    found = wp.zeros(1, dtype=wp.int32, device="cpu")
    np.testing.assert_allclose(gradient(count_then_square, X, count(4), found), [2.0, 0.0, 0.0, 0.0])
    assert found.numpy()[0] == 3


def loops_of(kernel: wp.Kernel) -> list[ast.For | ast.While]:
    """The kernel's loops, with the range bounds the API reads as int constants written out (``constant_ranges``)."""
    function = ast.parse(textwrap.dedent(inspect.getsource(kernel.func))).body[0]
    assert isinstance(function, ast.FunctionDef)

    def value_of(name: str) -> int | None:
        value = kernel.func.__globals__.get(name)
        return value if type(value) is int else None

    function = known_bounds(function, value_of, "wp", "wp_rewrite_runtime") or function
    return [node for node in ast.walk(function) if isinstance(node, ast.For | ast.While)]


@pytest.mark.parametrize(
    "kernel",
    [
        sum_of_17,
        sum_over_an_expression,
        sum_that_breaks,
        while_loop,
        product_over_a_static_17,
        product_over_a_static_name_17,
    ],
)
def test_loops_warp_does_not_unroll_are_those_the_rewrite_counts_as_such(kernel):
    """``passes.loop_hazards.unrolled_by_warp`` agrees with Warp on the loops above it calls loops."""
    loops = loops_of(kernel)
    assert loops and not any(unrolled_by_warp(loop, 16) for loop in loops)


@pytest.mark.parametrize(
    "kernel", [sum_of_16, product_with_a_later_static_17, sum_over_a_name, sum_over_a_static_expression]
)
def test_loops_warp_unrolls_are_those_the_rewrite_counts_as_unrolled(kernel):
    """The other way round: the loops above Warp unrolls, ``unrolled_by_warp`` counts as unrolled (the planner then
    restores nothing they carry)."""
    loops = loops_of(kernel)
    assert loops and all(unrolled_by_warp(loop, 16) for loop in loops)
