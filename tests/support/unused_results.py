"""Kernels that call a helper consuming an atomic's return and drop what it returns into names marked unused
(``_ = claim(...)``, ``_slot, _previous = claim_pair(...)``), as Newton's test kernels call its contact reducer: the
replay keeps each such assignment as written (``passes.pruning.call_kept``), so that the command line defines a
kernel's phases once (``rewrite/cli/weave.py``). ``tests/passes/test_pruning.py`` checks them end to end.

Each kernel runs over N = 3 threads."""

import warp as wp


@wp.func
def claim(count: wp.array[wp.int32], out: wp.array[wp.float64], value: wp.float64) -> wp.int32:
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = value * wp.float64(slot + 1)
    return slot


@wp.func
def claim_pair(count: wp.array[wp.int32], out: wp.array[wp.float64], value: wp.float64):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = wp.sin(value) * wp.float64(slot + 2)
    return slot, value


@wp.kernel
def discard_the_slot(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    _ = claim(count, out, x[tid] * x[tid])


@wp.kernel
def discard_both_results(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    _slot, _value = claim_pair(count, out, x[tid])
