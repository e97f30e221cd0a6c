"""passes/launch_trips.py: the loops whose range a launch's arguments give, as source and the bounds read off it;
then kernels with such loops (``tests/support/argument_trips.py``) end to end: no count kernel, no dry run, records
sized from each launch's own arguments, gradients against finite differences through the API and the command line."""

import ast
import textwrap

import numpy as np
import pytest
import warp as wp

from tests.support import argument_trips
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import Case, f64, finite_difference_gradients
from warp_rewrite import wp_rewrite
from warp_rewrite.passes.launch_trips import ArgumentBound, argument_range
from warp_rewrite.passes.syntax import walk

N = 3
X = [0.31, 0.47, 0.26]
C = [0.7, -0.4, 0.9, 0.35, -0.2]


def bounds_of(source: str) -> tuple | None:
    """The bounds ``argument_range`` reads off the first ``for`` loop of the kernel ``source`` whose target is ``i``."""
    kernel = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(kernel, ast.FunctionDef)
    loop = next(n for n in walk(kernel) if isinstance(n, ast.For) and ast.unparse(n.target) == "i")
    return argument_range(kernel, loop)


@pytest.mark.parametrize(
    ("source", "bounds"),
    [
        ("def k(n: int):\n    for i in range(n):\n        pass", (ArgumentBound("n"),)),
        ("def k(a: wp.array2d[float]):\n    for i in range(a.shape[1]):\n        pass", (ArgumentBound("a", 1),)),
        (
            "def k(a: wp.array[float]):\n    m = a.shape[0]\n    for i in range(1, m):\n        pass",
            (1, ArgumentBound("a", 0)),
        ),
        ("def k(n: int):\n    for i in range(-1, n, 3):\n        pass", (-1, ArgumentBound("n"), 3)),
        (  # nested: each execution of the inner loop runs its whole range, however often the outer one runs it
            "def k(n: int, a: wp.array[float]):\n    for j in range(n):\n        for i in range(a.shape[0]):\n"
            "            pass\n        if a[j] > 0.0:\n            break\n",
            (ArgumentBound("a", 0),),
        ),
    ],
)
def test_bounds_the_launch_gives(source, bounds):
    assert bounds_of(source) == bounds


@pytest.mark.parametrize(
    "source",
    [
        # left early: its range may be much longer than its trips (a probe over a table's capacity)
        "def k(n: int, a: wp.array[float]):\n    for i in range(n):\n        if a[i] > 0.0:\n            break",
        "def k(n: int, a: wp.array[float]):\n    for i in range(n):\n        if a[i] > 0.0:\n            return",
        # a bound the kernel computes: from memory, from the thread, from arithmetic, or assigned more than once
        "def k(n: wp.array[int]):\n    for i in range(n[0]):\n        pass",
        "def k(n: int):\n    t = wp.tid()\n    for i in range(t):\n        pass",
        "def k(n: int):\n    for i in range(n - 1):\n        pass",
        "def k(n: int):\n    m = n\n    m = 2\n    for i in range(m):\n        pass",
        "def k(n: int):\n    n = n + 1\n    for i in range(n):\n        pass",
        "def k(n: int):\n    for i in range(m):\n        pass\n    m = n",  # (assigned after the loop)
        "def k(n: int, a: wp.array[float]):\n    if n > 2:\n        m = n\n    for i in range(m):\n        pass",
        # a step the launch gives may be zero
        "def k(n: int, s: int):\n    for i in range(0, n, s):\n        pass",
        # a global: not the launch's (and a constant range is unrolled or counted statically already)
        "def k(a: wp.array[float]):\n    for i in range(COUNT):\n        pass",
    ],
)
def test_bounds_the_launch_does_not_give(source):
    assert bounds_of(source) is None


def test_a_loop_of_a_helper_is_not_the_kernels():
    kernel = ast.parse("def k(n: int):\n    pass").body[0]
    helper = ast.parse("def h(n: int):\n    for i in range(n):\n        pass").body[0]
    assert isinstance(kernel, ast.FunctionDef) and isinstance(helper, ast.FunctionDef)
    loop = next(n for n in walk(helper) if isinstance(n, ast.For))
    assert argument_range(kernel, loop) is None


KERNELS = {
    "powers_to_parameter": Pattern(lambda: [f64(X, True), 4, f64([0.0] * N, True)], [2], [0]),
    "horner_over_shape": Pattern(lambda: [f64(X, True), f64(C, True), f64([0.0] * N, True)], [2], [0, 1]),
    "from_one_to_local": Pattern(lambda: [f64(X, True), f64(C, True), f64([0.0] * N, True)], [2], [0, 1]),
    "every_other": Pattern(lambda: [f64(X, True), f64(C, True), 5, f64([0.0] * N, True)], [3], [0, 1]),
    "nested_steps": Pattern(lambda: [f64(X, True), f64(C[:3], True), 2, f64([0.0] * N, True)], [3], [0, 1]),
    "until_large": Pattern(lambda: [f64([0.31, 0.9, 0.05], True), 6, f64([0.0] * N, True)], [2], [0]),
}
emitted = emitted_fixture(argument_trips)
test_through_the_api, test_through_the_command_line = end_to_end_tests(argument_trips, N, KERNELS)


@pytest.mark.parametrize("name", sorted(set(KERNELS) - {"until_large"}))
def test_a_kernel_whose_loops_the_launch_gives_has_no_count_kernel(name):
    pair = wp_rewrite(getattr(argument_trips, name)).pair
    assert pair is not None and pair.count is None
    assert all(loop.argument_range for loop in pair.spec.loops if loop.counted)


def test_a_loop_left_early_is_still_counted_by_a_dry_run():
    pair = wp_rewrite(argument_trips.until_large).pair
    assert pair is not None and pair.count is not None and pair.spec.loops[0].argument_range == ()


def test_each_launch_sizes_the_records_from_its_own_arguments():
    """A launch with the arrays of an earlier one reuses the launch prepared for it (``PreparedLaunch``, CPU), with
    the earlier one's records: not where this launch's arguments give its loop more trips than the earlier one's."""
    case = Case(argument_trips.powers_to_parameter, N, lambda: [f64(X, True), 7, f64([0.0] * N, True)], [2], [0])
    expected = finite_difference_gradients(case)[0]
    x, n, out = case.make_args()
    rewritten = wp_rewrite(argument_trips.powers_to_parameter)
    with wp.Tape():
        rewritten.launch(N, inputs=[x, 2, out], device="cpu")  # prepared for these arrays, with room for 2 trips
    tape = wp.Tape()
    with tape:
        rewritten.launch(N, inputs=[x, n, out], device="cpu")
    tape.backward(grads={out: wp.array(case.weight(2, out), dtype=wp.float64, device="cpu")})
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5)


def test_a_launch_with_no_trips_allocates_no_room():
    x, out = f64(X, True), f64([0.0] * N, True)
    tape = wp.Tape()
    with tape:
        wp_rewrite(argument_trips.powers_to_parameter).launch(N, inputs=[x, -2, out], device="cpu")
    tape.backward(grads={out: wp.ones(N, dtype=wp.float64, device="cpu")})
    assert list(x.grad.numpy()) == pytest.approx([2 * v for v in X])
