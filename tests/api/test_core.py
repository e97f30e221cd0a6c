"""End-to-end tests of the core rewrite: the core patterns (tests/support/patterns.py), against finite differences.

All kernels are rewritten at import time so that their generated module compiles once.
"""

import numpy as np
import pytest
import warp as wp

from tests.support.harness import Case, assert_same_forward, check, f64, i32, run_rewritten, vec3d
from tests.support.patterns import (
    accumulate_input,
    bucket_by_arrival,
    chain_of_owners,
    claim_lock,
    clear_bits,
    compact_positive,
    compact_rows,
    compact_with_capacity,
    count_in_4d,
    plain_accumulate,
    project_on_running_sum,
    reserve_then_take,
    scale_by_peak,
    scale_by_previous,
    scale_by_running_max,
    scale_by_running_min,
    set_bits,
    take_from_stack,
    toggle_bits,
)
from warp_rewrite import RewriteError, launch, wp_rewrite

N = 8
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1, 2.3, -2.1])


# --- the reported kernel ----------------------------------------------------------------------------


def test_reported_example_prints_the_right_gradient():
    x = wp.array([3.0], dtype=float, requires_grad=True)
    total = wp.array([10.0], dtype=float)
    y = wp.array([0.0], dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        launch(wp_rewrite(scale_by_previous), dim=1, inputs=[x, total, y])
    tape.backward(grads={y: wp.array([1.0], dtype=float)})
    assert y.numpy().tolist() == [30.0]
    assert x.grad.numpy().tolist() == [10.0]
    assert total.numpy().tolist() == [11.0]


# --- stream compaction: slots used as indices -------------------------------------------------------


def test_compaction_under_if():
    check(Case(compact_positive, N, lambda: [f64(X, True), i32([0]), f64(np.zeros(N), True)], [2], [0]))


def test_capacity_guard():
    check(Case(compact_with_capacity, N, lambda: [f64(X, True), i32([0]), 5, f64(np.zeros(5), True)], [3], [0]))


# --- all nine atomics, consumed, int targets ---------------------------------------------------------


KEYS = np.array([5, 3, 7, 2, 9, 1, 4, 6])
INT_OP_CASES = {
    "sub": (take_from_stack, lambda: [f64(X, True), i32([N]), f64(np.zeros(N), True)], 2),
    "min": (scale_by_running_min, lambda: [f64(X, True), i32(KEYS), i32([8]), f64(np.zeros(N), True)], 3),
    "max": (scale_by_running_max, lambda: [f64(X, True), i32(KEYS), i32([0]), f64(np.zeros(N), True)], 3),
    "cas": (claim_lock, lambda: [f64(X, True), i32([0, 0, 0]), f64(np.zeros(N), True)], 2),
    "exch": (chain_of_owners, lambda: [f64(X, True), i32([-1]), f64(np.zeros(N + 1), True)], 2),
    "and": (clear_bits, lambda: [f64(X, True), i32([255]), f64(np.zeros(N), True)], 2),
    "or": (set_bits, lambda: [f64(X, True), i32([0]), f64(np.zeros(N), True)], 2),
    "xor": (toggle_bits, lambda: [f64(X, True), i32([6]), f64(np.zeros(N), True)], 2),
}


@pytest.mark.parametrize("op", list(INT_OP_CASES))
def test_consumed_int_atomic(op):
    kernel, make_args, out = INT_OP_CASES[op]
    check(Case(kernel, N, make_args, [out], [0]))


# --- float returns whose values carry no gradient ----------------------------------------------------


@wp.kernel
def scale_by_budget_left(x: wp.array[wp.float64], budget: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    left = wp.atomic_sub(budget, 0, wp.float64(0.5))
    out[tid] = left * x[tid]


@wp.kernel
def swap_in_time(x: wp.array[wp.float64], stamp: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    previous = wp.atomic_exch(stamp, 0, wp.float64(tid) * wp.float64(0.25))
    out[tid] = previous * x[tid]


def test_float_sub_return_with_constant_values():
    check(Case(scale_by_budget_left, N, lambda: [f64(X, True), f64([10.0]), f64(np.zeros(N), True)], [2], [0]))


def test_float_min_max_returns_with_constant_values():
    check(Case(scale_by_peak, N, lambda: [f64(X, True), f64([1.5, 1.5]), f64(np.zeros(N), True)], [2], [0]))


def test_float_exch_return_with_constant_values():
    check(Case(swap_in_time, N, lambda: [f64(X, True), f64([-1.0]), f64(np.zeros(N), True)], [2], [0]))


def test_vec3d_return():
    v = np.linspace(-1.0, 1.0, 3 * N).reshape(N, 3)
    check(
        Case(
            project_on_running_sum,
            N,
            lambda: [vec3d(v, True), vec3d([[0.5, 0.0, -0.5]]), f64(np.zeros(N), True)],
            [2],
            [0],
        )
    )


def test_float_return_of_values_without_grad_is_exact():
    check(Case(accumulate_input, N, lambda: [f64(X), f64(X * 2.0, True), f64([1.0]), f64(np.zeros(N), True)], [3], [1]))


def test_detached_float_return_of_values_that_require_grad_is_refused_before_launch():
    x, z, acc, out = f64(X, True), f64(X, True), f64([1.0]), f64(np.zeros(N), True)
    with (
        pytest.raises(
            RewriteError, match=r"patterns\.py:\d+:\d+: kernel 'accumulate_input'.*depends on 'x', which requires grad"
        ),
        wp.Tape(),
    ):
        launch(wp_rewrite(accumulate_input, detach_returns=True), N, inputs=[x, z, acc, out], device="cpu")
    assert acc.numpy().tolist() == [1.0]


def test_detached_float_return_of_target_that_requires_grad_is_refused():
    x, acc = f64(X), f64([1.0], True)
    with (
        pytest.raises(
            RewriteError,
            match=r"depends on 'acc', which requires grad; rewritten with detach_returns=True, the replay reads that "
            r"value back as a constant.*\. Rewrite without detach_returns=True",
        ),
        wp.Tape(),
    ):
        launch(
            wp_rewrite(accumulate_input, detach_returns=True),
            N,
            inputs=[x, f64(X), acc, f64(np.zeros(N))],
            device="cpu",
        )
    assert acc.numpy().tolist() == [1.0]


# --- index arguments: 2-D launches, 2-, 3- and 4-D counters ------------------------------------------


@wp.kernel
def count_in_3d(x: wp.array[wp.float64], counts: wp.array3d(dtype=wp.int32), out: wp.array[wp.float64]):
    tid = wp.tid()
    seen = wp.atomic_add(counts, tid % 2, 0, tid % 3, 1)
    out[tid] = x[tid] * wp.float64(seen + 1)


def test_two_d_launch_with_two_d_counter():
    x2 = np.array([[0.5, -1.0, 1.5, 2.0], [-0.3, 0.8, 1.2, -0.7], [0.9, 1.1, -1.4, 0.6]])

    def make():
        return [
            f64(x2, True),
            wp.zeros((3, 2), dtype=wp.int32, device="cpu"),
            wp.zeros((3, 2, 4), dtype=wp.float64, requires_grad=True, device="cpu"),
        ]

    check(Case(compact_rows, (3, 4), make, [2], [0]))


def test_three_index_counter():
    make = lambda: [f64(X, True), wp.zeros((2, 1, 3), dtype=wp.int32, device="cpu"), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(count_in_3d, N, make, [2], [0]))


def test_four_index_counter():
    make = lambda: [f64(X, True), wp.zeros((1, 2, 2, 1), dtype=wp.int32, device="cpu"), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(count_in_4d, N, make, [2], [0]))


# --- several consumed atomics; unconsumed ones on the same targets -----------------------------------


def test_index_from_another_atomics_return():
    def make():
        return [
            f64(X, True),
            i32([0]),
            i32([0, 0]),
            wp.zeros((2, N), dtype=wp.float64, requires_grad=True, device="cpu"),
        ]

    check(Case(bucket_by_arrival, N, make, [3], [0]))


def test_unconsumed_atomics_on_the_same_target():
    check(Case(reserve_then_take, N, lambda: [f64(X, True), i32([0]), f64(np.zeros(3 * N), True)], [2], [0]))


@wp.kernel
def compact_and_sum(
    x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64], total: wp.array[wp.float64]
):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * wp.float64(3.0)
    total[0] += x[tid] * x[tid]
    wp.atomic_add(total, 1, wp.sin(x[tid]))


def test_float_accumulation_next_to_consumed_counter_keeps_its_gradient():
    check(
        Case(
            compact_and_sum,
            N,
            lambda: [f64(X, True), i32([0]), f64(np.zeros(N), True), f64([0.0, 0.0], True)],
            [2, 3],
            [0],
        )
    )


@wp.kernel
def weight_by_arrival(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    arrival = wp.atomic_add(count, 0, 2) + 1
    if arrival > 6:
        out[tid] = x[tid] * wp.float64(arrival) * wp.float64(0.5)
    else:
        out[tid] = x[tid] * x[tid] - wp.float64(arrival)


def test_return_in_arithmetic_and_condition():
    check(Case(weight_by_arrival, N, lambda: [f64(X, True), i32([0]), f64(np.zeros(N), True)], [2], [0]))


# --- several launches on one tape: a simulation loop --------------------------------------------------


@wp.kernel
def integrate(state: wp.array[wp.float64], forces: wp.array[wp.float64], next_state: wp.array[wp.float64]):
    tid = wp.tid()
    next_state[tid] = state[tid] + wp.float64(0.1) * forces[tid] * state[tid]


def simulation(args, launcher):
    states, counts, forces = args[0:4], args[4:7], args[7:10]
    for step in range(3):
        launcher(compact_positive, N, [states[step], counts[step], forces[step]])
        launcher(integrate, N, [states[step], forces[step], states[step + 1]])


def test_simulation_loop_backpropagates_through_every_launch():
    def make():
        states = [f64(X, True)] + [f64(np.zeros(N), True) for _ in range(3)]
        return [*states, i32([0]), i32([0]), i32([0]), *(f64(np.zeros(N), True) for _ in range(3))]

    check(Case(None, N, make, [3], [0], program=simulation))


def test_tape_zero_and_reset():
    x, count, out = f64(X, True), i32([0]), f64(np.zeros(N), True)
    tape = wp.Tape()
    with tape:
        launch(wp_rewrite(compact_positive), N, inputs=[x, count, out], device="cpu")
    seed = {out: f64(np.ones(N))}
    tape.backward(grads=seed)
    first = x.grad.numpy().copy()
    tape.zero()
    assert not np.any(x.grad.numpy())
    tape.backward(grads=seed)
    np.testing.assert_array_equal(x.grad.numpy(), first)
    records = [a for a in tape.launches[0][4] if isinstance(a, wp.array) and a.dtype == wp.int32 and a.size == N]
    assert records, "the tape holds this launch's records"
    tape.reset()
    assert tape.launches == []


# --- kernels with nothing to rewrite; launches without a tape ----------------------------------------


def test_kernel_without_consumed_atomics_launches_unchanged():
    rewritten = wp_rewrite(plain_accumulate)
    assert rewritten.record_kernel is None and rewritten.replay_kernel is None
    check(Case(plain_accumulate, N, lambda: [f64(X, True), f64([0.0], True)], [1], [0]))


def test_launch_without_tape_equals_original():
    x, count, out = f64(X), i32([0]), f64(np.zeros(N))
    launch(wp_rewrite(compact_positive), N, inputs=[x, count, out], device="cpu")
    reference = [f64(X), i32([0]), f64(np.zeros(N))]
    wp.launch(compact_positive, N, inputs=reference, device="cpu")
    np.testing.assert_array_equal(out.numpy(), reference[2].numpy())
    assert count.numpy().tolist() == reference[1].numpy().tolist()


def test_forward_equal_for_every_array_of_a_multi_target_kernel():
    args = assert_same_forward(
        Case(
            bucket_by_arrival,
            N,
            lambda: [f64(X), i32([0]), i32([0, 0]), wp.zeros((2, N), dtype=wp.float64, device="cpu")],
            [3],
            [],
        )
    )
    assert args[1].numpy().tolist() == [N]


def test_rewritten_kernels_share_the_original_module_options():
    rewritten = wp_rewrite(compact_positive)
    assert rewritten.record_kernel.module.options["fast_math"] == compact_positive.module.options["fast_math"]
    assert rewritten.record_kernel.options["enable_backward"] is False
    assert "compact_positive_record" in rewritten.source and "compact_positive_replay" in rewritten.source


# --- the API's contract ------------------------------------------------------------------------------


@wp.func
def some_helper(a: float):
    return a


def plain_python(x):
    return x


@pytest.mark.parametrize("not_a_kernel", [plain_python, some_helper, "scale_by_previous"])
def test_wp_rewrite_expects_a_kernel(not_a_kernel):
    with pytest.raises(TypeError, match="expects a Warp kernel"):
        wp_rewrite(not_a_kernel)


def test_wp_rewrite_is_cached():
    assert wp_rewrite(compact_positive) is wp_rewrite(compact_positive)


def test_bad_launch_leaves_counters_untouched():
    count = i32([0])
    with pytest.raises(RuntimeError, match="passed 2 arguments but kernel requires 3"), wp.Tape():
        launch(wp_rewrite(compact_positive), N, inputs=[f64(X), count], device="cpu")
    with pytest.raises(Exception, match=r"type mismatch|dtype|expected"), wp.Tape():
        launch(wp_rewrite(compact_positive), N, inputs=[f64(X), count, i32(np.zeros(N))], device="cpu")
    assert count.numpy().tolist() == [0]


def test_records_are_per_launch():
    x, count, out = f64(X, True), i32([0]), f64(np.zeros(2 * N), True)
    _args, tape = run_rewritten(Case(compact_positive, N, lambda: [x, count, out], [2], [0]))
    with tape:
        launch(wp_rewrite(compact_positive), N, inputs=[x, count, out], device="cpu")
    first, second = (launch_[4][0] for launch_ in tape.launches)
    assert first is not second
    assert count.numpy().tolist() == [10]


# Rewrite every kernel of this file up front: their generated module then compiles once.
for _kernel in [v for v in list(globals().values()) if isinstance(v, wp.Kernel)]:
    wp_rewrite(_kernel)
