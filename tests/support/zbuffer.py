"""Z-buffers: an early depth test reads the target of the float atomic after it, only to compare with it."""

import warp as wp


@wp.kernel
def nearest_shade(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], zbuf: wp.array[wp.float64], shade: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    p = pixel[tid]
    if depth < zbuf[p]:  # the early test: the depth this thread sees, after the atomics of the threads before it
        nearest = wp.atomic_min(zbuf, p, depth)  # its return is used as a number: exact gradients
        shade[tid] = wp.float64(3.0) * depth + wp.float64(0.25) * nearest * nearest


@wp.kernel
def farthest_shade(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], zbuf: wp.array[wp.float64], shade: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    p = pixel[tid]
    if depth > zbuf[p]:
        farthest = wp.atomic_max(zbuf, p, depth)
        shade[tid] = wp.sin(depth) * farthest


@wp.kernel
def winners(x: wp.array[wp.float64], pixel: wp.array[wp.int32], zbuf: wp.array[wp.float64], hits: wp.array[wp.float64]):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    p = pixel[tid]
    if depth < zbuf[p]:
        old = wp.atomic_min(zbuf, p, depth)
        if old > depth:  # the return, only compared as well: this thread won the pixel for now
            hits[tid] = depth * x[tid]


@wp.kernel
def winners_without_a_test(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], zbuf: wp.array[wp.float64], hits: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    p = pixel[tid]
    old = wp.atomic_min(zbuf, p, depth)  # only compared: replayed as a constant, the atomic's adjoint kept
    if old > depth:
        hits[tid] = depth * x[tid]
