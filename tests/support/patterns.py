"""The pattern kernels shared by the API's tests (test_core, test_coverage, test_exact) and the CLI's.

The API tests rewrite them with ``wp_rewrite``; test_cli runs ``wp-rewrite`` on this file and launches the
emitted module. One file, so that each of those compiles once.
"""

from typing import Any

import warp as wp

from tests.support.shared_helpers import GROWTH, append_scaled, claim_slot

# --- the reported kernel, compaction -----------------------------------------------------------------------


@wp.kernel
def scale_by_previous(x: wp.array[float], total: wp.array[float], y: wp.array[float]):
    previous = wp.atomic_add(total, 0, 1.0)  # the value before this thread's add
    y[0] = previous * x[0]


@wp.kernel
def compact_positive(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    v = x[tid]
    if v > wp.float64(0.0):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = v * v + wp.sin(v)


@wp.kernel
def compact_with_capacity(x: wp.array[wp.float64], count: wp.array[wp.int32], capacity: int, out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    if slot < capacity:
        out[slot] = x[tid] * x[tid] * x[tid]


# --- the other eight atomics ---------------------------------------------------------------------------------


@wp.kernel
def take_from_stack(x: wp.array[wp.float64], remaining: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    left = wp.atomic_sub(remaining, 0, 1)
    out[left - 1] = wp.cos(x[tid]) * wp.float64(left)


@wp.kernel
def scale_by_running_min(
    x: wp.array[wp.float64], keys: wp.array[wp.int32], best: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    smallest_so_far = wp.atomic_min(best, 0, keys[tid])
    out[tid] = x[tid] * wp.float64(smallest_so_far)


@wp.kernel
def scale_by_running_max(
    x: wp.array[wp.float64], keys: wp.array[wp.int32], best: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    largest_so_far = wp.atomic_max(best, 0, keys[tid])
    out[tid] = x[tid] * wp.float64(largest_so_far + 1)


@wp.kernel
def claim_lock(x: wp.array[wp.float64], locks: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    previous_owner = wp.atomic_cas(locks, tid % 3, 0, tid + 1)
    if previous_owner == 0:
        out[tid] = x[tid] * x[tid]
    else:
        out[tid] = x[tid] * wp.float64(previous_owner)


@wp.kernel
def chain_of_owners(x: wp.array[wp.float64], last: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    before = wp.atomic_exch(last, 0, tid)
    out[before + 1] = x[tid] * wp.float64(2.0)


@wp.kernel
def clear_bits(x: wp.array[wp.float64], mask: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    bits = wp.atomic_and(mask, 0, ~(1 << tid))
    out[tid] = x[tid] * wp.float64(bits % 7 + 1)


@wp.kernel
def set_bits(x: wp.array[wp.float64], mask: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    bits = wp.atomic_or(mask, 0, 1 << tid)
    out[tid] = x[tid] * wp.float64(bits + 1)


@wp.kernel
def toggle_bits(x: wp.array[wp.float64], mask: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    bits = wp.atomic_xor(mask, 0, 3 << tid)
    out[tid] = x[tid] * wp.float64(bits % 5 + 1)


# --- float and vector returns --------------------------------------------------------------------------------


@wp.kernel
def scale_by_peak(x: wp.array[wp.float64], peak: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    highest = wp.atomic_max(peak, 0, wp.float64(tid % 5))
    lowest = wp.atomic_min(peak, 1, wp.float64(tid % 3))
    out[tid] = highest * x[tid] + lowest * x[tid] * x[tid]


@wp.kernel
def project_on_running_sum(v: wp.array[wp.vec3d], acc: wp.array[wp.vec3d], out: wp.array[wp.float64]):
    tid = wp.tid()
    before = wp.atomic_add(acc, 0, wp.vec3d(wp.float64(1.0), wp.float64(2.0), wp.float64(3.0)))
    out[tid] = wp.dot(before, v[tid])


@wp.kernel
def accumulate_input(
    x: wp.array[wp.float64], z: wp.array[wp.float64], acc: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    before = wp.atomic_add(acc, 0, x[tid])
    out[tid] = before * z[tid]


# --- index arguments, several atomics ------------------------------------------------------------------------


@wp.kernel
def compact_rows(
    x: wp.array2d(dtype=wp.float64), counts: wp.array2d(dtype=wp.int32), out: wp.array3d(dtype=wp.float64)
):
    i, j = wp.tid()
    v = x[i, j]
    if v > wp.float64(0.0):
        slot = wp.atomic_add(counts, i, j % 2, 1)
        out[i, j % 2, slot] = v * v


@wp.kernel
def count_in_4d(x: wp.array[wp.float64], counts: wp.array4d(dtype=wp.int32), out: wp.array[wp.float64]):
    tid = wp.tid()
    seen = wp.atomic_add(counts, 0, tid % 2, 1, 0, 1)
    out[tid] = x[tid] * wp.float64(seen + 2)


@wp.kernel
def bucket_by_arrival(
    x: wp.array[wp.float64],
    count: wp.array[wp.int32],
    bucket_count: wp.array[wp.int32],
    out: wp.array2d(dtype=wp.float64),
):
    tid = wp.tid()
    arrival = wp.atomic_add(count, 0, 1)
    position = wp.atomic_add(bucket_count, arrival % 2, 1)
    out[arrival % 2, position] = x[tid] * wp.exp(x[tid] * wp.float64(0.1))


@wp.kernel
def reserve_then_take(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    if tid % 3 == 0:
        wp.atomic_add(count, 0, 1)  # a skipped slot: the slot below depends on it
    if tid % 2 == 0:
        count[0] += 1
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] + x[tid] * x[tid]


@wp.kernel
def plain_accumulate(x: wp.array[wp.float64], total: wp.array[wp.float64]):
    tid = wp.tid()
    wp.atomic_add(total, 0, x[tid] * x[tid])


# --- loops ----------------------------------------------------------------------------------------------------


@wp.kernel
def emit_particles(
    counts: wp.array[wp.int32],
    origin: wp.array[wp.float64],
    next_free: wp.array[wp.int32],
    positions: wp.array[wp.float64],
):
    """Particle emission: each emitter writes counts[tid] particles into the next free slots."""
    tid = wp.tid()
    for k in range(counts[tid]):
        slot = wp.atomic_add(next_free, 0, 1)
        positions[slot] = origin[tid] * origin[tid] + wp.float64(k) * wp.float64(0.5) * origin[tid]


@wp.kernel
def contacts_per_pair(x: wp.array[wp.float64], count: wp.array[wp.int32], contacts: wp.array[wp.float64]):
    tid = wp.tid()
    for corner in range(3):
        slot = wp.atomic_add(count, 0, 1)
        contacts[slot] = x[tid] * wp.float64(corner + 1) + wp.sin(x[tid])


@wp.kernel
def insert_keys(
    keys: wp.array[wp.int32],
    weights: wp.array[wp.float64],
    table: wp.array[wp.int32],
    n: int,
    values: wp.array[wp.float64],
):
    tid = wp.tid()
    key = keys[tid]
    slot = (key * 7) % n
    done = int(0)
    while done == 0:
        prev = wp.atomic_cas(table, slot, -1, key)
        if prev == -1 or prev == key:
            done = 1
        else:
            slot = (slot + 1) % n
    values[slot] = weights[tid] * weights[tid] + wp.float64(key)


# --- atomics in a while loop's condition (the rewrite moves the condition into the loop's body) ----------------


@wp.kernel
def spend_budget(
    x: wp.array[wp.float64], budget: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    while wp.atomic_sub(budget, tid % 3, 1) > 0:  # one unit of the thread's bucket per trip
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(slot + 1)


@wp.kernel
def spend_budget_skipping(
    x: wp.array[wp.float64], budget: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    while wp.atomic_sub(budget, tid % 3, 1) > 0:
        slot = wp.atomic_add(count, 0, 1)
        if slot % 3 == 1:
            continue  # tests the condition again: spends another unit
        out[slot] = x[tid] * x[tid] + wp.float64(slot)


@wp.func
def reserve_from_pool(available: wp.array[wp.int32], taken: wp.array[wp.int32]) -> int:
    """A slot of a shared pool, or -1 once it is empty: reserve against the pool's count, then take."""
    while wp.atomic_add(available, 0, -1) <= 0:
        if wp.atomic_add(available, 0, 1) < 0:  # hand the reservation back: the pool is empty
            return -1
    return wp.atomic_add(taken, 0, 1)


@wp.kernel
def fill_from_pool(
    x: wp.array[wp.float64], available: wp.array[wp.int32], taken: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    slot = reserve_from_pool(available, taken)
    if slot >= 0:
        out[slot] = x[tid] * x[tid] + wp.float64(slot)


@wp.kernel
def tally_under_a_lock(
    x: wp.array[wp.float64], lock: wp.array[wp.int32], tally: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    while wp.atomic_cas(lock, 0, 0, 1) == 1:
        pass
    seen = tally[0]
    tally[0] = seen + tid % 3 + 1
    wp.atomic_exch(lock, 0, 0)
    out[tid] = x[tid] * wp.float64(seen + 1)


@wp.func
def deposit_and_count_down(acc: wp.array[wp.float64], value: wp.float64, left: wp.array[wp.int32]) -> int:
    acc[0] += value  # differentiable: its adjoint must be replayed with every test of the condition
    return wp.atomic_sub(left, 0, 1)


@wp.kernel
def deposit_while_counting_down(x: wp.array[wp.float64], left: wp.array[wp.int32], acc: wp.array[wp.float64]):
    tid = wp.tid()
    while deposit_and_count_down(acc, x[tid] * x[tid], left) > 3:
        acc[1] += x[tid]


@wp.kernel
def take_until_full(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    k = int(0)
    while True:
        slot = wp.atomic_add(count, 0, 1)
        if slot >= 7:
            return  # the rewrite makes it a flag and a break: Warp's backward cannot replay a return from a loop
        out[slot] = x[tid] * wp.float64(k + 1)
        k += 1
        if k == 2:
            break
    out[7 + tid] = x[tid] * x[tid]


@wp.func
def pop_item(items: wp.array[wp.int32], head: wp.array[wp.int32]) -> tuple[bool, int]:
    """A lock-free pop: a compare-and-swap on the head, retried until it wins or the queue is empty. The rewrite
    makes its returns a flag, a local per element and a break."""
    while True:
        current = wp.atomic_add(head, 0, 0)
        if current >= items.shape[0]:
            return False, 0
        if wp.atomic_cas(head, 0, current, current + 1) == current:
            return True, items[current]


@wp.func
def first_to_mark(marks: wp.array[wp.int32], bucket: int) -> bool:
    while True:
        if wp.atomic_add(marks, bucket, 0) != 0:
            return False
        if wp.atomic_cas(marks, bucket, 0, 1) == 0:
            return True


@wp.kernel
def drain_work_queue(
    x: wp.array[wp.float64],
    items: wp.array[wp.int32],
    head: wp.array[wp.int32],
    marks: wp.array[wp.int32],
    out: wp.array[wp.float64],
):
    tid = wp.tid()
    found, item = pop_item(items, head)
    if found:
        out[item] = x[tid] * wp.float64(item + 1)
    if first_to_mark(marks, tid % 3):
        out[5 + tid % 3] = x[tid] * x[tid]


# --- helpers: in this file and imported -----------------------------------------------------------------------


@wp.func
def write_contact(
    count: wp.array[wp.int32], capacity: int, contacts: wp.array[wp.float64], value: wp.float64
) -> wp.int32:
    """A contact writer with a capacity guard that returns early when the buffer is full."""
    slot = wp.atomic_add(count, 0, 1)
    if slot >= capacity:
        return -1
    contacts[slot] = value
    return slot


@wp.kernel
def generate_contacts(
    x: wp.array[wp.float64],
    count: wp.array[wp.int32],
    capacity: int,
    contacts: wp.array[wp.float64],
    owner: wp.array[wp.float64],
):
    tid = wp.tid()
    first = write_contact(count, capacity, contacts, x[tid] * x[tid])
    if first >= 0:
        owner[first] = x[tid] * wp.float64(3.0)
    if x[tid] > wp.float64(0.0):
        second = write_contact(count, capacity, contacts, wp.sin(x[tid]))
        if second >= 0:
            owner[second] = x[tid] * wp.float64(second)


@wp.kernel
def append_imported(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    append_scaled(count, out, x[tid] * x[tid])
    tag = claim_slot(count)
    out[tag] = x[tid] * GROWTH


# --- structs, generic kernels, kernel options -----------------------------------------------------------------


@wp.struct
class PairWriter:
    count: wp.array(dtype=wp.int32)
    value: wp.array(dtype=wp.float64)


@wp.kernel
def write_pairs(x: wp.array[wp.float64], writer: PairWriter):
    tid = wp.tid()
    if x[tid] > wp.float64(-1.0):
        idx = wp.atomic_add(writer.count, 0, 1)
        writer.value[idx] = x[tid] * wp.exp(x[tid])


@wp.kernel
def compact_generic(x: wp.array(dtype=Any), count: wp.array[wp.int32], out: wp.array(dtype=Any)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] + x[tid]


@wp.kernel(module="unique", module_options={"deterministic": wp.DeterministicMode.RUN_TO_RUN})
def compact_deterministic(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * wp.cos(x[tid])


# --- exact gradients through float returns ---------------------------------------------------------------------


@wp.kernel
def per_bucket_sum(x: wp.array[wp.float64], acc: wp.array2d(dtype=wp.float64), out: wp.array[wp.float64]):
    tid = wp.tid()
    before = wp.atomic_add(acc, tid % 3, tid % 2, x[tid] * wp.float64(2.0))
    acc[tid % 3, 1 - tid % 2] += x[tid]  # an unconsumed add on the same target: later returns depend on it
    out[tid] = before * before + x[tid]


@wp.kernel
def hand_over(x: wp.array[wp.float64], slot: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    previous = wp.atomic_exch(slot, tid % 2, x[tid] * x[tid] + wp.float64(0.5))
    out[tid] = previous * wp.cos(x[tid])


@wp.kernel
def record_high(x: wp.array[wp.float64], peak: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    highest = wp.atomic_max(peak, 0, x[tid] * wp.float64(3.0))
    lowest = wp.atomic_min(peak, 1, x[tid] * x[tid] - wp.float64(1.0))
    out[tid] = highest * x[tid] + lowest * wp.float64(2.0)


@wp.kernel
def chained(
    x: wp.array[wp.float64], first: wp.array[wp.float64], second: wp.array[wp.float64], out: wp.array[wp.float64]
):
    """One float return feeds the next atomic's value: gradients flow back through both orders."""
    tid = wp.tid()
    a = wp.atomic_add(first, 0, x[tid])
    b = wp.atomic_add(second, 0, a * x[tid])
    out[tid] = b * wp.float64(0.5) + a


@wp.kernel
def float_returns_in_a_loop(x: wp.array[wp.float64], acc: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    for k in range(3):
        before = wp.atomic_add(acc, k % 2, x[tid] * wp.float64(k + 1))
        out[tid * 3 + k] = before * x[tid]
