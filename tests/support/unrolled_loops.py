"""Kernels with loops Warp unrolls (``range()`` of int literals with at most ``max_unroll`` trips, or one holding a
``wp.static(...)`` that reads the loop's variable, whatever its length) around a consumed atomic's return, carrying a
value from trip to trip and out of the loop, alone and inside a loop Warp does not unroll: unrolled, such a loop is
straight code to Warp's backward, so the rewrite records the atomic's returns per trip and restores nothing the loop
carries (``passes.plan``). A range of module-level int constants, ``range(STEPS)`` or ``range(wp.static(STEPS))``, is
one of literals to Warp, and to the rewrite, which reads them (``passes.constant_ranges``): unrolled at ``STEPS = 3``,
replayed from records past ``max_unroll`` (``LONG_STEPS + 1``). ``tests/passes/test_unrolled_loops.py`` checks them
end to end.

Each kernel runs over N = 3 threads."""

import warp as wp

STEPS = 3
LONG_STEPS = wp.constant(17)


@wp.kernel
def literal_range_slots(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    acc = wp.sqrt(x[tid])
    for i in range(1, 5):
        slot = wp.atomic_add(count, 0, i)
        acc = acc * acc * wp.float64(0.5) + x[tid] / wp.float64(slot + 1)
    out[tid] = acc


@wp.kernel
def later_static_slots(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    acc = x[tid]
    for i in range(20):
        slot = wp.atomic_add(count, 0, 1)
        acc = wp.sin(acc) * x[tid] + wp.float64(slot % 2) * wp.float64(wp.static(i % 3))
    out[tid] = acc * acc


@wp.kernel
def literal_range_inside_dynamic(
    x: wp.array[wp.float64], n: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    acc = x[tid]
    for _k in range(n[tid]):
        for _i in range(2):
            slot = wp.atomic_add(count, 0, 1)
            acc = acc * wp.cos(acc) + wp.float64(slot % 3) * x[tid]
    out[tid] = acc * x[tid]


@wp.kernel
def literal_range_with_continue(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    acc = x[tid]
    for i in range(4):
        slot = wp.atomic_add(count, 0, 1)
        if slot % 2 == 0:
            continue
        acc = acc * acc + x[tid] * wp.float64(i)
    out[tid] = acc


@wp.kernel
def static_range_slots(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    acc = x[tid]
    for _i in range(wp.static(STEPS)):
        slot = wp.atomic_add(count, 0, 1)
        acc = wp.sin(acc) * x[tid] + wp.float64(slot) * wp.float64(0.1)
    out[tid] = acc * acc


@wp.kernel
def named_range_slots(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    acc = x[tid]
    for _i in range(STEPS):
        slot = wp.atomic_add(count, 0, 1)
        acc = wp.sin(acc) * x[tid] + wp.float64(slot) * wp.float64(0.1)
    out[tid] = acc * acc


@wp.kernel
def static_range_past_max_unroll(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    acc = x[tid]
    for _i in range(wp.static(LONG_STEPS + 1)):
        slot = wp.atomic_add(count, 0, 1)
        acc = wp.sin(acc) * x[tid] + wp.float64(slot % 2) * wp.float64(0.1)
    out[tid] = acc * acc
