"""Overloads and generics: a helper with one definition per counter width, a generic helper instantiated for int32,
int64, float32 and float64 targets, and a generic kernel whose overloads ``wp.overload`` declares (a call with a
dict, a call with a list, a decorated stub). Forward and gradients against finite differences of the original,
through the API and the command line; a call whose overload the source does not tell is refused."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from tests.support import overloads
from tests.support.emitted import emitted_fixture, through
from tests.support.harness import Case, check, f64, i32, original_or
from warp_rewrite import RewriteError, launch, wp_rewrite
from warp_rewrite.runtime import RewrittenKernel

N = 4
X = np.array([0.7, -1.3, 1.9, 0.4])


def counters() -> list:
    return [i32([0]), wp.zeros(1, dtype=wp.int64, device="cpu")]


# kernel -> (fresh arguments, loss, differentiated)
HELPERS = {
    "compact_through_overloads": (lambda: [f64(X, True), *counters(), f64(np.zeros(16), True)], [3], [0]),
    "compact_through_a_generic_helper": (
        lambda: [
            f64(X, True),
            *counters(),
            wp.zeros(1, dtype=wp.float32, device="cpu"),
            f64([0.5], True),
            f64(np.zeros(16), True),
        ],
        [4, 5],
        [0, 4],
    ),
}


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_helpers_through_the_api(name):
    make, loss, wrt = HELPERS[name]
    check(Case(getattr(overloads, name), N, make, loss, wrt))


emitted = emitted_fixture(overloads)


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_helpers_through_the_command_line(emitted, name):
    make, loss, wrt = HELPERS[name]
    check(Case(None, N, make, loss, wrt, program=through(emitted, name, N)))


def compaction() -> list:
    return [f64(X, True), i32([0]), f64(np.zeros(N), True)]


FLOAT64 = {"x": wp.array(dtype=wp.float64), "out": wp.array(dtype=wp.float64)}


def test_an_overload_of_a_rewritten_kernel_through_the_api():
    """``wp.overload`` of the rewritten generic kernel declares the overload on the original and returns it
    rewritten (it once raised: ``property 'adj' of 'RewrittenKernel' object has no setter``)."""
    overload = wp.overload(wp_rewrite(overloads.compact_any), FLOAT64)
    assert isinstance(overload, RewrittenKernel) and not overload.is_generic
    rewritten = lambda args: launch(overload, N, inputs=args, device="cpu")  # noqa: E731
    check(Case(None, N, compaction, [2], [0], program=original_or(overloads.compact_any, N, rewritten)))


def test_overloads_declared_in_an_emitted_file(emitted):
    """In the emitted file the kernel's name stays bound to the rewritten kernel after its overloads are declared
    (the block follows the ``@wp.overload`` stub, whose decorator binds the name to the original), with the
    declared overloads; ``wp.overload`` of it there works as through the API."""
    assert emitted.compact_any.launches_rewritten  # (the RewrittenKernel of the runtime copied beside the file)
    declared = {tuple(a.type.dtype for a in k.adj.args[::2]) for k in emitted.compact_any.kernel.overloads.values()}
    assert {(wp.float64,) * 2, (wp.float32,) * 2, (wp.float16,) * 2} <= declared
    check(Case(None, N, compaction, [2], [0], program=through(emitted, "compact_any", N)))
    overload = wp.overload(emitted.compact_any, FLOAT64)
    rewritten = lambda args: wp.launch(overload, N, inputs=args, device="cpu")  # noqa: E731
    check(Case(None, N, compaction, [2], [0], program=original_or(overloads.compact_any, N, rewritten)))


# total's dtype -> fresh arguments of running_any (x away from the int total's truncation steps)
RUNNING = {
    wp.int32: lambda: [f64(X, True), i32([2]), f64(np.zeros(N), True)],
    wp.float64: lambda: [f64(X, True), f64([0.5], True), f64(np.zeros(N), True)],
}


@pytest.mark.parametrize("dtype", sorted(RUNNING, key=str))
def test_a_target_of_any_dtype_through_the_api(dtype):
    check(Case(overloads.running_any, N, RUNNING[dtype], [2], [0, 1] if dtype is wp.float64 else [0]))


@pytest.mark.parametrize("dtype", sorted(RUNNING, key=str))
def test_a_target_of_any_dtype_through_the_command_line(emitted, dtype):
    """The block also holds the variant recording float returns as constants, which launches with an int total
    run (a plain atomic rather than the exact path's loop on a shadow), as ``wp_rewrite`` makes it on first use."""
    wrt = [0, 1] if dtype is wp.float64 else [0]
    check(Case(None, N, RUNNING[dtype], [2], wrt, program=through(emitted, "running_any", N)))
    assert emitted.running_any.detached() is not None and emitted.compact_any.detached() is None


# the counter's dtype -> fresh arguments of emit_beside_a_total
BESIDE = {
    dtype: lambda dtype=dtype: [
        f64(X, True),
        wp.zeros(1, dtype=dtype, device="cpu"),
        f64([0.5], True),
        f64(np.zeros(N), True),
    ]
    for dtype in (wp.int32, wp.int64)
}


@pytest.mark.parametrize("dtype", sorted(BESIDE, key=str))
def test_an_int_target_of_any_dtype_beside_exact_returns_through_the_api(dtype):
    check(Case(overloads.emit_beside_a_total, N, BESIDE[dtype], [3], [0, 2]))


@pytest.mark.parametrize("dtype", sorted(BESIDE, key=str))
def test_an_int_target_of_any_dtype_beside_exact_returns_through_the_command_line(emitted, dtype):
    """Warp once failed to compile the exact path for the int counter (``_exact_value`` had float overloads only)."""
    check(Case(None, N, BESIDE[dtype], [3], [0, 2], program=through(emitted, "emit_beside_a_total", N)))


def flagging() -> list:
    return [f64(X, True), i32([0]), f64(np.zeros(N), True)]


def test_the_target_of_a_bitwise_atomic_holds_ints_whatever_its_dtype_says(emitted):
    """Through the API and the command line alike, against finite differences."""
    check(Case(overloads.flag_any, N, flagging, [2], [0]))
    check(Case(None, N, flagging, [2], [0], program=through(emitted, "flag_any", N)))
    assert emitted.flag_any.detached() is None  # (no exact path: nothing to detach)


@wp.func
def scale(v: wp.float32) -> wp.float32:
    return v * wp.float32(2.0)


@wp.func
def scale(v: wp.float64) -> wp.float64:  # noqa: F811
    return v * wp.float64(2.0)


@wp.kernel
def compact_scaled(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = scale(x[tid] + x[tid])  # the source does not say which: refused (it is not read into scale)


@wp.kernel
def compact_scaled_typed(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = scale(x[tid])  # an element of a float64 array: the float64 one


def test_a_call_whose_overload_the_source_does_not_tell_is_refused():
    with pytest.raises(RewriteError, match=r"'scale' has 2 definitions \(overloads\), and 2 of them fit this call"):
        wp_rewrite(compact_scaled)
    check(Case(compact_scaled_typed, N, compaction, [2], [0]))


@wp.kernel
def scaled_with_no_atomic(x: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[tid] = scale(x[tid] + x[tid])  # the source does not say which overload, and nothing needs a rewrite


def test_a_kernel_that_needs_no_rewrite_runs_as_plain_warp_whatever_overload_its_calls_run():
    """Newton's implicit MPM calls Warp's overloaded ``bsr_row_index`` with arguments the source does not type: the
    kernel needs no rewrite, so it runs as plain Warp, which picks the overload (it was refused, and with
    ``rewrite_launches()`` its launch raised). The fence follows every overload the call may run to tell."""
    assert wp_rewrite(scaled_with_no_atomic).pair is None


@wp.func
def claimed(count: wp.array[wp.int32], v: wp.float32) -> wp.float32:
    return v * wp.float32(wp.atomic_add(count, 0, 1))  # uses an atomic's return


@wp.func
def claimed(count: wp.array[wp.int32], v: wp.float64) -> wp.float64:  # noqa: F811
    return v * wp.float64(2.0)


@wp.kernel
def claimed_by_either(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[tid] = wp.float64(claimed(count, x[tid] + x[tid]))  # which one, the source does not say


def test_a_call_that_may_run_an_overload_using_an_atomics_return_is_refused():
    """One of the overloads the call may run uses an atomic's return: the kernel may need a rewrite, which cannot
    tell the overload, so it is refused rather than left to plain Warp."""
    with pytest.raises(RewriteError, match=r"'claimed' has 2 definitions \(overloads\), and 2 of them fit this call"):
        wp_rewrite(claimed_by_either)
