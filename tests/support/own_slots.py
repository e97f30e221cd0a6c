"""Kernels that read back, at a slot taken from a counter, the element they stored there themselves."""

import warp as wp


@wp.kernel
def refine_at_slot(
    x: wp.array[wp.float64],
    w: wp.array[wp.float64],
    count: wp.array[wp.int32],
    total: wp.array[wp.float64],
    z: wp.array[wp.float64],
):
    tid = wp.tid()
    prev = wp.atomic_add(total, 0, x[tid])  # an exact float return, used below
    s = wp.atomic_add(count, 0, 1)
    z[s] = wp.sin(x[tid])
    z[s] = z[s] * z[s] * w[tid] + prev  # nonlinear in the value read back: plain Warp reads the final z[s]


@wp.kernel
def two_slots(x: wp.array[wp.float64], count: wp.array[wp.int32], z: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    s = wp.atomic_add(count, 0, 2)  # two slots of one counter never hold the same value
    t = wp.atomic_add(count, 0, 1)
    z[s] = x[tid] * x[tid]
    z[t] = wp.cos(x[tid])
    if count[0] > 0:
        z[s] = z[s] * z[t]
    out[t] = z[s] * z[t] + z[s]
