"""Kernels that read an array the launch writes only to compare with it, beside a consumed atomic."""

import warp as wp


@wp.kernel
def keep_the_best(
    x: wp.array[wp.float64], count: wp.array[wp.int32], best: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    v = x[tid] * x[tid]
    if v > best[0]:  # an early test before the atomic, as a z-buffer's depth test
        wp.atomic_max(best, 0, v)
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = v * x[tid]


@wp.kernel
def spend_if_affordable(
    cost: wp.array[wp.float64], budget: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    left = budget[0]  # a capacity pre-check on a float budget, through a local
    if left >= cost[tid]:
        wp.atomic_sub(budget, 0, cost[tid])
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = wp.sqrt(cost[tid])
