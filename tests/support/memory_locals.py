"""Kernels that reach memory through locals (tests/passes/test_memory_locals.py): a local bound to an array or a
row of one, stored through; a local assigned one of several arrays, only read; a local bound to an element's value,
whose component a store changes (it writes no memory)."""

import warp as wp

F = wp.float64
N = 5


@wp.kernel
def store_through_alias(c: wp.array[int], a: wp.array[F], x: wp.array[F], out: wp.array[F]):
    tid = wp.tid()
    buf = a
    buf[tid] = x[tid] * x[tid] * F(2.0)
    s = wp.atomic_add(c, 0, 1)
    out[s] = x[tid] * F(3.0)


@wp.kernel
def store_through_row(c: wp.array[int], grid: wp.array2d[F], x: wp.array[F], out: wp.array[F]):
    tid = wp.tid()
    row = grid[1]
    row[tid] = x[tid] * x[tid] * F(3.0)
    s = wp.atomic_add(c, 0, 1)
    out[s] = x[tid] * F(2.0)


@wp.kernel
def read_one_of_two(c: wp.array[int], a: wp.array[F], b: wp.array[F], x: wp.array[F], out: wp.array[F], flag: int):
    tid = wp.tid()
    source = a
    if flag > 0:
        source = b
    s = wp.atomic_add(c, 0, 1)
    out[s] = source[(tid + 1) % N] * x[tid] * x[tid]


@wp.kernel
def component_of_a_local_value(c: wp.array[int], pos: wp.array[wp.vec3d], x: wp.array[F], out: wp.array[F]):
    tid = wp.tid()
    p = pos[tid]
    p[0] = x[tid] * F(2.0)
    s = wp.atomic_add(c, 0, 1)
    out[s] = wp.dot(p, pos[(tid + 1) % N]) * x[tid]


@wp.kernel
def read_other_thread_through_alias(c: wp.array[int], a: wp.array[F], x: wp.array[F], out: wp.array[F]):
    tid = wp.tid()
    buf = a
    buf[tid] = x[tid] * F(2.0)
    s = wp.atomic_add(c, 0, 1)
    out[s] = a[(tid + 1) % N] * x[tid]
