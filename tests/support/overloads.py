"""Helpers of one name with several signatures, generic helpers instantiated for several widths, and a generic
kernel whose overloads are declared with ``wp.overload`` (both forms), each around consumed atomics."""

from typing import Any

import warp as wp


@wp.func
def take(count: wp.array[wp.int32], k: wp.int32) -> wp.int32:
    return wp.atomic_add(count, 0, k)


@wp.func  # the same name for int64 counters: Warp overloads @wp.func by signature
def take(count: wp.array[wp.int64], k: wp.int64) -> wp.int64:  # noqa: F811
    return wp.atomic_add(count, 0, k)


@wp.kernel
def compact_through_overloads(
    x: wp.array[wp.float64], small: wp.array[wp.int32], large: wp.array[wp.int64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    near = take(small, 1)
    far = take(large, wp.int64(2))
    out[near] = x[tid] * x[tid]
    out[8 + int(far) // 2] = wp.sin(x[tid]) * x[tid]


@wp.func
def previous(target: wp.array(dtype=Any), value: Any):
    """Instantiated by Warp for each target type the calls hand it."""
    return wp.atomic_add(target, 0, value)


@wp.kernel
def compact_through_a_generic_helper(
    x: wp.array[wp.float64],
    small: wp.array[wp.int32],
    large: wp.array[wp.int64],
    single: wp.array[wp.float32],
    total: wp.array[wp.float64],
    out: wp.array[wp.float64],
):
    tid = wp.tid()
    near = previous(small, 1)
    far = previous(large, wp.int64(1))
    before = previous(total, x[tid] * x[tid])  # a float64 return with exact gradients
    weight = previous(single, wp.float32(tid + 1))  # a float32 return made of nothing that requires grad
    out[near] = x[tid] * before
    out[8 + int(far)] = wp.float64(weight) * x[tid]


@wp.kernel
def compact_any(x: wp.array(dtype=Any), count: wp.array[wp.int32], out: wp.array(dtype=Any)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * x[tid]


wp.overload(compact_any, {"x": wp.array(dtype=wp.float64), "out": wp.array(dtype=wp.float64)})
wp.overload(compact_any, [wp.array(dtype=wp.float32), wp.array[wp.int32], wp.array(dtype=wp.float32)])


@wp.overload
def compact_any(x: wp.array(dtype=wp.float16), count: wp.array[wp.int32], out: wp.array(dtype=wp.float16)): ...


@wp.kernel
def running_any(x: wp.array(dtype=Any), total: wp.array(dtype=Any), out: wp.array(dtype=Any)):
    """A total of any dtype: an int one's returns have no gradient, a float one's get exact gradients. The command
    line cannot tell which a launch passes (it once emitted the exact path only, which Warp could not compile for
    ints)."""
    tid = wp.tid()
    before = wp.atomic_add(total, 0, total.dtype(x[tid] * x[tid]))
    out[tid] = x[tid] * out.dtype(before)


wp.overload(running_any, [wp.array(dtype=wp.float64), wp.array(dtype=wp.int32), wp.array(dtype=wp.float64)])
wp.overload(running_any, [wp.array(dtype=wp.float64), wp.array(dtype=wp.float64), wp.array(dtype=wp.float64)])


@wp.kernel
def emit_beside_a_total(
    x: wp.array[wp.float64], count: wp.array(dtype=Any), total: wp.array[wp.float64], out: wp.array[wp.float64]
):
    """A counter of any dtype beside a total whose float returns need exact gradients: a launch with an int counter
    runs the exact path for both, the counter in its shadow too (its returns have no gradient)."""
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, count.dtype(1))
    before = wp.atomic_add(total, 0, x[tid] * x[tid])
    out[int(slot)] = x[tid] * before


for counter in (wp.int32, wp.int64):
    wp.overload(emit_beside_a_total, [wp.array[wp.float64], wp.array(dtype=counter), *[wp.array[wp.float64]] * 2])


@wp.kernel
def flag_any(x: wp.array[wp.float64], flags: wp.array(dtype=Any), out: wp.array[wp.float64]):
    """Flags of any dtype set by ``atomic_or``, which Warp's bitwise atomics allow on ints only: they hold ints, so
    their returns need no exact path (they were refused as "wp.atomic_or() on a float target")."""
    tid = wp.tid()
    seen = wp.atomic_or(flags, 0, flags.dtype(1 << (tid % 3)))
    out[tid] = x[tid] * x[tid] * wp.float64(seen + flags.dtype(1))


wp.overload(flag_any, [wp.array[wp.float64], wp.array(dtype=wp.int32), wp.array[wp.float64]])
