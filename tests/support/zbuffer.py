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


@wp.func
def in_front(zbuf: wp.array[wp.float64], p: int, depth: wp.float64) -> bool:
    """The early test in a helper that consumes nothing: its clone reads the target's shadow."""
    return depth < zbuf[p]


@wp.kernel
def early_test_in_a_helper(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], zbuf: wp.array[wp.float64], shade: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    p = pixel[tid]
    if in_front(zbuf, p, depth):
        nearest = wp.atomic_min(zbuf, p, depth)
        shade[tid] = nearest * depth


@wp.func
def deposit(grid: wp.array2d(dtype=wp.float64), row: int, column: int, depth: wp.float64) -> wp.float64:
    """The early test and the atomic together in a helper, on a 2-D target."""
    if depth < grid[row, column]:
        return wp.atomic_min(grid, row, column, depth)
    return depth


@wp.kernel
def nearest_on_a_grid(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], grid: wp.array2d(dtype=wp.float64), shade: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    nearest = deposit(grid, pixel[tid], tid % 2, depth)
    shade[tid] = wp.float64(3.0) * depth + nearest * nearest


@wp.func
def in_front_on_a_grid(grid: wp.array2d(dtype=wp.float64), row: int, column: int, depth: wp.float64) -> bool:
    return depth < grid[row, column]


@wp.kernel
def early_grid_test_in_a_helper(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], grid: wp.array2d(dtype=wp.float64), shade: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    if in_front_on_a_grid(grid, pixel[tid], tid % 2, depth):
        nearest = wp.atomic_min(grid, pixel[tid], tid % 2, depth)
        shade[tid] = nearest * depth
