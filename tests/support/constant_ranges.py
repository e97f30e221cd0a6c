"""A kernel looping over a range of a module-level int constant, which the rewrite reads (``passes.constant_ranges``):
``tests/cli/test_constant_ranges.py`` changes the constant after the rewrite read it."""

import warp as wp

WIDTH = 3


@wp.kernel
def over_a_width(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    acc = x[tid]
    for _i in range(WIDTH):
        slot = wp.atomic_add(count, 0, 1)
        acc = wp.sin(acc) * x[tid] + wp.float64(slot) * wp.float64(0.1)
    out[tid] = acc * acc
