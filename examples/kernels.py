"""Example kernels that use the values atomics return: plain Warp gets their gradients wrong."""

import warp as wp


@wp.kernel
def scale_by_previous(x: wp.array[float], total: wp.array[float], y: wp.array[float]):
    """The reported bug: y=[30] is right, but plain Warp gives x.grad=[nan] instead of [10]."""
    previous = wp.atomic_add(total, 0, 1.0)
    y[0] = previous * x[0]


@wp.kernel
def compact_positive(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    """Stream compaction: each positive x lands in the next free slot of out."""
    tid = wp.tid()
    if x[tid] > 0.0:
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid]


@wp.kernel
def running_sum(x: wp.array[float], acc: wp.array[float], out: wp.array[float]):
    """A float return that depends on earlier threads' values: its exact gradient reaches all of them."""
    tid = wp.tid()
    before = wp.atomic_add(acc, 0, x[tid])
    out[tid] = before * x[tid]


@wp.kernel
def squared_window_sum(x: wp.array[float], n: wp.array[int], out: wp.array[float]):
    """No atomic at all: a sum over a data-dependent count, squared after the loop. Warp's backward leaves the loop
    out of its replay, so plain Warp sees acc = 0 there and gives x.grad = 0."""
    tid = wp.tid()
    acc = float(0.0)
    for k in range(n[tid]):
        acc += x[(tid + k) % 3]
    out[tid] = acc * acc
