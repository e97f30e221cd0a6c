"""Kernels whose count phase is cut down to what decides trip counts (``passes.count_slice``), each with loops of
unknown length, so that every launch counts trips in a dry run first (tests/passes/test_count_slice.py).

- ``support_point``: Newton's support map (``test_gjk.py``): a helper of many branches, one of which calls a helper
  with such a loop, another a ``@wp.func_native``; nothing the dry run keeps reads its value, so its count clone
  keeps only the branch with the loop;
- ``counted_by_helper``: a loop whose trip count is a helper's value, which the count kernel keeps;
- ``walk_and_branch``: a ``while`` loop, and an ``if`` chain whose middle branch has nothing left to count;
- ``scan_and_emit``: a loop, then Newton's contact emission (a counter's slot, or -1 when the buffer is full, and a
  store into it), which decides no trip count: the count kernel leaves out both, and the dry run copies neither
  array;
- ``insert_then_scan``: Newton's hash table insert (``hashtable_find_or_insert``, from another module, as Newton's
  tests call it), whose probe loop the replay restores from its records (its atomics record nothing), then a loop:
  the keys decide the probe's trips and are copied; the active-slot counter's slot only indexes a store, so its
  atomic goes from the count kernel, which would otherwise update the launch's own counter.
- ``closest_then_claim``: Newton's heightfield contacts (``soft_contacts_heightfield.py``): a helper's search over a
  range of cells, then, where the closest is near enough, a claim of the winning cell (``atomic_min`` of a key a
  ``@wp.func_native`` makes, into an array nothing reads back) and an emission: what is left of the claim is a
  value nothing reads, which goes, and once the emission goes too, nothing reads the search's value: its count clone
  keeps only the range it counts.
"""

import warp as wp

from tests.support.replay_twin_kernels import find_or_insert


@wp.func
def farthest(values: wp.array(dtype=wp.float64), n: int, d: wp.float64) -> wp.float64:
    best = wp.float64(-1.0e10)
    for i in range(n):
        best = wp.max(best, values[i] * d)
    return best


@wp.func_native("return 1.0 / sqrt(value);")
def native_rsqrt(value: wp.float64) -> wp.float64:
    """C++ the rewrite cannot read (Newton's ``_support_rsqrt_rn``), handed a value."""
    ...


@wp.func
def support(kind: int, values: wp.array(dtype=wp.float64), n: int, d: wp.float64) -> wp.float64:
    result = wp.float64(0.0)
    if kind == 0:
        result = farthest(values, n, d)
    elif kind == 1:
        result = wp.abs(d) * wp.float64(2.0)
        if native_rsqrt(d * d + wp.float64(1.0)) < wp.float64(0.5):
            result = -result
    else:
        result = wp.sqrt(d * d + wp.float64(1.0))
    return result


@wp.kernel
def support_point(
    kinds: wp.array(dtype=wp.int32),
    values: wp.array(dtype=wp.float64),
    counts: wp.array(dtype=wp.int32),
    directions: wp.array(dtype=wp.float64),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    out[tid] = support(kinds[tid], values, counts[tid], directions[tid]) * directions[tid]


@wp.func
def rising(values: wp.array(dtype=wp.float64), n: int) -> int:
    """How many times the running maximum rises: a trip count, no gradient."""
    rises = int(0)
    best = wp.float64(-1.0e10)
    for i in range(n):
        if values[i] > best:
            best = values[i]
            rises += 1
    return rises


@wp.kernel
def counted_by_helper(
    values: wp.array(dtype=wp.float64),
    counts: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    m = rising(values, counts[tid])
    s = wp.float64(1.0)
    for j in range(m):
        s = s * x[j] + wp.float64(1.0)
    out[tid] = s


@wp.kernel
def walk_and_branch(
    x: wp.array(dtype=wp.float64),
    counts: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    s = wp.float64(0.0)
    i = int(0)
    while s < wp.float64(2.5):
        s += x[i]
        i += 1
    t = wp.float64(1.0)
    if tid == 0:
        for j in range(counts[tid]):
            t = t * x[j]
    elif tid == 1:
        t = wp.float64(2.0)
    elif tid == 2:
        for j in range(counts[0]):
            t = t * x[j] + s
    out[tid] = s * t


@wp.func
def reserve(counter: wp.array(dtype=wp.int32), limit: int) -> int:
    """Newton's ``counter_increment``: the next slot, or -1 when the buffer is full."""
    slot = wp.atomic_add(counter, 0, 1)
    if slot < limit:
        return slot
    return -1


@wp.func
def emit(counter: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64), value: wp.float64):
    slot = reserve(counter, out.shape[0])
    if slot >= 0:
        out[slot] = value


@wp.kernel
def scan_and_emit(
    x: wp.array(dtype=wp.float64),
    counts: wp.array(dtype=wp.int32),
    counter: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    s = wp.float64(0.0)
    for j in range(counts[tid]):
        s = s * wp.float64(0.5) + x[j]
    if s > wp.float64(0.5):
        emit(counter, out, s * x[tid])


@wp.kernel
def insert_then_scan(
    x: wp.array(dtype=wp.float64),
    ids: wp.array(dtype=wp.uint64),
    keys: wp.array(dtype=wp.uint64),
    active: wp.array(dtype=wp.int32),
    counts: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    entry = find_or_insert(ids[tid], keys, active)
    s = wp.float64(0.0)
    for j in range(counts[tid]):
        s = s * wp.float64(0.5) + x[j]
    if entry >= 0:
        out[entry] = s * x[tid] + x[tid]


@wp.func_native("return (uint64_t)(value * 1.0e6);")
def order_bits(value: wp.float64) -> wp.uint64:
    """C++ the rewrite cannot read (Newton's ``float_flip``), handed a value."""
    ...


@wp.func
def closest(values: wp.array(dtype=wp.float64), begin: int, end: int, d: wp.float64):
    best = wp.float64(1.0e10)
    cell = int(-1)
    for i in range(begin, end):
        gap = wp.abs(values[i] - d)
        if gap < best:
            best = gap
            cell = i
    return best, cell


@wp.kernel
def closest_then_claim(
    values: wp.array(dtype=wp.float64),
    begins: wp.array(dtype=wp.int32),
    ends: wp.array(dtype=wp.int32),
    d: wp.array(dtype=wp.float64),
    winners: wp.array(dtype=wp.uint64),
    counter: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    distance, cell = closest(values, begins[tid], ends[tid], d[tid])
    if distance < wp.float64(0.5):
        key = (order_bits(distance) << wp.uint64(32)) | wp.uint64(cell)
        wp.atomic_min(winners, 0, key)
        emit(counter, out, distance * d[tid])
