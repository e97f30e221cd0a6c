"""Later CPU launches with the same arrays take a prepared launch (``rewrite.launching.PreparedLaunch``).

Every gradient test already repeats its program on the same arrays (``tests/support/harness.py``). These cover what
a repeat alone does not: several launches on one tape, values other than arrays that change, a gradient
switched on, a loop that outgrows its records, loops whose rooms a dry run counts, a module Warp rebuilds, and what
the prepared launches keep.
"""

import numpy as np
import pytest
import warp as wp

from tests.support.harness import Case, check, f64, i32
from tests.support.patterns import (
    compact_positive,
    compact_with_capacity,
    emit_particles,
    scale_by_previous,
    write_pairs,
)
from warp_rewrite import RewriteError, launch, wp_rewrite

N = 8
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1, 2.3, -2.1])


def records_of(tape: wp.Tape) -> list[wp.array]:
    """The record arrays the tape's last launch holds: int32 arrays of one element per thread."""
    return [a for a in tape.launches[-1][4] if isinstance(a, wp.array) and a.dtype == wp.int32 and a.size == N]


def test_launches_on_one_tape_keep_their_own_records():
    def program(args, launcher):
        for _ in range(3):  # the second and third find the records before them still on the tape
            launcher(compact_positive, N, args)

    check(Case(None, N, lambda: [f64(X, True), i32([0]), f64(np.zeros(3 * N), True)], [2], [0], program=program))


def test_records_are_written_again_once_no_tape_holds_them():
    x, count, out = f64(X, True), i32([0]), f64(np.zeros(N), True)

    def forward() -> wp.Tape:
        count.zero_()
        with wp.Tape() as tape:
            launch(wp_rewrite(compact_positive), N, inputs=[x, count, out], device="cpu")
        return tape

    first, second = forward(), forward()
    assert records_of(second)[0] is not records_of(first)[0]  # the first tape still holds its records
    kept = id(records_of(second)[0])  # an id, not a reference: the test must not hold them
    del first, second
    assert id(records_of(forward())[0]) == kept  # only the prepared launch held them: written again in place


def test_a_value_that_changes_between_launches_is_passed_anew():
    def program(args, launcher):
        x, count, out = args
        for capacity in (2, 12):  # the second launch takes slots 8 to 15 and stores those below its capacity
            launcher(compact_with_capacity, N, [x, count, capacity, out])

    check(Case(None, N, lambda: [f64(X, True), i32([0]), f64(np.zeros(2 * N), True)], [2], [0], program=program))


def test_a_gradient_switched_on_between_launches_is_followed():
    x = wp.array([3.0], dtype=float, requires_grad=True, device="cpu")
    total = wp.array([10.0], dtype=float, device="cpu")
    y = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
    gradients = []
    for total_requires_grad in (False, True):
        total.assign([10.0])
        total.requires_grad = total_requires_grad  # a new gradient array: a new launch signature
        x.grad.zero_()
        with wp.Tape() as tape:
            launch(wp_rewrite(scale_by_previous), 1, inputs=[x, total, y], device="cpu")
        tape.backward(grads={y: wp.ones(1, dtype=float, device="cpu")})
        gradients.append((x.grad.numpy()[0], None if total.grad is None else total.grad.numpy()[0]))
    # y = previous * x with previous = total's initial value: dy/dx = 10, dy/dtotal = x = 3 (exact float return)
    assert gradients == [(10.0, None), (10.0, 3.0)]


def test_a_loop_that_outgrows_its_records_is_refused_on_a_prepared_launch():
    rewritten = wp_rewrite(emit_particles, max_records=2)
    counts, origin, next_free = i32([2, 0, 1, 2]), f64([0.5, 1.5, -0.5, 2.5], True), i32([0])
    positions = f64(np.zeros(16), True)
    with wp.Tape():
        launch(rewritten, 4, inputs=[counts, origin, next_free, positions], device="cpu")
    counts.assign(np.array([2, 3, 1, 0], dtype=np.int32))  # the same array, so the same prepared launch
    with pytest.raises(RewriteError, match="ran 3 times in one execution but its records had room for 2"), wp.Tape():
        launch(rewritten, 4, inputs=[counts, origin, next_free, positions], device="cpu")
    counts.assign(np.array([2, 2, 1, 0], dtype=np.int32))  # fits again: the refused launch's count is forgotten
    next_free.zero_()
    with wp.Tape() as tape:
        launch(rewritten, 4, inputs=[counts, origin, next_free, positions], device="cpu")
    tape.backward(grads={positions: f64(np.ones(16))})
    assert next_free.numpy().tolist() == [5]
    # d/d origin of (origin^2 + 0.5 k origin) over k < counts: 2 origin counts + 0.5 (0 + 1 + ... + counts - 1)
    np.testing.assert_allclose(origin.grad.numpy(), [2 * 0.5 * 2 + 0.5, 2 * 1.5 * 2 + 0.5, 2 * -0.5, 0.0])


def test_a_counted_launch_is_prepared_for_the_rooms_its_dry_run_counted():
    """Without max_records a dry run counts the trips of each launch; a later launch with the same arrays whose
    dry run counts the same rooms takes the launch prepared for them, one with other rooms a launch of its own."""
    rewritten = wp_rewrite(emit_particles)
    counts, origin, next_free = i32([0, 0, 0, 0]), f64([0.5, 1.5, -0.5, 2.5], True), i32([0])
    positions = f64(np.zeros(16), True)
    for trips, prepared in (([2, 0, 1, 2], 1), ([1, 2, 2, 0], 1), ([2, 3, 1, 0], 2)):
        counts.assign(np.array(trips, dtype=np.int32))
        next_free.zero_()
        origin.grad.zero_()
        with wp.Tape() as tape:
            launch(rewritten, 4, inputs=[counts, origin, next_free, positions], device="cpu")
        tape.backward(grads={positions: f64(np.ones(16))})
        assert len(rewritten._launches) == prepared
        o, n = origin.numpy(), np.array(trips)
        np.testing.assert_allclose(origin.grad.numpy(), 2 * o * n + 0.5 * n * (n - 1) / 2)


@wp.kernel
def take_slot(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[wp.tid()] * wp.float64(2.0)


def test_a_module_warp_rebuilds_is_launched_as_rebuilt():
    rewritten = wp_rewrite(take_slot)
    x, count, out = f64(X, True), i32([0]), f64(np.zeros(N), True)
    with wp.Tape():
        launch(rewritten, N, inputs=[x, count, out], device="cpu")
    (prepared,) = rewritten._launches.values()
    module = rewritten.record_kernel.module
    wp.set_module_options({"max_unroll": module.options["max_unroll"] + 1}, module=module)  # a new module hash
    count.zero_()
    with wp.Tape() as tape:
        launch(rewritten, N, inputs=[x, count, out], device="cpu")
    (rebuilt,) = rewritten._launches.values()
    assert rebuilt is not prepared and rebuilt.command.module_exec is module.load("cpu", 1)
    tape.backward(grads={out: f64(np.ones(N))})
    np.testing.assert_array_equal(out.numpy(), 2.0 * X)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 2.0))


def test_prepared_launches_go_with_their_arrays_and_are_few():
    rewritten = wp_rewrite(compact_positive)
    for _ in range(3):
        with wp.Tape():
            launch(rewritten, N, inputs=[f64(X), i32([0]), f64(np.zeros(N))], device="cpu")
    assert len(rewritten._launches) == 1  # each launch dropped the one before: its arrays were gone
    kept = [[f64(X), i32([0]), f64(np.zeros(N))] for _ in range(10)]
    for args in kept:
        with wp.Tape():
            launch(rewritten, N, inputs=args, device="cpu")
    assert len(rewritten._launches) == 8


def test_struct_arguments_are_packed_at_every_launch():
    """A struct's fields can change without the struct changing: such launches are never prepared."""
    rewritten = wp_rewrite(write_pairs)
    writer = write_pairs.adj.args[1].type()
    writer.count, writer.value = i32([0]), f64(np.zeros(N), True)
    expected = (X * np.exp(X))[X > -1.0]
    for value in (f64(np.zeros(N), True), f64(np.zeros(N), True)):
        writer.count.zero_()
        writer.value = value  # the same struct, with a new array in it
        with wp.Tape():
            launch(rewritten, N, inputs=[f64(X), writer], device="cpu")
        np.testing.assert_allclose(value.numpy()[: expected.size], expected)
    assert rewritten._launches == {}


@wp.func
def claim_each(count: wp.array[wp.int32], trips: int, x: wp.float64) -> wp.float64:
    total = wp.float64(0.0)
    for _ in range(trips):
        total += x * wp.float64(wp.atomic_add(count, 0, 1) % 3 + 1)
    return total


@wp.kernel
def claims_in_kernel_and_helper(
    x: wp.array[wp.float64],
    own: wp.array[wp.int32],
    helpers: wp.array[wp.int32],
    count: wp.array[wp.int32],
    out: wp.array[wp.float64],
):
    i = wp.tid()
    acc = wp.float64(0.0)
    for _ in range(own[i]):
        acc += x[i] * wp.float64(wp.atomic_add(count, 0, 1) % 2 + 1)
    out[i] = acc * acc + claim_each(count, helpers[i], x[i])


def test_a_helpers_loop_reports_its_own_trips():
    """A clone takes its loops' numbers as parameters (one definition serves every kernel): the trips the dry run
    counts, and the loop a launch that outgrows its records names, are the helper's loop's, not the kernel's."""
    own, helpers = [1, 0, 1, 0, 2, 0, 1, 0], [4, 3, 0, 2, 1, 4, 0, 3]
    make = lambda: [f64(X, True), i32(own), i32(helpers), i32([0]), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(claims_in_kernel_and_helper, N, make, [4], [0]))
    rewritten = wp_rewrite(claims_in_kernel_and_helper, max_records=3)
    line = claim_each.func.__code__.co_firstlineno + 3  # (the first line is the decorator's)
    with pytest.raises(RewriteError, match=rf"test_launch.py:{line}:.*ran 4 times"), wp.Tape():
        launch(rewritten, N, inputs=make(), device="cpu")
