"""Sound replay: every value the replay reads equals what the forward read, or a RewriteError.

The replay kernel runs after the forward, against memory in its final state. Reads of arrays the launch writes
(in the kernel, in a helper, through a struct field) are recorded like atomics' returned values; reads through
another argument bound to the same memory are refused at launch; calls the rewrite cannot see into are
resolved (``wp.static``) or refused. Each pattern is checked end to end against finite differences of the
original kernel's forward (tests/support/harness.py), or for its refusal.
"""

import ast
import dataclasses

import numpy as np
import pytest
import warp as wp

from tests.support import count_slices, replay_twin_kernels
from tests.support.generated_names import forward_calls_in_replays
from tests.support.harness import Case, check, f64, i32
from tests.support.record_kernels import count_kernel_differences, dropped_reads
from tests.support.replay_twins import rerun_writes
from warp_rewrite import RewriteError, launch, pipeline, wp_rewrite

N = 8
X = np.linspace(0.3, 1.7, N)  # positive, far from every threshold below
DESCENDING = np.linspace(1.7, 0.3, N) + 0.013  # depths that pass every depth test in forward
PIXELS = [0, 1, 0, 1, 0, 1, 0, 1]


def outputs(n: int) -> wp.array:
    return f64(np.zeros(n), True)


# --- reads of arrays the launch writes ------------------------------------------------------------------------


@wp.kernel
def append_while_room(x: wp.array[wp.float64], count: wp.array[wp.int32], capacity: int, out: wp.array[wp.float64]):
    tid = wp.tid()
    if count[0] < capacity:  # the replay must see the count this thread saw, not the final one
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid] + wp.float64(1.0)


def test_capacity_check_before_the_counter_when_the_buffer_fills():
    check(Case(append_while_room, N, lambda: [f64(X, True), i32([0]), 5, outputs(5)], [3], [0]))


@wp.func
def has_room(count: wp.array[wp.int32], capacity: int) -> bool:
    return count[0] < capacity


@wp.kernel
def append_while_room_through_a_helper(
    x: wp.array[wp.float64], count: wp.array[wp.int32], capacity: int, out: wp.array[wp.float64]
):
    tid = wp.tid()
    if has_room(count, capacity):  # a helper that reads what the launch writes: cloned, its read recorded
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid] + wp.float64(1.0)


def test_capacity_check_in_a_helper():
    check(Case(append_while_room_through_a_helper, N, lambda: [f64(X, True), i32([0]), 5, outputs(5)], [3], [0]))


@wp.struct
class Buffer:
    count: wp.array[wp.int32]
    values: wp.array[wp.float64]


@wp.kernel
def append_to_buffer(x: wp.array[wp.float64], buffer: Buffer, capacity: int):
    tid = wp.tid()
    if buffer.count[0] < capacity:
        slot = wp.atomic_add(buffer.count, 0, 1)
        buffer.values[slot] = x[tid] * wp.float64(3.0)


def test_capacity_check_through_a_struct_field():
    def program(args, launcher):
        buffer = Buffer()
        buffer.count, buffer.values = args[1], args[2]
        launcher(append_to_buffer, N, [args[0], buffer, 5])

    check(Case(None, N, lambda: [f64(X, True), i32([0]), outputs(5)], [2], [0], program=program))


@wp.kernel
def depth_test(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], zbuf: wp.array[wp.int32], shade: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = wp.int32(x[tid] * wp.float64(100.0))
    p = pixel[tid]
    if depth < zbuf[p]:  # an early-out test against the target of the atomic below
        nearest = wp.atomic_min(zbuf, p, depth)
        shade[tid] = x[tid] * x[tid] * wp.float64(nearest % 7 + 1)


def test_early_out_test_against_the_target():
    check(Case(depth_test, N, lambda: [f64(DESCENDING, True), i32(PIXELS), i32([500, 500]), outputs(N)], [3], [0]))


@wp.kernel
def float_depth_test(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], zbuf: wp.array[wp.float64], shade: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    p = pixel[tid]
    seen = zbuf[p]
    if depth < seen:
        nearest = wp.atomic_min(zbuf, p, depth)
        shade[tid] = wp.float64(3.0) * depth + wp.float64(0.25) * nearest * seen


def test_float_depth_test_is_refused_where_its_gradient_would_be_wrong():
    """Exact returns: a plain read of the target used as a number is refused (one only compared is taken:
    tests/test_zbuffer.py). Detached: the read is a constant, whose gradient through the depths other threads
    wrote is refused at launch."""
    with pytest.raises(RewriteError, match=r"a plain read of 'zbuf', whose float atomic returns need exact"):
        wp_rewrite(float_depth_test)
    args = [f64(DESCENDING, True), i32(PIXELS), f64([50.0, 50.0]), outputs(N)]
    with pytest.raises(RewriteError, match=r"the value returned by wp.atomic_min\(\) on 'zbuf' is a float"), wp.Tape():
        launch(wp_rewrite(float_depth_test, detach_returns=True), N, inputs=args, device="cpu")
    assert args[2].numpy().tolist() == [50.0, 50.0]  # refused before anything ran


@wp.kernel
def components_in_place(
    x: wp.array[wp.float64], count: wp.array[wp.int32], marks: wp.array[wp.vec2i], out: wp.array[wp.float64]
):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    marks[slot % 2][0] = tid  # components written in place: nothing of marks is read
    marks[slot % 2][1] = slot + 1
    seen = marks[0][1] * 2 + marks[1][0]  # reads of components of what the launch writes, in an expression
    out[slot] = x[tid] * wp.float64(seen + 1)


def test_components_written_in_place_are_no_reads_and_components_read_are():
    make = lambda: [f64(X, True), i32([0]), wp.array([[3, 5], [7, 9]], dtype=wp.vec2i), outputs(N)]  # noqa: E731
    check(Case(components_in_place, N, make, [3], [0]))
    sites = wp_rewrite(components_in_place).pair.spec.sites
    assert [(site.target, site.op) for site in sites] == [("count", "add"), ("marks", "read"), ("marks", "read")]


@wp.kernel
def spin_lock_counter(
    x: wp.array[wp.float64], lock: wp.array[wp.int32], total: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    while wp.atomic_cas(lock, 0, 0, 1) != 0:
        pass
    seen = total[0]  # a read-modify-write under the lock
    total[0] = seen + tid % 3 + 1
    wp.atomic_exch(lock, 0, 0)
    out[tid] = x[tid] * wp.float64(seen + 1)


def test_read_modify_write_under_a_spin_lock():
    check(Case(spin_lock_counter, N, lambda: [f64(X, True), i32([0]), i32([0]), outputs(N)], [3], [0]))


@wp.kernel
def spin_lock_float(
    x: wp.array[wp.float64],
    keys: wp.array[wp.float64],
    lock: wp.array[wp.int32],
    total: wp.array[wp.float64],
    out: wp.array[wp.float64],
):
    tid = wp.tid()
    while wp.atomic_cas(lock, 0, 0, 1) != 0:
        pass
    seen = total[0]
    total[0] = seen + keys[tid]
    wp.atomic_exch(lock, 0, 0)
    out[tid] = x[tid] * seen


def test_float_read_modify_write_of_values_that_need_no_gradient():
    """What the other threads wrote does not depend on anything requiring grad: the read is a constant."""
    make = lambda: [f64(X, True), f64(X * 0.5), i32([0]), f64([0.25]), outputs(N)]  # noqa: E731
    check(Case(spin_lock_float, N, make, [4], [0]))


def test_float_read_modify_write_of_values_that_need_a_gradient_is_refused_at_launch():
    args = [f64(X, True), f64(X * 0.5, True), i32([0]), f64([0.25]), outputs(N)]
    refusal = r"this reads 'total', which the launch also writes, and the value read is a float that depends on 'keys'"
    with pytest.raises(RewriteError, match=refusal), wp.Tape():
        launch(wp_rewrite(spin_lock_float), N, inputs=args, device="cpu")
    assert args[3].numpy().tolist() == [0.25]


# --- aliasing ---------------------------------------------------------------------------------------------------


@wp.kernel
def append_checking_a_second_view(
    x: wp.array[wp.float64], count: wp.array[wp.int32], count_seen: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    if count_seen[0] < 5:
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(2.0)


def test_memory_the_kernel_writes_bound_to_two_arguments_is_refused_before_anything_runs():
    count, out = i32([0]), outputs(5)
    for alias in (count, count[0:1]):
        with (
            pytest.raises(
                RewriteError,
                match=r"arguments 'count' and 'count_seen' share memory and the kernel writes 'count'",
            ),
            wp.Tape(),
        ):
            launch(wp_rewrite(append_checking_a_second_view), N, inputs=[f64(X, True), count, alias, out], device="cpu")
        assert count.numpy().tolist() == [0]


def test_distinct_arrays_and_read_only_aliases_launch():
    check(Case(append_checking_a_second_view, N, lambda: [f64(X, True), i32([0]), i32([0]), outputs(N)], [3], [0]))
    shared = f64(X, True)
    with wp.Tape():  # the same array twice, but the kernel only reads it
        launch(wp_rewrite(scale_both), N, inputs=[shared, shared, i32([0]), outputs(N)], device="cpu")


@wp.kernel
def scale_both(a: wp.array[wp.float64], b: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = a[tid] * b[tid]


# --- dry runs ---------------------------------------------------------------------------------------------------


@wp.kernel
def emit_and_mark(
    x: wp.array[wp.float64],
    trips: wp.array[wp.int32],
    count: wp.array[wp.int32],
    out: wp.array[wp.float64],
    marks: wp.indexedarray(dtype=wp.float64),
):
    tid = wp.tid()
    marks[tid] = marks[tid] + wp.float64(1.0)
    first = wp.atomic_add(count, 1, trips[tid])  # the loop's bounds read both arrays the launch writes
    for k in range(first, first + trips[tid] * wp.int32(marks[tid])):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(k - first + 1)


def test_the_dry_run_never_writes_user_memory():
    """A loop of unknown length is counted by a dry run on copies of what the kernel writes: an indexed array too."""
    trips = [1, 2, 0, 1, 2, 1, 0, 1]
    base = f64(np.zeros(2 * N))
    marks = wp.indexedarray(base, [wp.array(np.arange(0, 2 * N, 2, dtype=np.int32), dtype=wp.int32, device="cpu")])
    count, out = i32([0, 0]), outputs(sum(trips))
    rewritten = wp_rewrite(emit_and_mark)
    assert rewritten.pair.spec.copied == ("count", "marks")  # not out, which decides no trip count
    with wp.Tape():
        launch(rewritten, N, inputs=[f64(X, True), i32(trips), count, out, marks], device="cpu")
    assert base.numpy().tolist() == [1.0, 0.0] * N and count.numpy().tolist() == [sum(trips)] * 2


def _found_in_a_broken_copy(monkeypatch, kernel: wp.Kernel, check, broken) -> list[str]:
    """What ``check`` (an invariant) finds in a copy of what the rewrite of ``kernel`` generates, broken by
    ``broken``; in the rewrite itself it must find nothing."""
    found: list[str] = []
    rewrite_kernel = pipeline.rewrite_kernel

    def checked(frontend, *options):
        generated = rewrite_kernel(frontend, *options)
        assert not check(frontend, generated)
        found.extend(check(frontend, broken(generated)))
        return generated

    monkeypatch.setattr(pipeline, "rewrite_kernel", checked)
    wp_rewrite(kernel, detach_returns=True)  # a kernel of its own (another option): generated anew
    return found


def _with_source(generated, change) -> pipeline.GeneratedKernel:
    """``generated`` with ``change`` made to its source's module (in place)."""
    module = ast.parse(generated.source)
    change(module)
    return dataclasses.replace(generated, source=ast.unparse(module))


def test_the_invariants_catch_a_count_kernel_reading_what_it_does_not_write(monkeypatch):
    """The count kernel leaves out the writes into arrays the plan does not copy, so it must read none of them: a
    plan that copied nothing would have it read ``marks`` and the counter (``dropped_reads``)."""

    def with_nothing_copied(generated):
        return dataclasses.replace(generated, plan=dataclasses.replace(generated.plan, copied=frozenset()))

    found = _found_in_a_broken_copy(monkeypatch, emit_and_mark, dropped_reads, with_nothing_copied)
    assert sorted(line.split(": ", 1)[1].split(" (")[0] for line in found) == ["reads 'count'", "reads 'marks'"]


def test_the_invariants_catch_a_count_kernel_writing_what_the_dry_run_does_not_copy(monkeypatch):
    """A dry run runs on copies of the arrays the count kernel writes, and on the launch's own arrays otherwise: an
    atomic kept in the count kernel on an array the plan does not copy would update the launch's own (a count phase
    that left in the atomic on Newton's active-slot counter, whose value it no longer read, did: here, the probe's
    ``atomic_cas`` on the keys, with the keys uncopied; ``count_kernel_differences``)."""

    def with_the_keys_uncopied(generated):
        fewer = generated.plan.copied - {"keys"}
        return dataclasses.replace(generated, plan=dataclasses.replace(generated.plan, copied=fewer))

    found = _found_in_a_broken_copy(
        monkeypatch, count_slices.insert_then_scan, count_kernel_differences, with_the_keys_uncopied
    )
    assert [line.split(": ", 1)[1] for line in found] == [
        "writes ['wp.atomic_cas(keys, idx, EMPTY, key)'] the record kernel does not, and leaves out [] that the dry "
        "run copies"
    ]


def test_the_invariants_catch_a_count_kernel_that_leaves_out_a_trip_count(monkeypatch):
    """The count phase is cut down to what decides trip counts (``passes.count_slice``): a count clone that no longer
    reported the trips of its loop would leave the records too short (``count_kernel_differences``)."""

    def without_a_report(module: ast.Module) -> None:
        for function in module.body:
            if (
                isinstance(function, ast.FunctionDef)
                and function.name.startswith("farthest")
                and "count" in function.name
            ):
                function.body = [s for s in function.body if "check_trips" not in ast.unparse(s)] or [ast.Pass()]

    found = _found_in_a_broken_copy(
        monkeypatch,
        count_slices.support_point,
        count_kernel_differences,
        lambda generated: _with_source(generated, without_a_report),
    )
    assert [line.split(": ", 1)[1] for line in found] == ["reports the trips of loops [], not ['loop0']"]


def test_the_invariants_catch_a_helper_replay_that_writes_without_its_twin(monkeypatch):
    """Warp's backward runs a helper's forward again unless it has a replay of its own: without its twin registered,
    the store's helper would store again (``rerun_writes``)."""

    def without_twins(module: ast.Module) -> None:
        for function in module.body:
            if isinstance(function, ast.FunctionDef):
                function.decorator_list = [d for d in function.decorator_list if ".replays(" not in ast.unparse(d)]

    found = _found_in_a_broken_copy(
        monkeypatch,
        replay_twin_kernels.emit_wrapped,
        rerun_writes,
        lambda generated: _with_source(generated, without_twins),
    )
    assert sorted({line.split(": ", 1)[1] for line in found}) == ["'out[slot]' is stored again"]


@wp.func
def first_above(values: wp.array[wp.float64], n: int, limit: wp.float64) -> wp.float64:
    found = wp.float64(0.0)
    for i in range(1, n):
        if values[i] > limit:
            found = values[i] * limit
            break
    return found


@wp.kernel
def scaled_first_above(values: wp.array[wp.float64], counts: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[tid] = first_above(values, counts[tid], values[tid])


def test_the_invariants_catch_a_replay_that_checks_its_trips(monkeypatch):
    """A replay runs the trips its records hold; checking its loops' trips as the record kernel does would have Warp's
    backward report into the launch's status (a replay checking the whole range of a loop that breaks stopped on an
    out-of-bounds access under Warp's bounds checks: ``tests/api/test_checkers.py``, a change never committed). A
    replay calls none of the device functions only the forward may call (``forward_calls_in_replays``)."""

    def checking_trips(module: ast.Module) -> None:
        functions = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
        for name, function in functions.items():
            replay = functions.get(name.removesuffix("_record") + "_replay") if name.endswith("_record") else None
            if replay is not None:
                replay.body[:0] = [s for s in function.body if "check_trips" in ast.unparse(s)]

    found = _found_in_a_broken_copy(
        monkeypatch,
        scaled_first_above,
        forward_calls_in_replays,
        lambda generated: _with_source(generated, checking_trips),
    )
    assert [line.split(": ", 1)[1] for line in found] == ["'first_above_replay' calls wp_rewrite_runtime.check_trips"]


# --- calls the rewrite must see into ----------------------------------------------------------------------------


@wp.func
def write_contact(count: wp.array[wp.int32], out: wp.array[wp.float64], value: wp.float64):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = value


def make_contact_kernel(writer):
    """A narrow phase made by a factory, calling its writer through wp.static as Newton does."""

    @wp.kernel
    def collide(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
        tid = wp.tid()
        wp.static(writer)(count, out, x[tid] * x[tid] + wp.float64(1.0))

    return collide


CONTACTS = make_contact_kernel(write_contact)


def test_a_helper_called_through_wp_static_is_rewritten():
    check(Case(CONTACTS, N, lambda: [f64(X, True), i32([0]), outputs(N)], [2], [0]))


@wp.kernel
def emit_into_a_large_output(
    x: wp.array[wp.float64], trips: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    for k in range(trips[tid]):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(k + 1)


def test_the_dry_run_copies_only_what_its_count_reads(monkeypatch):
    """It launches the count kernel, cut down to what the loop's trips need: the counter's atomic and the store into
    ``out`` decide none, so neither is in it, and the dry run copies neither (``count_slice.fewer_copies``).
    ``emit_and_mark``'s loop reads both arrays it writes: those are copied
    (``test_the_dry_run_never_writes_user_memory``)."""
    rewritten = wp_rewrite(emit_into_a_large_output)
    assert rewritten.pair.spec.written == ("count", "out") and rewritten.pair.spec.copied == ()
    count_kernel = rewritten.source.split("def emit_into_a_large_output_count(")[1].split("\n\n\n")[0]
    assert "out[slot] =" not in count_kernel and "atomic_add" not in count_kernel
    copies = []
    clone = wp.clone

    def counted_clone(array, *args, **kwargs):
        copies.append(array.size)
        return clone(array, *args, **kwargs)

    monkeypatch.setattr(wp, "clone", counted_clone)
    trips = [1, 2, 0, 1, 2, 1, 0, 1]
    x, count, out = f64(X, True), i32([0]), outputs(100_000)
    with wp.Tape():
        launch(rewritten, N, inputs=[x, i32(trips), count, out], device="cpu")
    assert copies == []  # neither the counter nor out (100,000 elements)
    assert count.numpy().tolist() == [sum(trips)]


# --- whole structs handed to helpers ----------------------------------------------------------------------------


@wp.struct
class Budget:
    spent: wp.array[wp.int32]
    total: wp.array[wp.float64]


@wp.func
def spend(budget: Budget, x: wp.float64) -> wp.float64:
    """Takes the whole struct and runs atomics on its fields: its writes into budget.total are the kernel's too."""
    slot = wp.atomic_add(budget.spent, 0, 1)
    return wp.atomic_add(budget.total, 0, x * wp.float64(slot + 1))


@wp.kernel
def spend_from_a_budget(x: wp.array[wp.float64], budget: Budget, out: wp.array[wp.float64]):
    tid = wp.tid()
    before = spend(budget, x[tid])
    out[tid] = before * x[tid]


def test_a_whole_struct_handed_to_a_helper_that_writes_its_fields():
    def program(args, launcher):
        budget = Budget()
        budget.spent, budget.total = args[1], args[2]
        launcher(spend_from_a_budget, N, [args[0], budget, args[3]])

    make = lambda: [f64(X, True), i32([0]), f64([0.5], True), outputs(N)]  # noqa: E731
    check(Case(None, N, make, [2, 3], [0, 2], program=program))


@wp.func
def deposit(budget: Budget, value: wp.float64):
    budget.total[0] = budget.total[0] + value  # a plain write into the target of exact returns


@wp.kernel
def deposit_then_take(x: wp.array[wp.float64], budget: Budget, out: wp.array[wp.float64]):
    tid = wp.tid()
    deposit(budget, x[tid])
    out[tid] = wp.atomic_add(budget.total, 0, x[tid]) * x[tid]


def test_a_whole_struct_handed_to_a_helper_that_writes_an_exact_target_is_refused():
    with pytest.raises(RewriteError, match=r"helper 'deposit' receives an array whose float atomic returns need"):
        wp_rewrite(deposit_then_take)
