"""Kernels written the way real code writes them (Newton, Warp's own tests): the rewrite must take each as it is.

test_real_idioms rewrites them with wp_rewrite and runs wp-rewrite on this file. One file, compiled once.
"""

from typing import Any

import warp as wp

# --- a helper called without its defaulted arguments ----------------------------------------------------------


@wp.func
def bump(counter: wp.array(dtype=wp.int32), index: int, limit: int = -1, step: int = 1) -> int:
    slot = wp.atomic_add(counter, index, step)
    if limit >= 0 and slot >= limit:
        slot = limit - 1
    return slot


@wp.kernel
def append_with_defaults(
    x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)
):
    tid = wp.tid()
    slot = bump(count, 0)  # limit and step left to their defaults
    out[slot] = x[tid] * x[tid]
    other = bump(count, 0, step=2, limit=-1)  # keywords, out of order
    out[other] = x[tid] + wp.float64(1.0)


# --- atomics called with keyword arguments ----------------------------------------------------------------------


@wp.kernel
def atomics_by_keyword(
    x: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.int32),
    owner: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    slot = wp.atomic_add(arr=count, i=0, value=1)
    previous = wp.atomic_cas(owner, 0, compare=0, value=tid + 1)
    out[slot] = x[tid] * wp.float64(previous % 3 + 2)
    wp.atomic_add(count, i=1, value=2)  # unconsumed, by keyword


# --- a constant range() whose loop variable is also a float -------------------------------------------------


@wp.kernel
def emit_weighted(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    for k in range(3):  # Warp unrolls it: k is a constant
        weight = wp.float64(k) + wp.float64(1.0)
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * weight


# --- ints that look like floats to a reader of the source alone ----------------------------------------------


@wp.func
def next_slot(i: int, size: int) -> int:
    return (i + 1) % size


@wp.kernel
def probe_with_a_helper(keys: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    i = tid % 8
    for _probe in range(8):
        if wp.atomic_cas(keys, i, 0, tid + 1) == 0:
            break
        i = next_slot(i, 8)  # an int: the helper says so
    out[i] = wp.float64(2.0) * x[tid]


@wp.kernel
def probe_sized_by_shape(
    keys: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)
):
    tid = wp.tid()
    size = keys.shape[0]
    i = tid % size
    for _probe in range(size):
        if wp.atomic_cas(keys, i, 0, tid + 1) == 0:
            break
        i = (i + 1) % size
    out[i] = wp.float64(2.0) * x[tid]


@wp.kernel
def probe_with_a_wide_hash(
    keys: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)
):
    tid = wp.tid()
    h = wp.uint64(tid)
    for _probe in range(8):
        if wp.atomic_cas(keys, int(h % wp.uint64(8)), 0, tid + 1) == 0:
            break
        h = h + wp.uint64(1)  # a uint64 carried through the loop
    out[int(h % wp.uint64(8))] = wp.float64(2.0) * x[tid]


@wp.kernel
def count_while_working(
    count: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)
):
    tid = wp.tid()
    working = bool(True)
    slot = int(0)
    while working:
        slot = wp.atomic_add(count, 0, 1)
        working = False
    out[slot] = wp.float64(2.0) * x[tid]


@wp.kernel
def float_assigned_before_read(
    count: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)
):
    tid = wp.tid()
    best = wp.float64(0.0)
    for k in range(2):
        s = x[tid] * wp.float64(k)
        best = wp.max(best, s)
    for k in range(1):
        s = x[tid] + wp.float64(k)  # assigned before it is read in every iteration: nothing is carried
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = wp.float64(2.0) * s + best


# --- arrays of matrices made by wp.types.matrix(...), in helpers -------------------------------------------------

column = wp.types.matrix(shape=(2, 1), dtype=wp.float64)


@wp.func
def put_in_column(slot: int, value: wp.float64, out: wp.array(dtype=wp.types.matrix(shape=(2, 1), dtype=wp.float64))):
    out[slot][0, 0] = value  # a component written in place: nothing of out is read
    out[slot][1, 0] = value * value


@wp.kernel
def store_into_columns(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=column)):
    slot = wp.atomic_add(count, 0, 1)
    put_in_column(slot, x[wp.tid()], out)


@wp.func
def add_column(acc: wp.array(dtype=column), value: wp.float64, out: wp.array(dtype=wp.float64), tid: int):
    added = column()
    added[0, 0] = value
    added[1, 0] = value * value
    before = wp.atomic_add(acc, 0, added)  # a matrix returned: its records are arrays of the matrix type
    out[tid] = before[1, 0] * value


@wp.kernel
def running_columns(x: wp.array(dtype=wp.float64), acc: wp.array(dtype=column), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    add_column(acc, x[tid], out, tid)


# --- locals only what a generated kernel leaves out reads ---------------------------------------------------------


@wp.kernel
def offsets_per_trip(
    trips: wp.array(dtype=wp.int32),
    count: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    starts: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    for k in range(trips[tid]):  # of unknown length: a count kernel runs it first, without the stores
        slot = wp.atomic_add(count, 0, 1)
        start = slot * 2
        start += k  # read by the store below only
        starts[slot] = start
        out[slot] = x[tid] * wp.float64(k + 1)


@wp.kernel
def cursor_read_by_its_condition(
    trips: wp.array(dtype=wp.int32),
    count: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    pos = int(0)
    while pos < trips[tid]:  # the replay runs the recorded number of trips instead: pos is read by nothing there
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid]
        pos += 1


# --- a struct taken as Any, handed whole to helpers that declare its type --------------------------------------


@wp.struct
class Emitter:
    count: wp.array(dtype=wp.int32)
    capacity: int
    values: wp.array(dtype=wp.float64)


@wp.func
def put_value(emitter: Emitter, slot: int, value: wp.float64):
    if slot < emitter.capacity:
        emitter.values[slot] = value


@wp.func
def emit_value(emitter: Emitter, value: wp.float64):
    slot = wp.atomic_add(emitter.count, 0, 1)  # an int counter: no exact float return
    put_value(emitter, slot, value)


@wp.kernel
def emit_through_any(x: wp.array(dtype=wp.float64), emitter: Any):  # the writer is the caller's choice
    tid = wp.tid()
    if emitter.count[0] < emitter.capacity:  # a plain read of the counter
        emit_value(emitter, x[tid] * x[tid])
