"""Kernels reaching memory through locals that the rewrite cannot follow (tests/passes/test_memory_locals.py): each
is refused, through the API and the command line, rather than given a silently wrong gradient."""

import warp as wp

F = wp.float64
N = 5


@wp.kernel
def read_written_through_choice(
    c: wp.array[int], a: wp.array[F], b: wp.array[F], x: wp.array[F], out: wp.array[F], flag: int
):
    tid = wp.tid()
    buf = a
    if flag > 0:
        buf = b
    buf[tid] = x[tid] * F(2.0)
    s = wp.atomic_add(c, 0, 1)
    out[s] = buf[(tid + 1) % N] * x[tid]


@wp.func
def put(arr: wp.array[F], i: int, v: F):
    arr[i] = v


@wp.kernel
def choice_handed_to_helper(
    c: wp.array[int], a: wp.array[F], b: wp.array[F], x: wp.array[F], out: wp.array[F], flag: int
):
    tid = wp.tid()
    buf = a
    if flag > 0:
        buf = b
    put(buf, tid, x[tid])
    s = wp.atomic_add(c, 0, 1)
    out[s] = x[tid]


@wp.kernel
def atomic_on_a_choice(c: wp.array[int], d: wp.array[int], x: wp.array[F], out: wp.array[F], flag: int):
    tid = wp.tid()
    counter = c
    if flag > 0:
        counter = d
    s = wp.atomic_add(counter, 0, 1)
    out[s] = x[tid]


@wp.func_native("out[0] = 1.0;")
def native_store(out: wp.array[F]): ...


@wp.kernel
def native_handed_memory(c: wp.array[int], x: wp.array[F], out: wp.array[F]):
    tid = wp.tid()
    native_store(out)
    s = wp.atomic_add(c, 0, 1)
    out[s] = x[tid]


@wp.struct
class Holder:
    data: wp.array[F]


@wp.kernel
def array_in_a_struct_element(c: wp.array[int], holders: wp.array[Holder], x: wp.array[F], out: wp.array[F]):
    tid = wp.tid()
    holder = holders[0]
    holder.data[tid] = x[tid] * F(3.0)
    s = wp.atomic_add(c, 0, 1)
    out[s] = holder.data[(tid + 1) % N] * x[tid]


@wp.func
def pick(a: wp.array[F], b: wp.array[F], k: int):
    if k > 0:
        return b
    return a


@wp.kernel
def helper_returning_an_array(c: wp.array[int], a: wp.array[F], b: wp.array[F], x: wp.array[F], out: wp.array[F]):
    tid = wp.tid()
    chosen = pick(a, b, 1)
    chosen[tid] = x[tid]
    s = wp.atomic_add(c, 0, 1)
    out[s] = b[(tid + 1) % N] * x[tid]
