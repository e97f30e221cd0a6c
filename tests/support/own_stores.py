"""Kernels that read back, beside a consumed atomic, the element they stored themselves earlier in the launch."""

import warp as wp


@wp.kernel
def refine_own_value(
    x: wp.array[wp.float64],
    key: wp.array[wp.int32],
    count: wp.array[wp.int32],
    y: wp.array[wp.float64],
    out: wp.array[wp.float64],
):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    y[tid] = x[tid] * x[tid]
    if key[tid] < 2:
        y[tid] = y[tid] + wp.cos(x[tid])
    out[slot] = y[tid] * x[tid]


@wp.kernel
def square_own_value(
    x: wp.array[wp.float64], count: wp.array[wp.int32], y: wp.array[wp.float64], out: wp.array[wp.float64]
):
    """Nonlinear in the value read back: plain Warp's replay reads the final y[tid] and gets this wrong."""
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    y[tid] = wp.sin(x[tid])
    y[tid] = y[tid] * y[tid] + x[tid]
    out[slot] = y[tid]


@wp.kernel
def stored_in_both_branches(
    x: wp.array[wp.float64], count: wp.array[wp.int32], y: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    if x[tid] > wp.float64(0.0):
        y[tid] = x[tid] * wp.float64(3.0)
    else:
        y[tid] = x[tid] * x[tid]
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = y[tid] * wp.float64(2.0) + y[tid] * y[tid]


@wp.kernel
def stored_in_a_loop(
    x: wp.array[wp.float64], count: wp.array[wp.int32], y: wp.array[wp.float64], out: wp.array[wp.float64]
):
    """Not forwarded: a store in a loop reaches the read after it only if the loop runs."""
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    for _ in range(count[0] * 0 + tid % 2):
        y[tid] = x[tid] * x[tid]
    out[slot] = y[tid] * x[tid]
