"""Coverage: consumed atomics in loops, while/CAS probe loops, helpers, structs, generic kernels, closures and
module options — each against finite differences of the original kernel's forward."""

from typing import Any

import numpy as np
import pytest
import warp as wp

from tests.support.harness import Case, check, f64, i32
from tests.support.patterns import (
    PairWriter,
    append_imported,
    compact_deterministic,
    compact_generic,
    contacts_per_pair,
    deposit_while_counting_down,
    drain_work_queue,
    emit_particles,
    fill_from_pool,
    generate_contacts,
    insert_keys,
    spend_budget,
    spend_budget_skipping,
    take_until_full,
    tally_under_a_lock,
    write_contact,
    write_pairs,
)
from tests.support.shared_helpers import Counter
from warp_rewrite import RewriteError, launch, wp_rewrite

N = 6
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1])


def zeros(n):
    return f64(np.zeros(n), True)


# --- 1. for loops -------------------------------------------------------------------------------------


COUNTS = [2, 0, 3, 1, 2, 1]


def test_loop_with_per_thread_bound_from_an_array():
    check(Case(emit_particles, N, lambda: [i32(COUNTS), f64(X, True), i32([0]), zeros(9)], [3], [1]))


def test_loop_with_constant_bound():
    check(Case(contacts_per_pair, N, lambda: [f64(X, True), i32([0]), zeros(3 * N)], [2], [0]))


@wp.kernel
def sample_rows(x: wp.array[wp.float64], rows: int, count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    for r in range(1, rows + 1):
        for c in range(tid % 3):
            slot = wp.atomic_add(count, 0, 1)
            out[slot] = x[tid] * wp.float64(r) + wp.float64(c) * x[tid] * x[tid]


def test_nested_loops_with_bounds_from_arguments():
    # sum over threads of rows * (tid % 3) = 2 * (0+1+2+0+1+2)
    check(Case(sample_rows, N, lambda: [f64(X, True), 2, i32([0]), zeros(12)], [3], [0]))


@wp.kernel
def emit_until_negative(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    for k in range(7, 0, -2):
        if k == 5:
            continue
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(k)
        if x[tid] * wp.float64(k) < wp.float64(-3.0):
            break


def test_loop_with_break_continue_and_negative_step():
    check(Case(emit_until_negative, N, lambda: [f64(X, True), i32([0]), zeros(3 * N)], [2], [0]))


# --- 2. while loops: a CAS probe loop (hash-table insert) ---------------------------------------------


KEYS = [3, 10, 17, 5, 24, 12]  # 3, 10, 17, 24 all hash to slot 0 of 7: long probe chains


def test_cas_probe_loop():
    check(Case(insert_keys, N, lambda: [i32(KEYS), f64(X, True), i32([-1] * 7), 7, zeros(7)], [4], [1]))


@wp.kernel
def insert_keys_with_break(
    keys: wp.array[wp.int32],
    weights: wp.array[wp.float64],
    table: wp.array[wp.int32],
    n: int,
    values: wp.array[wp.float64],
):
    tid = wp.tid()
    key = keys[tid]
    slot = (key * 7) % n
    while True:
        prev = wp.atomic_cas(table, slot, -1, key)
        if prev == -1:
            values[slot] = weights[tid] * wp.float64(slot + 1)
            break
        slot = (slot + 1) % n


def test_while_true_probe_loop_with_break():
    check(Case(insert_keys_with_break, N, lambda: [i32(KEYS), f64(X, True), i32([-1] * 7), 7, zeros(7)], [4], [1]))


@wp.kernel
def insert_probing_in_the_condition(
    keys: wp.array[wp.int32],
    weights: wp.array[wp.float64],
    table: wp.array[wp.int32],
    n: int,
    values: wp.array[wp.float64],
):
    tid = wp.tid()
    key = keys[tid]
    slot = (key * 7) % n
    while wp.atomic_cas(table, slot, -1, key) != -1:
        slot = (slot + 1) % n
    values[slot] = weights[tid] * wp.float64(3.0) + wp.float64(key)


def test_probe_loop_with_the_atomic_in_its_condition():
    check(
        Case(
            insert_probing_in_the_condition, N, lambda: [i32(KEYS), f64(X, True), i32([-1] * 7), 7, zeros(7)], [4], [1]
        )
    )


def test_probe_loop_keeps_only_the_final_slot():
    """Nothing differentiable happens in the probe: the replay skips it and restores the slot it found."""
    rewritten = wp_rewrite(insert_keys)
    assert [record.kind for record in rewritten.records] == ["carried"]
    assert not any(loop.counted for loop in rewritten.pair.spec.loops)  # so no dry run either


@wp.kernel
def take_per_trip(x: wp.array[wp.float64], trips: int, count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    for k in range(trips):
        slot = wp.atomic_add(count, 0, 1)
        if slot >= 7:
            return
        out[slot] = x[tid] * wp.float64(k + 1)
    out[7 + tid] = x[tid] * x[tid]


# An atomic (or a helper) in a while loop's condition, which the rewrite moves into the loop's body, and returns
# from loops: kernel -> its arguments (the last one is the output)
WHILE_CONDITIONS = {
    # budgets of 3, 2 and 4 units, one per trip: threads 0 to 2 take them all, nine slots in all
    spend_budget: lambda: [f64(X, True), i32([3, 2, 4]), i32([0]), zeros(9)],
    spend_budget_skipping: lambda: [f64(X, True), i32([3, 2, 4]), i32([0]), zeros(9)],
    fill_from_pool: lambda: [f64(X, True), i32([4]), i32([0]), zeros(4)],  # in a helper; two threads go without
    tally_under_a_lock: lambda: [f64(X, True), i32([0]), i32([0]), zeros(N)],
    deposit_while_counting_down: lambda: [f64(X, True), i32([7]), zeros(2)],  # every test deposits
    # a return from a loop, which the rewrite makes a flag and a break: seven slots, then threads return
    take_until_full: lambda: [f64(X, True), i32([0]), zeros(7 + N)],
    take_per_trip: lambda: [f64(X, True), 3, i32([0]), zeros(7 + N)],
    # from helpers returning (found, item) and a bool: five items for six threads, three buckets marked once
    drain_work_queue: lambda: [f64(X, True), i32([3, 0, 4, 1, 2]), i32([0]), i32([0, 0, 0]), zeros(8)],
}


@pytest.mark.parametrize("kernel", WHILE_CONDITIONS, ids=lambda kernel: kernel.key)
def test_atomic_in_a_while_condition(kernel):
    output = len(kernel.adj.args) - 1
    check(Case(kernel, N, WHILE_CONDITIONS[kernel], [output], [0]))


# --- 3. record capacity ---------------------------------------------------------------------------------


def test_explicit_max_records_is_compiled_in_and_matches():
    """The room is a constant of both kernels (no dry run, no capacity argument); both take the launch's status
    last; forward and gradients are those of the original."""
    rewritten = wp_rewrite(emit_particles, max_records=3)
    assert rewritten is wp_rewrite(emit_particles, max_records=3)
    assert "coordinate0 = tid * 3 + wp.int32(k)" in rewritten.source
    assert rewritten.record_kernel.module.name.endswith(".max_records3")
    record_params = [arg.label for arg in rewritten.record_kernel.adj.args]
    replay_params = [arg.label for arg in rewritten.replay_kernel.adj.args]
    assert record_params[-1] == "status" and replay_params == record_params
    assert rewritten.record_kernel is not wp_rewrite(emit_particles, max_records=4).record_kernel
    check(Case(emit_particles, N, lambda: [i32(COUNTS), f64(X, True), i32([0]), zeros(9)], [3], [1], max_records=3))


def test_without_a_loop_of_unknown_length_every_max_records_shares_the_kernels():
    """Nothing to compile max_records into: no new kernels, so no new module to compile."""
    assert wp_rewrite(insert_keys, max_records=5).record_kernel is wp_rewrite(insert_keys).record_kernel


def test_too_small_max_records_raises_right_after_the_launch():
    args = [i32(COUNTS), f64(X, True), i32([0]), zeros(9)]
    with (
        pytest.raises(
            RewriteError, match=r"this loop ran 3 times in one execution but its records had room for 2.*max_records=3"
        ),
        wp.Tape(),
    ):
        launch(wp_rewrite(emit_particles, max_records=2), N, inputs=args, device="cpu")


# --- 4. helpers ----------------------------------------------------------------------------------------


def test_helper_with_early_return_called_from_two_sites():
    check(Case(generate_contacts, N, lambda: [f64(X, True), i32([0]), 7, zeros(7), zeros(7)], [3, 4], [0]))


@wp.kernel
def contacts_in_a_loop(
    x: wp.array[wp.float64], count: wp.array[wp.int32], capacity: int, contacts: wp.array[wp.float64]
):
    tid = wp.tid()
    for k in range(tid % 3):
        write_contact(count, capacity, contacts, x[tid] * wp.float64(k + 1))


def test_helper_in_a_loop_and_from_a_second_kernel():
    check(Case(contacts_in_a_loop, N, lambda: [f64(X, True), i32([0]), 5, zeros(5)], [3], [0]))


def test_imported_helpers_two_calls_deep():
    check(Case(append_imported, N, lambda: [f64(X, True), i32([0]), zeros(2 * N)], [2], [0]))


@wp.func
def deposit(count: wp.array[wp.int32], mass: wp.array[wp.float64], out: wp.array[wp.float64], value: wp.float64):
    """A slot plus a float accumulation: the replay keeps the accumulation's adjoint but must never re-run it."""
    slot = wp.atomic_add(count, 0, 1)
    wp.atomic_add(mass, slot % 2, value * value)
    out[slot] = value


@wp.kernel
def deposit_all(
    x: wp.array[wp.float64], count: wp.array[wp.int32], mass: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    deposit(count, mass, out, x[tid] * wp.float64(2.0))


def test_helper_with_a_float_accumulation_keeps_its_adjoint_without_rerunning_it():
    check(Case(deposit_all, N, lambda: [f64(X, True), i32([0]), f64([0.5, 0.0], True), zeros(N)], [2, 3], [0]))
    assert ".replays(deposit_replay)\n@wp.func\ndef deposit_replay_forward(" in wp_rewrite(deposit_all).source


# --- 5. structs ----------------------------------------------------------------------------------------


def pairs_program(args, launcher):
    writer = PairWriter()
    writer.count, writer.value = args[1], args[2]
    launcher(write_pairs, N, [args[0], writer])


def test_struct_fields_as_target_and_output():
    check(Case(None, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0], program=pairs_program))


@wp.kernel
def compact_through_imported_struct(x: wp.array[wp.float64], counter: Counter, out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(counter.count, 0, 1)
    out[slot] = x[tid] * x[tid] * counter.scale


def imported_struct_program(args, launcher):
    counter = Counter()
    counter.count, counter.scale = args[1], wp.float64(1.5)
    launcher(compact_through_imported_struct, N, [args[0], counter, args[2]])


def test_struct_from_an_imported_module():
    check(Case(None, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0], program=imported_struct_program))


# --- 6. generic kernels and overloads ------------------------------------------------------------------


def test_generic_kernel_with_several_dtypes():
    check(Case(compact_generic, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]))
    v = X.repeat(2).reshape(N, 2)
    vec2d = lambda values, grad=False: wp.array(values, dtype=wp.vec2d, requires_grad=grad, device="cpu")  # noqa: E731
    check(Case(compact_generic, N, lambda: [vec2d(v, True), i32([0]), vec2d(np.zeros((N, 2)), True)], [2], [0]))


@wp.kernel
def compact_overloaded(x: wp.array(dtype=Any), count: wp.array[wp.int32], out: wp.array(dtype=Any)):
    tid = wp.tid()
    out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid]


wp.overload(compact_overloaded, {"x": wp.array(dtype=wp.float64), "out": wp.array(dtype=wp.float64)})


def test_explicit_overload():
    check(Case(compact_overloaded, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]))


# --- 7. factories, closures and constants --------------------------------------------------------------

OFFSET = wp.constant(wp.float64(0.25))


def make_scaled_compaction(scale: float):
    scale64 = wp.float64(scale)

    @wp.kernel
    def scaled_compaction(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
        tid = wp.tid()
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid] * scale64 + OFFSET

    return scaled_compaction


SCALED_BY_2, SCALED_BY_5 = make_scaled_compaction(2.0), make_scaled_compaction(5.0)


def test_factory_kernels_with_the_same_name_keep_their_captured_values():
    for kernel in (SCALED_BY_2, SCALED_BY_5):
        check(Case(kernel, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]))
    assert wp_rewrite(SCALED_BY_2).record_kernel is not wp_rewrite(SCALED_BY_5).record_kernel


# --- 8. module options: deterministic mode -------------------------------------------------------------


def test_deterministic_module_rewrites_and_differentiates():
    rewritten = wp_rewrite(compact_deterministic)
    assert rewritten.record_kernel.module.options["deterministic"] == wp.DeterministicMode.RUN_TO_RUN
    check(Case(compact_deterministic, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]))


# Rewrite every kernel of this file up front: their generated module then compiles once.
for _kernel in [v for v in list(globals().values()) if isinstance(v, wp.Kernel)]:
    wp_rewrite(_kernel)
