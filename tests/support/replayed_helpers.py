"""A kernel whose only consumed atomic is in a helper with a hand-written ``@wp.func_replay`` (Newton's
``counter_increment``): rewritten by both front ends alike (tests/api/test_replayed_helpers.py)."""

import warp as wp


@wp.func
def counter_increment(count: wp.array(dtype=wp.int32), tids: wp.array(dtype=wp.int32), tid: int) -> int:
    slot = wp.atomic_add(count, 0, 1)
    tids[tid] = slot
    return slot


@wp.func_replay(counter_increment)
def counter_increment_replay(count: wp.array(dtype=wp.int32), tids: wp.array(dtype=wp.int32), tid: int):
    return tids[tid]


@wp.kernel
def compact_replayed(
    x: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.int32),
    tids: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    slot = counter_increment(count, tids, tid)
    out[slot] = x[tid] * x[tid] * wp.float64(slot + 1)
