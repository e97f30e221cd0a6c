"""Kernels whose helpers' replays Warp's backward runs again (tests/passes/test_two_phase.py): a helper whose replay
keeps a write into memory gets a ``@wp.func_replay`` twin that writes nothing; one whose replay writes nothing needs
none, and gets none.

- ``scatter_by_key``: Newton's hash table insert (``hashtable_find_or_insert``): a probe loop of ``atomic_cas`` on
  ``uint64`` keys, whose slot is carried out of it; its replay restores the slot and writes nothing: no twin;
- ``emit_wrapped``: a helper storing a float (kept in the replay, for its adjoint) under a wrapper that only calls
  it: both keep their twins, the wrapper's calling the inner twin.
"""

import warp as wp

EMPTY = wp.constant(wp.uint64(0xFFFFFFFFFFFFFFFF))


@wp.func
def find_or_insert(key: wp.uint64, keys: wp.array(dtype=wp.uint64), active: wp.array(dtype=wp.int32)) -> int:
    n = keys.shape[0]
    idx = int(key % wp.uint64(n))
    for _i in range(n):
        stored = keys[idx]
        if stored == key:
            return idx
        if stored == EMPTY:
            old = wp.atomic_cas(keys, idx, EMPTY, key)
            if old == EMPTY:
                slot = wp.atomic_add(active, n, 1)
                if slot < n:
                    active[slot] = idx
                return idx
        idx = (idx + 1) % n
    return -1


@wp.kernel
def scatter_by_key(
    x: wp.array(dtype=wp.float64),
    ids: wp.array(dtype=wp.uint64),
    keys: wp.array(dtype=wp.uint64),
    active: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    entry = find_or_insert(ids[tid], keys, active)
    if entry >= 0:
        out[entry] = x[tid] * x[tid] * wp.float64(entry + 1)


@wp.func
def emit(count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64), value: wp.float64) -> int:
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = value * value
    return slot


@wp.func
def emit_twice(count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64), value: wp.float64) -> int:
    first = emit(count, out, value)
    emit(count, out, value * wp.float64(first + 1))
    return first


@wp.kernel
def emit_wrapped(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    emit_twice(count, out, x[tid])
