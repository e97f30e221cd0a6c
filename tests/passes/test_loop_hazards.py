"""passes/loop_hazards.py: the loops Warp's backward replays wrong, and the rewrite that replays them from records
(issue 34). Each form gets the gradient of the original forward (finite differences) through the API and the
command line, with and without a consumed atomic; plain Warp gets every one of them wrong."""

from __future__ import annotations

import ast
import textwrap

import numpy as np
import pytest
import warp as wp

from tests.support import loops
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import Case, check, f64, finite_difference_gradients, i32, vec3d
from warp_rewrite import rewrite_launches
from warp_rewrite.passes.loop_carried import LoopFlow
from warp_rewrite.passes.loop_hazards import Hazard, loop_hazards

N = 4
X = [0.31, 0.17, 0.26, 0.12]
COUNTS = [3, 0, 5, 2]


def zeros(n=N):
    return wp.zeros(n, dtype=wp.float64, requires_grad=True, device="cpu")


KERNELS = {
    "squared_sum": Pattern(lambda: [f64(X, True), i32(COUNTS), i32([0]), zeros()], [3], [0]),
    "squared_sum_alone": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "neighbour_energy": Pattern(lambda: [f64(X, True), i32([1, 0, 2, 3]), i32(COUNTS), zeros()], [3], [0]),
    "substeps": Pattern(lambda: [f64([0.5, -0.3, 0.8, 0.2], True), f64(X, True), i32(COUNTS), zeros()], [3], [0, 1]),
    "halvings": Pattern(lambda: [f64([5.3, 12.4, 0.5, 31.0], True), f64([1.07], True), zeros()], [2], [0, 1]),
    "long_constant_range": Pattern(lambda: [f64(X, True), zeros()], [1], [0]),
    "argmax_of_grid": Pattern(lambda: [f64(X, True), i32([0]), zeros()], [2], [0]),
    "windows": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "nested": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "vector_sum": Pattern(
        lambda: [vec3d(np.arange(12.0).reshape(4, 3) * 0.1 + 0.05, True), i32(COUNTS), i32([0]), zeros()], [3], [0]
    ),
    "probe_while_true": Pattern(lambda: [f64(X, True), zeros()], [1], [0]),
    "gathered_sum": Pattern(lambda: [i32([0]), f64(X, True), zeros()], [2], [1]),
    "component_sums": Pattern(lambda: [i32([0]), f64(X, True), i32(COUNTS), zeros()], [3], [1]),
    "named_components": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "named_bound": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
}
emitted = emitted_fixture(loops)
test_through_the_api, test_through_the_command_line = end_to_end_tests(loops, N, KERNELS)


@pytest.mark.parametrize("name", ["squared_sum_alone", "substeps", "halvings", "windows", "argmax_of_grid"])
def test_plain_warp_is_wrong_on_these(name):
    """What the rewrite fixes: plain Warp's tape gives another gradient than finite differences of its forward."""
    pattern = KERNELS[name]
    case = Case(getattr(loops, name), N, pattern.make, pattern.loss, pattern.wrt)
    args = case.make_args()
    with wp.Tape() as tape:
        wp.launch(case.kernel, N, inputs=args, device="cpu")
    tape.backward(grads={args[i]: wp.array(case.weight(i, args[i]), dtype=args[i].dtype) for i in case.loss_outputs})
    expected = finite_difference_gradients(case)
    assert any(not np.allclose(args[i].grad.numpy(), expected[i], rtol=1e-5) for i in case.wrt)


def hazards_of(source: str, max_unroll: int = 16) -> list[tuple[str, set[str], tuple[str, ...]]]:
    function = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(function, ast.FunctionDef)
    found = loop_hazards(function, LoopFlow(function, lambda name: False), max_unroll)
    return [(ast.unparse(h.loop).splitlines()[0], {hazard.name for hazard in h.hazards}, h.carried) for h in found]


def test_which_loops_warp_replays_wrong():
    assert hazards_of("""
        def k(x, n, out):
            acc = float(0.0)
            for j in range(n[0]):       # dynamic, carries acc out
                acc += x[j]
            for j in range(4):          # unrolled: straight code to Warp's backward
                acc += x[j]
            for j in range(n[0]):       # dynamic, carries nothing
                out[j] = x[j] * 2.0
            for j in range(20):         # longer than max_unroll, carries acc
                acc = acc * x[j]
            out[0] = acc
    """) == [("for j in range(n[0]):", {"CARRIED"}, ("acc",)), ("for j in range(20):", {"CARRIED"}, ("acc",))]


def test_while_loops_and_jumps():
    assert hazards_of("""
        def k(x, out):
            k = int(0)
            while x[k] > 0.0:           # while: its condition is evaluated again in backward
                out[k] = x[k] * 2.0
                k += 1
            for j in range(8):          # unrolled, but it breaks: a loop to Warp
                if x[j] < 0.0:
                    break
                out[j] = x[j]
            while x[0] > 1.0:           # a spin: nothing to replay
                pass
    """) == [
        ("while x[k] > 0.0:", {"CARRIED", "WHILE"}, ("k",)),
        ("for j in range(8):", {"JUMPS"}, ()),
    ]


def test_a_constant_range_within_max_unroll_is_unrolled():
    source = """
        def k(x, out):
            acc = float(0.0)
            for j in range(8):
                acc = acc * x[j]
            out[0] = acc
    """
    assert hazards_of(source) == []
    assert hazards_of(source, max_unroll=4) == [("for j in range(8):", {"CARRIED"}, ("acc",))]


def test_hazard_reasons_say_why():
    assert "evaluates again" in Hazard.WHILE.value and "jumping past" in Hazard.JUMPS.value


def test_rewrite_launches_rewrites_a_kernel_whose_only_hazard_is_a_loop():
    """Code one cannot edit: under ``rewrite_launches()``, ``wp.launch`` of a kernel with no atomic whose loop Warp
    replays wrong, on a tape, gets the gradient of the original forward; off again, plain Warp's (0) comes back."""
    pattern = KERNELS["substeps"]

    def program(args, launcher):
        wp.launch(loops.substeps, N, inputs=args, device="cpu")

    rewrite_launches()
    try:
        check(Case(None, N, pattern.make, pattern.loss, pattern.wrt, program=program))
    finally:
        rewrite_launches(False)
    args = pattern.make()
    with wp.Tape() as tape:
        wp.launch(loops.substeps, N, inputs=args, device="cpu")
    assert tape.launches[0][0] is loops.substeps  # the original kernel, as before
