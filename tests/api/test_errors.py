"""What the rewrite refuses, and the exact messages it refuses with (file:line:col, construct, advice)."""

import re
from typing import Any

import pytest
import warp as wp

from warp_rewrite import RewriteError, RewriteWarning, wp_rewrite


def where(marker: str, token: str = "wp.atomic") -> str:
    """``file:line:col`` of ``token`` on the line of this file that carries ``# marker``."""
    with open(__file__) as source:
        for number, line in enumerate(source, start=1):
            if line.rstrip().endswith(f"# {marker}"):
                return f"{__file__}:{number}:{line.index(token) + 1}"
    raise AssertionError(marker)


@wp.kernel
def loops_over_an_array(count: wp.array[int], items: wp.vec3, out: wp.array[float]):
    for item in items:  # non-range
        out[wp.atomic_add(count, 0, 1)] = item


@wp.kernel
def probes_in_the_condition(table: wp.array[int], key: int, n: int, weights: wp.array[float]):
    slot = key % n
    while wp.atomic_cas(table, slot, -1, key) != -1:  # in-condition
        weights[slot] = weights[slot] * 0.5  # differentiable work: the loop must be replayed
        slot = (slot + 1) % n
    else:  # Warp never runs it
        weights[slot] = 0.0


@wp.func
def first_claimed(count: wp.array[int], x: wp.array[float], n: int) -> float:
    for i in range(n):
        if wp.atomic_add(count, 0, 1) == i:
            return x[i]  # float-return
    return 0.0


@wp.kernel
def returns_a_float_from_a_loop(count: wp.array[int], x: wp.array[float], n: int, out: wp.array[float]):
    out[wp.tid()] = first_claimed(count, x, n)


@wp.func
def hit(i: int) -> tuple[bool, int]:
    return True, i


@wp.func
def first_hit(count: wp.array[int], n: int) -> tuple[bool, int]:
    for i in range(n):
        if wp.atomic_add(count, 0, 1) == i:
            return hit(i)  # tuple-return
    return False, 0


@wp.kernel
def returns_a_tuple_valued_call_from_a_loop(count: wp.array[int], x: wp.array[float], out: wp.array[float]):
    found, i = first_hit(count, 4)
    if found:
        out[i] = x[i]


@wp.kernel
def first_assigned_in_the_loop(count: wp.array[int], x: wp.array[float], n: int, out: wp.array[float]):
    for _step in range(n):  # assigned-in-loop
        total = x[wp.atomic_add(count, 0, 1)] * 2.0
    out[0] = total * total


@wp.func
def power(v: Any, n: int):
    p = v
    for _step in range(n):  # generic-carried
        p = p * v
    return p


@wp.kernel
def carries_a_generic_value(x: wp.array[float], n: int, out: wp.array[float]):
    out[0] = power(x[0], n)


@wp.kernel
def picks_target_at_run_time(a: wp.array[int], b: wp.array[int], flag: int, out: wp.array[float]):
    counter = a
    if flag > 0:
        counter = b
    slot = wp.atomic_add(counter, 0, 1)  # ambiguous-target
    out[slot] = 1.0


@wp.func
def deposit_any(count: wp.array[int], mass: wp.array(dtype=Any), value: Any):  # generic-helper
    slot = wp.atomic_add(count, 0, 1)
    wp.atomic_add(mass, slot % 2, value)


@wp.kernel
def deposits_through_a_generic_helper(count: wp.array[int], x: wp.array[float], mass: wp.array[float]):
    deposit_any(count, mass, x[wp.tid()])


@wp.kernel
def scatters_through_any(x: wp.array[wp.float64], scatter: Any, out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(scatter.count, 0, 1)
    scatter.values[slot] = x[tid] * x[tid]  # untyped-write
    out[tid] = scatter.values[0] * x[tid]  # what thread 0 wrote: the replay must not read it from memory


def refusal(kernel: wp.Kernel) -> str:
    with pytest.raises(RewriteError) as error:
        wp_rewrite(kernel)
    return str(error.value)


def test_loop_over_something_other_than_range():
    assert refusal(loops_over_an_array) == (
        f"{where('non-range', 'for')}: kernel 'loops_over_an_array': a for loop over something other than range() "
        "or a spatial query, where the rewrite replays the loop (around a consumed atomic, or one Warp's backward "
        "replays wrong). Loop over range(...) or a query (for j in wp.hash_grid_query(...)) with a single loop variable"
    )


def test_atomic_in_the_condition_of_a_while_loop_with_else():
    """Refused by the fence (passes.fence), before the condition is moved into the body."""
    assert refusal(probes_in_the_condition) == (
        f"{where('in-condition', 'while')}: kernel 'probes_in_the_condition': loop with an 'else' clause (while "
        "wp.atomic_cas(table, slot, -1, key) != -1:) is not supported by warp-rewrite yet. Warp compiles no loop "
        "'else' clause (it drops a while loop's): rewrite the loop without 'else'"
    )


def test_float_returned_from_a_loop():
    assert refusal(returns_a_float_from_a_loop) == (
        f"{where('float-return', 'return')}: kernel 'returns_a_float_from_a_loop': a 'return' inside a loop the "
        "rewrite replays (Warp's backward cannot replay a return from a loop it does not unroll) (in helper "
        "'first_claimed'). Leave the loop with 'break', setting a flag, and return after the loop"
    )


def test_tuple_returned_from_a_loop_as_a_call_rather_than_a_literal_tuple():
    """Only ``return a, b`` has elements the lowering can assign to a local each."""
    assert refusal(returns_a_tuple_valued_call_from_a_loop) == (
        f"{where('tuple-return', 'return')}: kernel 'returns_a_tuple_valued_call_from_a_loop': a 'return' inside a "
        "loop the rewrite replays (Warp's backward cannot replay a return from a loop it does not unroll) (in "
        "helper 'first_hit'). Leave the loop with 'break', setting a flag, and return after the loop"
    )


def test_float_first_assigned_in_a_loop_and_read_after_it():
    assert refusal(first_assigned_in_the_loop) == (
        f"{where('assigned-in-loop', 'for')}: kernel 'first_assigned_in_the_loop': 'total' is first assigned inside "
        "this loop and read after it: Warp's backward loses its gradient (it zeroes the adjoints of a loop's own "
        "locals at each replayed trip). Assign 'total' before the loop, with its type: total = wp.float32(...)"
    )


def test_carried_value_of_a_type_the_source_does_not_tell():
    """No atomic's return: the kernel is left as plain Warp, with the refusal's message in its ``RewriteWarning``
    (tests/api/test_left_to_warp.py)."""
    with pytest.warns(RewriteWarning, match="is left as plain Warp"):
        left = wp_rewrite(carries_a_generic_value).left
    assert str(left) == (
        f"{where('generic-carried', 'for')}: kernel 'carries_a_generic_value': the Warp type of 'p', which this loop "
        "carries to later iterations or past its end, cannot be told from the source (the replay restores it from a "
        "record of that type) (in helper 'power'). Give 'p' its type where it is first assigned, before the loop: "
        "p = wp.float32(...), wp.vec3(...), int(...)"
    )


def test_target_chosen_at_run_time():
    assert refusal(picks_target_at_run_time) == (
        f"{where('ambiguous-target', 'counter')}: kernel 'picks_target_at_run_time': the target of wp.atomic_add() is "
        "not a kernel argument or a struct field of one. Pass the target array to the kernel as an argument and "
        "apply the atomic to it directly"
    )


def test_generic_helper_whose_replay_keeps_a_float_atomic():
    assert refusal(deposits_through_a_generic_helper) == (
        f"{where('generic-helper', 'def')}: kernel 'deposits_through_a_generic_helper': helper 'deposit_any' "
        "has generic parameters and keeps a float atomic's adjoint in its replay, which needs a @wp.func_replay "
        "that Warp does not allow for generic functions (in helper 'deposit_any'). Give 'deposit_any' concrete "
        "parameter types"
    )


def test_memory_written_through_an_argument_of_a_generic_type():
    """Which of its fields are arrays, and of what, is known only at launch: reads of what the launch writes there
    cannot be recorded (they were not, and the gradient through them was silently wrong)."""
    assert refusal(scatters_through_any) == (
        f"{where('untyped-write', 'scatter')}: kernel 'scatters_through_any': this writes 'scatter.values', memory of "
        "'scatter', whose type is generic: the rewrite cannot tell which arrays it holds, so it cannot record what "
        "the launch reads back from them. Annotate 'scatter' with its type, or hand 'scatter' whole to a @wp.func "
        "that declares it"
    )


def test_unreadable_source(monkeypatch):
    from warp_rewrite import api, live_frontend

    def unreadable(_):
        raise OSError("could not get source code")

    monkeypatch.setattr(live_frontend.FunctionSource, "of", unreadable)
    with pytest.raises(RewriteError, match=r"kernel 'loops_over_an_array': its source cannot be read \(could not get"):
        api.generate(loops_over_an_array)


def test_error_carries_its_parts():
    with pytest.raises(RewriteError) as error:
        wp_rewrite(loops_over_an_array)
    assert error.value.kernel == "loops_over_an_array"
    assert re.fullmatch(r".*test_errors\.py:\d+:\d+", error.value.location)
    assert error.value.advice.startswith("Loop over range(...)")
