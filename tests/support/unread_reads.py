"""Kernels reading memory the launch writes, where the replay needs some of the values read and not others
(tests/api/test_unread_reads.py): the replay keeps what carries gradients, so a read that only decides a write the
replay leaves out goes unrecorded (``pipeline.unread_reads``).

- ``keep_max_and_scale``: Newton's hash table update (``reduction_update_slot``): a helper reads a slot only to
  decide an int ``atomic_max`` on it, which carries no gradient; the kernel reads the slot again for a float it
  stores, which does: one read recorded of the two;
- ``guarded_store``: a read that decides whether a float is stored stays recorded (the replay keeps the store, and
  so its condition).
"""

import warp as wp


@wp.func
def update_slot(values: wp.array(dtype=wp.int32), slot: int, value: int):
    if values[slot] < value:
        wp.atomic_max(values, slot, value)


@wp.kernel
def keep_max_and_scale(
    x: wp.array(dtype=wp.float64),
    slots: wp.array(dtype=wp.int32),
    best: wp.array(dtype=wp.int32),
    count: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    update_slot(best, slots[tid], tid)
    k = wp.atomic_add(count, 0, 1)
    out[k] = x[tid] * x[tid] * wp.float64(best[slots[tid]] + 1)


@wp.kernel
def guarded_store(
    x: wp.array(dtype=wp.float64),
    best: wp.array(dtype=wp.int32),
    count: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    wp.atomic_max(best, 0, tid)
    if best[0] == tid:
        out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid]
